export { defineTool, completeToolExecution, deferred, ToolKind, ToolSideEffect } from '../index.js'
export type { ToolDefinition, ToolResult, ToolContext } from '../index.js'
