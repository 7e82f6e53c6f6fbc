'use strict'
// `agent-runtime-hooks/server`: the root's exports, with Blade's server profile for sessions: the
// built-in tools are off unless `builtinTools: true`.
const root = require('../index.js')

const serverProfile = (options) => (options?.builtinTools === undefined ? { ...options, builtinTools: false } : options)

module.exports = {
  ...root,
  createSession: (options) => root.createSession(serverProfile(options)),
  resumeSession: (options) => root.resumeSession(serverProfile(options)),
  forkSession: (options) => root.forkSession(serverProfile(options)),
}
