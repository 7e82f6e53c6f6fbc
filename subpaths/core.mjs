export * from './core.js'
