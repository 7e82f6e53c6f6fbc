export * from './tools.js'
