'use strict'
// The error classes callers catch, and `toError`, which rebuilds an error the binding described
// (`SdkError`'s JSON, src/error.rs) as one of them.

class SdkError extends Error {
  constructor(code, message, options) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }

  toJSON() {
    const json = { name: this.name, code: this.code, message: this.message }
    if (this.cause !== undefined) json.cause = this.cause
    return json
  }
}

/** Bad options; `field` names the option at fault (`advanced.hookTimeoutMs`, `tools[2].name`). */
class ConfigError extends SdkError {
  constructor(message, options) {
    super('CONFIG_ERROR', message, options)
    if (options?.field !== undefined) this.field = options.field
  }

  toJSON() {
    return this.field === undefined ? super.toJSON() : { ...super.toJSON(), field: this.field }
  }
}

class AbortError extends SdkError {
  constructor(message = 'Operation aborted', options) {
    super('ABORT', message, options)
  }
}

class HookTimeoutError extends SdkError {
  constructor(event, timeoutMs) {
    super('HOOK_TIMEOUT', `Hook ${event} exceeded ${timeoutMs}ms`)
    this.event = event
    this.timeoutMs = timeoutMs
  }

  toJSON() {
    return { ...super.toJSON(), event: this.event, timeoutMs: this.timeoutMs }
  }
}

class CriticalHookDeliveryError extends SdkError {
  constructor(hookId, cause) {
    super('CRITICAL_HOOK_DELIVERY', `Critical webhook delivery failed: ${hookId}`, cause === undefined ? undefined : { cause })
    this.hookId = hookId
  }
}

const ERROR_CLASSES = { CONFIG_ERROR: ConfigError, ABORT: AbortError }

const invalidInput = (message) => new SdkError('INVALID_INPUT', message)

/** A failure of the runtime itself (`ErrorCode::Internal`). */
const internalError = (message) => new SdkError('INTERNAL', message)

function messageOf(error) {
  try {
    if (error !== null && typeof error === 'object' && typeof error.message === 'string') return error.message
    return String(error)
  } catch {
    return 'an error that cannot be described'
  }
}

/**
 * An error the binding described as `{ code?, message, status?, thrown?, event?, timeoutMs?,
 * dispatch?, hookId?, cause? }`; no code is a plain `Error`. `scope` is the operation whose
 * thrown values and aborted dispatches it may name: those come back as the very same values.
 */
function toError(info, scope) {
  if (info.thrown !== undefined && scope?.thrown.has(info.thrown)) return scope.thrown.get(info.thrown)
  if (info.code === 'ABORT' && scope?.signal.aborted) return scope.signal.reason
  if (info.code === 'HOOK_TIMEOUT') return scope?.reasons.get(info.dispatch) ?? new HookTimeoutError(info.event, info.timeoutMs)
  if (info.code === undefined) return new Error(info.message)
  if (info.code === 'CRITICAL_HOOK_DELIVERY') return new CriticalHookDeliveryError(info.hookId, new Error(info.cause))
  const Class = ERROR_CLASSES[info.code]
  const error = Class ? new Class(info.message) : new SdkError(info.code, info.message)
  if (info.status !== undefined) error.status = info.status
  if (info.field !== undefined) error.field = info.field
  // CLEANUP_PENDING: which callback is still running.
  if (info.callback !== undefined) error.callback = info.callback
  return error
}

module.exports = {
  SdkError,
  ConfigError,
  AbortError,
  HookTimeoutError,
  CriticalHookDeliveryError,
  invalidInput,
  internalError,
  messageOf,
  toError,
}
