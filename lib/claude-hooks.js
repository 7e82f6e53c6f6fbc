'use strict'
// `loadClaudeHooks(pathOrSettings, { unsupported })`: a Claude Code settings file's hooks as
// command hook objects. The file is read and checked in Rust (`src/command_hook/settings.rs`).

const { native, unwrap } = require('./wire.js')
const { ConfigError } = require('./errors.js')

function loadClaudeHooks(source, options = {}) {
  const unsupported = options?.unsupported ?? 'error'
  if (unsupported !== 'error' && unsupported !== 'skip') {
    throw new ConfigError(`loadClaudeHooks's unsupported must be 'error' or 'skip' (got ${JSON.stringify(unsupported)})`)
  }
  return JSON.parse(unwrap(native.loadClaudeHooks(JSON.stringify(source ?? null), unsupported)))
}

module.exports = { loadClaudeHooks }
