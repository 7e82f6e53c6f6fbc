'use strict'
// `agent-runtime-hooks/tools`: defining tools, as Blade's `/tools` does.
const { defineTool, completeToolExecution, deferred, ToolKind, ToolSideEffect } = require('../index.js')

module.exports = { defineTool, completeToolExecution, deferred, ToolKind, ToolSideEffect }
