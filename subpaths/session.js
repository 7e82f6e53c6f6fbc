'use strict'
// `agent-runtime-hooks/session`: Blade's session API.
const { createSession, resumeSession, forkSession, prompt, InputPriority } = require('../index.js')

module.exports = { createSession, resumeSession, forkSession, prompt, InputPriority }
