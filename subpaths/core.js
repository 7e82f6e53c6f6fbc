'use strict'
// `agent-runtime-hooks/core`: the constants and error classes, as Blade's `/core` has them.
const { InputPriority, ToolKind, ToolSideEffect, PermissionMode, PermissionDecision, HookEvent, HookTimeoutErrorCode, SdkError, ConfigError, AbortError, HookTimeoutError } = require('../index.js')

module.exports = { InputPriority, ToolKind, ToolSideEffect, PermissionMode, PermissionDecision, HookEvent, HookTimeoutErrorCode, SdkError, ConfigError, AbortError, HookTimeoutError }
