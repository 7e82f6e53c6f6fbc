// The root's exports, with server.js's sessions (the built-in tools off unless asked for); named
// here because Node cannot read names out of server.js's spread.
import server from './server.js'

export * from '../index.js'
export const { createSession, resumeSession, forkSession } = server
