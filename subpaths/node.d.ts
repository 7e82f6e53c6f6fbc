export * from '../index.js'
