export * from './node.js'
