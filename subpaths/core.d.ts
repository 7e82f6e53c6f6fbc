export { InputPriority, ToolKind, ToolSideEffect, PermissionMode, PermissionDecision, HookEvent, HookTimeoutErrorCode, SdkError, ConfigError, AbortError, HookTimeoutError } from '../index.js'
