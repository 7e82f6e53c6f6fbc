export * from './session.js'
