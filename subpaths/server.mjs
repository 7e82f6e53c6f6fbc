export * from './server.js'
