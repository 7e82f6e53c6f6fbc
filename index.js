'use strict'
// The public API, kept thin: every export is an async JS function (promises of the caller's
// own realm, even under Jest), the error classes are real JS classes, and the AbortSignal
// plumbing is JS. Options, the loop, tools' results and events are handled in Rust. This file
// names the exports and enums; the rest is split by concern:
//
// lib/errors.js   the error classes and `toError`
// lib/wire.js     how values cross to Rust and back: the one result shape of the binding's
//                 functions, the options' functions, and what Rust calls (`invoke`, ...)
// lib/response.js `AgentResponse`, one run's events
// lib/agent.js    `Agent`, `createAgent`, `resumeAgent`, and the functions that reach a store
// lib/session.js  Blade's session API: `createSession`, `resumeSession`, `forkSession`,
//                 `prompt`, and the `Session` they open (a second door into the same session)
// lib/providers.js `ProviderRegistry` (models of the caller's own) and `scriptedModel`
// lib/builtins.js  `getBuiltinTools()`, the built-in tools that run in Rust
// lib/schemas.js   tools' schemas given as zod / Valibot / ArkType schemas, as JSON Schema
// lib/claude-hooks.js  `loadClaudeHooks()`, a Claude Code settings file's hooks as hook objects

const { SdkError, ConfigError, AbortError, HookTimeoutError, CriticalHookDeliveryError } = require('./lib/errors.js')
const { native, unwrap, DEFERRED } = require('./lib/wire.js')
const { AgentResponse } = require('./lib/response.js')
const { createAgent, resumeAgent, completeToolCall, drainOutbox, approvalToken } = require('./lib/agent.js')
const { createSession, resumeSession, forkSession, prompt } = require('./lib/session.js')
const { ProviderRegistry, scriptedModel } = require('./lib/providers.js')
const { getBuiltinTools } = require('./lib/builtins.js')
const { loadClaudeHooks } = require('./lib/claude-hooks.js')

const HookEvent = Object.freeze({
  PreToolUse: 'PreToolUse',
  PostToolUse: 'PostToolUse',
  PostToolUseFailure: 'PostToolUseFailure',
  PermissionRequest: 'PermissionRequest',
  UserPromptSubmit: 'UserPromptSubmit',
  SessionStart: 'SessionStart',
  SessionEnd: 'SessionEnd',
  TaskCompleted: 'TaskCompleted',
})

/** Sends the spans batched for OpenTelemetry export now; resolves at once when export is off. */
async function flushTelemetry() {
  unwrap(await native.flushTelemetry())
}

function defineTool(definition) {
  return definition
}

/** A tool returns `deferred()` when its result comes later: the call pauses (`pendingApprovals`
 * with `reason: 'deferred'`) until `completeToolCall` publishes it. */
function deferred() {
  return Object.freeze({ [DEFERRED]: true })
}

/** Blade's helper: a generator that yields nothing and returns `result`. */
async function* completeToolExecution(result) {
  return result
}

const ToolKind = Object.freeze({ ReadOnly: 'readonly', Write: 'write', Execute: 'execute' })
const ToolSideEffect = Object.freeze({ PURE: 'pure', IDEMPOTENT: 'idempotent', NON_IDEMPOTENT: 'non_idempotent' })
const PermissionMode = Object.freeze({ DEFAULT: 'default', AUTO_EDIT: 'autoEdit', YOLO: 'yolo', PLAN: 'plan' })
const PermissionDecision = Object.freeze({ ALLOW: 'allow', DENY: 'deny', ASK: 'ask' })
const HookTimeoutErrorCode = 'HOOK_TIMEOUT'
/** Blade's steering priorities (`session.send(message, { priority })`). */
const InputPriority = Object.freeze({ NOW: 'now', NEXT: 'next', LATER: 'later' })

module.exports = {
  createAgent,
  resumeAgent,
  createSession,
  resumeSession,
  forkSession,
  prompt,
  ProviderRegistry,
  getBuiltinTools,
  defineTool,
  completeToolExecution,
  deferred,
  completeToolCall,
  drainOutbox,
  approvalToken,
  loadClaudeHooks,
  scriptedModel,
  flushTelemetry,
  AgentResponse,
  HookEvent,
  ToolKind,
  ToolSideEffect,
  PermissionMode,
  PermissionDecision,
  InputPriority,
  HookTimeoutErrorCode,
  SdkError,
  HookTimeoutError,
  ConfigError,
  AbortError,
  CriticalHookDeliveryError,
}
