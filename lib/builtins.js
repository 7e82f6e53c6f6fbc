'use strict'
// Blade's `getBuiltinTools()`: the built-in tools (Read, Write, Edit, Glob, Grep, Bash,
// KillShell, TaskOutput, WebFetch, NotebookEdit, TodoWrite, EnterPlanMode, ExitPlanMode, AskUserQuestion), which run in Rust (src/builtins), as tool objects for `tools: [...]`.
// Each carries `builtin: <its name>`, which the options reader turns back into the Rust tool.

const native = require('../binding.js')

let described

/** Fresh tool objects each call, so a caller's edits stay its own. Blade's options are accepted and not read. */
function getBuiltinTools(_options) {
  described ??= JSON.parse(native.builtinTools())
  return described.map((tool) => ({ ...structuredClone(tool), builtin: tool.name }))
}

module.exports = { getBuiltinTools }
