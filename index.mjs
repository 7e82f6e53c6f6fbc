// ESM entry: Node reads the CommonJS export names from `module.exports = { … }` in index.js.
export * from './index.js'
export { default } from './index.js'
