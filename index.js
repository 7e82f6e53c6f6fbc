'use strict'
// The public API. It stays thin: every export is an async JS function (promises of the
// caller's own realm, even under Jest), the error classes are real JS classes, and AbortSignal
// plumbing lives here. Options, the loop, tools' results and events are handled in Rust.

const native = require('./binding.js')

const FUNCTION_KEY = '$function'
// Marks an option value JSON cannot carry (NaN, Infinity, a bigint, a symbol), so Rust can name it.
const JS_VALUE_KEY = '$js'

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

class ConfigError extends SdkError {
  constructor(message, options) {
    super('CONFIG_ERROR', message, options)
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

const ERROR_CLASSES = { CONFIG_ERROR: ConfigError, ABORT: AbortError }

function messageOf(error) {
  try {
    if (error !== null && typeof error === 'object' && typeof error.message === 'string') return error.message
    return String(error)
  } catch {
    return 'an error that cannot be described'
  }
}

function isError(value) {
  return value instanceof Error || Object.prototype.toString.call(value) === '[object Error]'
}

/** An error the binding described as `{ code, message, status?, thrown?, event?, timeoutMs?, dispatch? }`. */
function toError(info, scope) {
  if (info.thrown !== undefined && scope?.thrown.has(info.thrown)) return scope.thrown.get(info.thrown)
  if (info.code === 'ABORT' && scope?.signal.aborted) return scope.signal.reason
  if (info.code === 'HOOK_TIMEOUT') return scope?.reasons.get(info.dispatch) ?? new HookTimeoutError(info.event, info.timeoutMs)
  if (info.code === '') return new Error(info.message)
  if (info.code === 'CRITICAL_HOOK_DELIVERY') return new CriticalHookDeliveryError(info.hookId, new Error(info.cause))
  const Class = ERROR_CLASSES[info.code]
  const error = Class ? new Class(info.message) : new SdkError(info.code, info.message)
  if (info.status !== undefined) error.status = info.status
  return error
}

/**
 * Replaces every function in `value` with `{ "$function": n }`, so options cross into Rust as
 * JSON; the functions stay here and are called by number (with their object as `this`).
 * Values JSON would silently change (NaN, Infinity, bigints, symbols) become `{ "$js": text }`,
 * for Rust to name. A cycle, or a getter that throws, is refused with `refuse(message)`'s
 * error, naming where it is (`root` names `value` itself).
 */
function splitFunctions(value, root = 'the options', refuse = (message) => new ConfigError(message)) {
  const functions = []
  /** The objects being walked, with where they are (`''` for the value itself). */
  const open = new Map()
  const describe = (path) => (path === '' ? root : path)
  const walk = (value, owner, path) => {
    if (typeof value === 'function') {
      functions.push({ fn: value, owner })
      return { [FUNCTION_KEY]: functions.length - 1 }
    }
    if ((typeof value === 'number' && !Number.isFinite(value)) || typeof value === 'bigint' || typeof value === 'symbol') {
      return { [JS_VALUE_KEY]: typeof value === 'bigint' ? `${value}n` : String(value) }
    }
    if (value === null || typeof value !== 'object') return value
    if (open.has(value)) {
      const subject = root === 'the options' ? 'options contain' : `${root} contains`
      throw refuse(`${subject} a circular reference: ${describe(path)} refers back to ${describe(open.get(value))}`)
    }
    open.set(value, path)
    let copy
    try {
      copy = Array.isArray(value) ? value.map((item, index) => walk(item, undefined, `${path}[${index}]`)) : {}
      if (!Array.isArray(value)) for (const [key, item] of Object.entries(value)) copy[key] = walk(item, value, path === '' ? key : `${path}.${key}`)
    } catch (error) {
      if (error instanceof SdkError) throw error
      throw refuse(`${describe(path)} could not be read: ${messageOf(error)}`)
    }
    open.delete(value)
    return copy
  }
  return { data: walk(value, undefined, ''), functions }
}

const invalidInput = (message) => new SdkError('INVALID_INPUT', message)

/** An AbortSignal of any realm (Jest's VM realm has its own class). */
function isSignal(value) {
  return value !== null && typeof value === 'object' && typeof value.aborted === 'boolean' && typeof value.addEventListener === 'function'
}

const NEVER_ABORTED = new AbortController().signal

/** Rust schedules its work on the JS thread through a threadsafe function made on this no-op. */
function wakeNothing() {}

// Node's own, not the global a test's fake timers replace: a run's turns must not wait for them.
const { setImmediate: immediate } = require('node:timers')

/** Resolves on a later turn of the event loop, once its timers and I/O had their turn: Rust
 * awaits it between the steps of a run that has held the loop for a while. */
function nextTurn() {
  return new Promise((resolve) => immediate(resolve, ''))
}

/**
 * One caller-side operation (`createAgent`, a `send`, `close`): the signal its user functions
 * get, the values they threw (so the caller can get the very same one back), and the signals
 * of its hook dispatches, which Rust aborts at their deadline.
 */
class Scope {
  constructor(signal = NEVER_ABORTED) {
    this.signal = signal
    this.thrown = new Map()
    this.dispatches = new Map()
    this.reasons = new Map()
    this.generators = new Map()
    this.nextGenerator = 1
  }

  /** Keeps a generator a tool returned, for `stepGenerator`. */
  keepGenerator(generator) {
    const id = this.nextGenerator++
    this.generators.set(id, generator)
    return id
  }

  keep(error) {
    const id = this.thrown.size + 1
    this.thrown.set(id, error)
    return id
  }

  /** The signal of dispatch `id`; `linked` also follows the operation's own signal. */
  dispatchSignal(id, linked) {
    if (this.reasons.has(id)) return AbortSignal.abort(this.reasons.get(id))
    let entry = this.dispatches.get(id)
    if (!entry) {
      const controller = new AbortController()
      entry = { controller, signal: linked ? AbortSignal.any([this.signal, controller.signal]) : controller.signal }
      this.dispatches.set(id, entry)
    }
    return entry.signal
  }

  /** Rust's clock ran out for dispatch `id`: abort its signal with a HookTimeoutError (a
   * tool's, event `''`: with the tool timeout's error). */
  timeOut(id, event, timeoutMs) {
    const reason = event === '' ? new SdkError('TOOL_TIMEOUT', `Tool execution timeout after ${timeoutMs}ms`) : new HookTimeoutError(event, timeoutMs)
    this.reasons.set(id, reason)
    this.dispatches.get(id)?.controller.abort(reason)
    this.dispatches.delete(id)
  }
}

/** Where an input's lazily made dispatch signal comes from, kept on a hidden key. */
const SIGNAL_SOURCE = Symbol('signalSource')
const sourceDescriptor = { value: null, enumerable: false, configurable: true, writable: false }
/** One getter for every input: V8 then reuses the objects' shapes instead of making new ones. */
const lazySignalDescriptors = new Map()

function lazySignalDescriptor(key) {
  let descriptor = lazySignalDescriptors.get(key)
  if (!descriptor) {
    descriptor = {
      get() {
        // A getter copied onto another object by its descriptor has no source there.
        const source = this?.[SIGNAL_SOURCE]
        return source === undefined ? undefined : source.scope.dispatchSignal(source.dispatch, source.linked)
      },
      enumerable: true,
      configurable: true,
    }
    lazySignalDescriptors.set(key, descriptor)
  }
  return descriptor
}

function defineLazySignal(target, key, scope, dispatch, linked) {
  sourceDescriptor.value = { scope, dispatch, linked }
  Object.defineProperty(target, SIGNAL_SOURCE, sourceDescriptor)
  sourceDescriptor.value = null
  Object.defineProperty(target, key, lazySignalDescriptor(key))
}

/** How Rust wants a function's return read (`Reply` in src/host.rs). */
const REPLY_DATA = 0
const REPLY_DATA_WITH_MOCK = 1
const REPLY_TOOL = 3
const REPLY_HANDLER = 4

/** A value that is not plain data, found by `checkPlainData`: what is wrong, and where. */
class NotData extends Error {
  constructor(problem) {
    super(problem)
    this.problem = problem
    /** The keys leading to it, outermost first (`.a`, `[0]`). */
    this.where = []
  }

  /** `the value.a[0] is a getter` */
  describe() {
    return `the value${this.where.join('')} ${this.problem}`
  }
}

/** Deeper than this is taken for a cycle (JSON.stringify would refuse one anyway). */
const MAX_DATA_DEPTH = 100
const { isProxy } = require('node:util').types

/**
 * Checks that `value` is plain data, for decisions and hook outputs: only own enumerable data
 * properties, so that `JSON.stringify` then reads exactly what was checked. A getter (it could
 * answer differently on each read, or throw), a `toJSON` (it could replace what was checked), a
 * Proxy, a function, a symbol, a bigint or a cycle throws `NotData` naming where it is. Checked
 * in place, nothing copied: this runs for every hook output.
 */
function checkPlainData(value, depth = 0) {
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'undefined':
    case 'number':
      return
    case 'object':
      break
    default:
      throw new NotData(`is ${describeValue(value)}`)
  }
  if (value === null) return
  if (depth > MAX_DATA_DEPTH) throw new NotData('is nested too deeply, or circular')
  if (isProxy(value)) throw new NotData('is a Proxy')
  if (typeof value.toJSON === 'function') throw new NotData('has a toJSON method')
  const array = Array.isArray(value)
  for (const key of Object.keys(value)) {
    const descriptor = Object.getOwnPropertyDescriptor(value, key)
    try {
      if (descriptor !== undefined && !('value' in descriptor)) throw new NotData('is a getter')
      checkPlainData(descriptor?.value, depth + 1)
    } catch (error) {
      if (error instanceof NotData) error.where.unshift(array ? `[${key}]` : `.${key}`)
      throw error
    }
  }
}

function describeValue(value) {
  if (typeof value === 'function') return 'a function'
  if (typeof value === 'symbol') return 'a symbol'
  if (typeof value === 'bigint') return 'a bigint'
  if (typeof value === 'object') return 'an object'
  return typeof value
}

const GENERATOR_TAGS = new Set(['[object Generator]', '[object AsyncGenerator]'])

/** What `deferred()` returns: the tool's result comes later, from `completeToolCall`. */
const DEFERRED = Symbol.for('agent-runtime-hooks.deferred')
const isDeferred = (value) => value !== null && typeof value === 'object' && value[DEFERRED] === true

/**
 * What a tool returned that JSON would flatten to `{}` or drop: a function, a symbol, an
 * iterator or iterable that is not an array or a generator. `undefined` when it is JSON.
 */
function notJson(value) {
  if (typeof value === 'function' || typeof value === 'symbol') return describeValue(value)
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return undefined
  if (typeof value.next === 'function') return 'an iterator that is not a generator'
  if (typeof value[Symbol.iterator] === 'function' || typeof value[Symbol.asyncIterator] === 'function') {
    return `an iterable ${Object.prototype.toString.call(value).slice(8, -1)}`
  }
  return undefined
}

/**
 * The function Rust calls for every user function:
 * `invoke(fn, argsJson, scope, reply, signalArg, signalKey, dispatch, last, linked, errorJson)`.
 * `args[signalArg][signalKey]` gets a signal (none when `signalArg` is -1): the scope's own, or
 * dispatch `dispatch`'s, made on first use (`last`: the dispatch's last call; `linked`: it also
 * follows the scope's signal). `errorJson` is `[arg, key, message, thrown]`: `args[arg][key]`
 * gets the thrown value itself, or a new Error. `reply` says how the return is read (see
 * `Reply` in src/host.rs): as plain data (with `mock()` for PreToolUse), as JSON, or as a
 * tool's return (a generator is kept for `stepGenerator`). The reply is that text, `''` for
 * `undefined`, or `'!'` and `{ message, thrown }` when the function threw or its value could
 * not be read; a promise of it when the function returned one.
 */
function makeInvoke(functions, scopes) {
  return function invoke(fn, argsJson, scopeId, reply, signalArg, signalKey, dispatch, last, linked, errorJson) {
    const args = JSON.parse(argsJson)
    const scope = scopes.get(scopeId) ?? new Scope()
    // PreToolUse: `input.mock(result)`; the first call wins and is reported with the reply, as
    // the JSON text it had when mocked. A result that is not plain data is reported as such:
    // the call then fails (never runs).
    let mocked
    if (reply === REPLY_DATA_WITH_MOCK) {
      args[0].mock = (result) => {
        if (mocked !== undefined || result === undefined) return false
        try {
          checkPlainData(result)
          mocked = JSON.stringify(result)
        } catch (error) {
          mocked = JSON.stringify({ [JS_VALUE_KEY]: `a value that is not plain data (${error instanceof NotData ? error.describe() : messageOf(error)})` })
        }
        return true
      }
    }
    if (signalArg >= 0 && dispatch === null) args[signalArg][signalKey] = scope.signal
    // A dispatch's signal is made on first use: most callbacks never look at it.
    else if (signalArg >= 0) defineLazySignal(args[signalArg], signalKey, scope, dispatch, linked)
    if (errorJson !== null) {
      const [arg, key, message, thrownId] = JSON.parse(errorJson)
      const thrown = thrownId == null ? undefined : scope.thrown.get(thrownId)
      args[arg][key] = isError(thrown) ? thrown : new Error(message)
    }
    const settled = (value) => {
      if (dispatch !== null && last) scope.dispatches.delete(dispatch)
      return encodeReply(value, reply, scope, mocked, functions)
    }
    const failed = (thrown) => {
      // A callback that mocked and then threw still mocked: the mock wins.
      if (mocked !== undefined) return settled(undefined)
      if (dispatch !== null) scope.dispatches.delete(dispatch)
      return failure(thrown, scope)
    }
    // Reply at once to a plain value; through a promise only when the function returned one.
    let returned
    try {
      const { fn: user, owner } = functions[fn]
      returned = user.apply(owner, args)
    } catch (thrown) {
      return failed(thrown)
    }
    try {
      const thenable = returned !== null && (typeof returned === 'object' || typeof returned === 'function') && typeof returned.then === 'function'
      if (thenable) return Promise.resolve(returned).then(settled, failed).then(undefined, failed)
      return settled(returned)
    } catch (thrown) {
      return failed(thrown)
    }
  }
}

/** `!` and `{ message, thrown }`: `thrown` numbers the value kept in the scope. */
function failure(thrown, scope) {
  try {
    return `!${JSON.stringify({ message: messageOf(thrown), thrown: scope.keep(thrown) })}`
  } catch {
    return '!{"message":"an error that cannot be described"}'
  }
}

/** The reply text for `value`, read as `reply` says. Throws when it cannot be read. */
function encodeReply(value, reply, scope, mocked, functions) {
  if (reply === REPLY_HANDLER) {
    // confirmationHandlerFactory's handler: its method is kept and called by number.
    if (value === null || typeof value !== 'object' || typeof value.requestConfirmation !== 'function') {
      return JSON.stringify({ [JS_VALUE_KEY]: value === null ? 'null' : `${describeValue(value)} without a requestConfirmation method` })
    }
    functions.push({ fn: value.requestConfirmation, owner: value })
    return `{"function":${functions.length - 1}}`
  }
  if (reply === REPLY_TOOL) {
    if (isDeferred(value)) return '{"deferred":true}'
    if (value !== null && typeof value === 'object' && GENERATOR_TAGS.has(Object.prototype.toString.call(value))) {
      return `{"generator":${scope.keepGenerator(value)}}`
    }
    const invalid = notJson(value)
    if (invalid !== undefined) return JSON.stringify({ invalid })
    const json = JSON.stringify(value)
    return json === undefined ? '{}' : `{"returned":${json}}`
  }
  if (reply === REPLY_DATA || reply === REPLY_DATA_WITH_MOCK) {
    // Not data: Rust gets a marker it names, and treats as the invalid decision it is.
    try {
      checkPlainData(value)
    } catch (error) {
      if (!(error instanceof NotData)) throw error
      value = { [JS_VALUE_KEY]: `a value that is not plain data (${error.describe()})` }
    }
  }
  if (reply === REPLY_DATA_WITH_MOCK) {
    const returned = JSON.stringify(value)
    const parts = [returned === undefined ? '' : `"returned":${returned}`, mocked === undefined ? '' : `"mocked":${mocked}`]
    return `{${parts.filter(Boolean).join(',')}}`
  }
  return JSON.stringify(value) ?? ''
}

/**
 * Advances generator `id` of scope `scopeId` (a tool's): `finish` calls `return()`. Replies
 * `{ done, value }`, `{ done, invalid }`, or a failure as `invoke` does; a promise of it for
 * an async generator.
 */
function makeStepGenerator(scopes) {
  return function stepGenerator(scopeId, id, finish) {
    const scope = scopes.get(scopeId)
    const generator = scope?.generators.get(id)
    if (generator === undefined) return '{"done":true}'
    const settled = ({ done, value } = {}) => {
      if (done) scope.generators.delete(id)
      if (done && isDeferred(value)) return '{"done":true,"deferred":true}'
      const invalid = notJson(value)
      if (invalid !== undefined) return JSON.stringify({ done: Boolean(done), invalid })
      const json = JSON.stringify(value)
      return json === undefined ? `{"done":${Boolean(done)}}` : `{"done":${Boolean(done)},"value":${json}}`
    }
    const failed = (thrown) => {
      scope.generators.delete(id)
      return failure(thrown, scope)
    }
    try {
      const step = finish ? generator.return(undefined) : generator.next()
      if (typeof step?.then === 'function') return Promise.resolve(step).then(settled, failed).then(undefined, failed)
      return settled(step)
    } catch (thrown) {
      return failed(thrown)
    }
  }
}

/** Rust's clock ran out for dispatch `dispatch` of scope `scopeId`: abort its signal. */
function makeAbortDispatch(scopes) {
  return function abortDispatch(scopeId, dispatch, event, timeoutMs) {
    scopes.get(scopeId)?.timeOut(dispatch, event, timeoutMs)
    return ''
  }
}

/** Picks `textStream()`'s chunks: content deltas, or (as Blade does) a successful run's
 * content once when no delta came; throws the run's error. */
function textPicker() {
  let streamed = false
  return (event) => {
    if (event.type === 'content') {
      streamed = true
      return event.delta
    }
    if (event.type === 'error') throw event.error
    if (event.type === 'result' && !streamed && event.content) return event.content
    return undefined
  }
}

class AgentResponse {
  #run
  #scope
  #sessionId
  #events = []
  /** The last event (result or error) has been taken from the run. */
  #ended = false
  #settled = false
  #finished
  #pulling = null
  #everyEvent = false
  /** `on()` listeners by event type, awaited in order before iterators see the event. */
  #listeners = new Map()
  #submission
  /** The pump `on()` starts. */
  #consume = null
  /** Resolves when the next event is published to iterators (or the events end). */
  #arrival = null

  constructor(run, scope, sessionId, onSettled) {
    this.#run = run
    this.#scope = scope
    this.#sessionId = sessionId
    this.#submission = Object.freeze({ status: 'started', inputId: run.inputId, requestId: run.requestId })
    // One crossing per run: it keeps Node alive while the run works, and says when it is over.
    const settle = () => {
      this.#settled = true
      onSettled()
    }
    this.#finished = run.finished().then(settle, settle)
  }

  /** Blade's submission: `{ status: 'started', inputId, requestId }`. */
  get submission() {
    return this.#submission
  }

  /** Takes every event published since the last pull, waiting for at least one. */
  #pull() {
    this.#pulling ??= this.#run.next().then(
      async (batch) => {
        if (batch === null) {
          this.#ended = true
        } else {
          try {
            for (const event of JSON.parse(batch)) {
              if (event.type === 'error') event.error = toError(event.error, this.#scope)
              // Awaited only where there are listeners: most events of most runs have none.
              const listeners = this.#listeners.get(event.type)
              if (listeners !== undefined) for (const listener of listeners) await listener(event)
              this.#events.push(event)
              if (event.type === 'result' || event.type === 'error') this.#ended = true
              // Iterators see each event as soon as its own listeners are done.
              this.#arrived()
            }
          } catch (error) {
            // An `on()` listener threw: the events end with its error.
            this.#fail(error)
          }
        }
        this.#pulling = null
        this.#arrived()
      },
      (error) => {
        this.#pulling = null
        this.#fail(new SdkError('INTERNAL', messageOf(error)))
        this.#arrived()
      },
    )
    return this.#pulling
  }

  #arrived() {
    const arrival = this.#arrival
    this.#arrival = null
    arrival?.resolve()
  }

  /** Waits until an event more is there for iterators, or the events ended. */
  #more() {
    if (this.#arrival === null) {
      let resolve
      const promise = new Promise((done) => (resolve = done))
      this.#arrival = { promise, resolve }
    }
    const { promise } = this.#arrival
    this.#pull()
    return promise
  }

  /** Ends the events with an error of the response itself (not of the run). */
  #fail(error) {
    this.#events.push({ type: 'error', message: error.message, code: error.code, error, sessionId: this.#sessionId })
    this.#ended = true
  }

  get isSettled() {
    return this.#settled
  }

  /** Every event of the run; each call starts again from the first. */
  stream() {
    this.#wantEveryEvent()
    return this.#select((event) => event)
  }

  #wantEveryEvent() {
    // Until now a waiting pull woke only for text or the run's end.
    if (!this.#everyEvent) {
      this.#everyEvent = true
      this.#run.wantEveryEvent()
    }
  }

  /**
   * Calls `listener` with every event of `type` (awaited, in order, before iterators see the
   * event) and starts consuming the run. Returns the response.
   */
  on(type, listener) {
    if (typeof listener !== 'function') throw invalidInput(`on() takes a listener function (got ${typeof listener})`)
    let listeners = this.#listeners.get(type)
    if (listeners === undefined) this.#listeners.set(type, (listeners = []))
    listeners.push(listener)
    this.#wantEveryEvent()
    this.#consume ??= this.#consumeAll()
    return this
  }

  async #consumeAll() {
    while (!this.#ended) await this.#pull()
  }

  /** The text deltas of the run; throws the run's error. */
  textStream() {
    return this.#select(textPicker())
  }

  /** The run's events as `pick` maps them (`undefined` skips one), from the first. */
  async *#select(pick) {
    let index = 0
    for (;;) {
      while (index < this.#events.length) {
        const picked = pick(this.#events[index++])
        if (picked !== undefined) yield picked
      }
      if (this.#ended) return
      await this.#more()
    }
  }

  async result() {
    // Once the run is over, one pull takes all of its events; the result or error among them is the outcome.
    await this.#finished
    while (!this.#ended) await this.#pull()
    for (const event of this.#events) {
      if (event.type === 'result') return event.result
      if (event.type === 'error') throw event.error
    }
    throw new SdkError('INTERNAL', 'The run ended without a result')
  }

  async text() {
    return (await this.result()).content
  }
}

class Agent {
  #native
  #scopes
  #options
  #nextScope = 1
  #active = null
  #closing = null

  constructor(nativeAgent, scopes, options) {
    this.#native = nativeAgent
    this.#scopes = scopes
    this.#options = options
  }

  get sessionId() {
    return this.#native.sessionId
  }

  get isClosed() {
    return this.#native.isClosed
  }

  get messages() {
    return JSON.parse(this.#native.messages())
  }

  async send(message, options = {}) {
    const encoded = JSON.stringify(splitFunctions(message, 'the message', invalidInput).data) ?? 'null'
    return this.#start(options, 'send', (scopeId, runOptions) => this.#native.send(encoded, scopeId, runOptions, process.env))
  }

  /** Goes on with a run paused for approvals, once each waiting call has a decision. */
  async resume(options = {}) {
    return this.#start(options, 'resume', (scopeId, runOptions) => this.#native.resume(scopeId, runOptions, process.env))
  }

  /** The calls a paused run waits on: `{ toolCallId, toolName, input, fingerprint, reason, token? }`. */
  get pendingApprovals() {
    return JSON.parse(this.#native.pendingApprovals())
  }

  /** Approves a paused call: `{ updatedInput?, token? }`. */
  async approve(toolCallId, options = {}) {
    await this.#decide(true, toolCallId, options)
  }

  /** Rejects a paused call: `{ reason?, stop? }`. */
  async reject(toolCallId, options = {}) {
    await this.#decide(false, toolCallId, options)
  }

  /** Resolves once the decision is stored. */
  async #decide(approve, toolCallId, options) {
    if (typeof toolCallId !== 'string') throw invalidInput(`the tool call id must be a string (got ${describeValue(toolCallId)})`)
    const failure = await this.#native.decide(approve, toolCallId, JSON.stringify(splitFunctions(options ?? {}, 'the options', invalidInput).data))
    if (failure !== null) throw toError(JSON.parse(failure))
  }

  /** Starts a run (`send`, `resume`): its abort plumbing and its response, once the run is accepted (it holds the session). */
  async #start(options, what, begin) {
    if (options !== undefined && options !== null && typeof options !== 'object') throw invalidInput(`${what} options must be an object (got ${typeof options})`)
    const { signal, maxTurns, toolChoice } = options ?? {}
    if (signal !== undefined && !isSignal(signal)) throw invalidInput(`options.signal must be an AbortSignal (got ${signal === null ? 'null' : typeof signal})`)
    signal?.throwIfAborted()
    const controller = new AbortController()
    const scopeId = this.#nextScope++
    const scope = new Scope(controller.signal)
    const made = begin(scopeId, JSON.stringify(splitFunctions({ maxTurns, toolChoice }, `the ${what} options`, invalidInput).data))
    if (typeof made === 'string') throw toError(JSON.parse(made))
    this.#scopes.set(scopeId, scope)
    // Every abort of the run comes through here (the controller is never handed out), so the
    // run is told directly, before the signal's own listeners run: no listener of ours needed.
    const active = {
      abort(reason) {
        if (controller.signal.aborted) return
        made.abort(messageOf(reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason))
        controller.abort(reason)
      },
    }
    const onCallerAbort = () => active.abort(signal.reason)
    signal?.addEventListener('abort', onCallerAbort, { once: true })
    this.#active = active
    const release = () => {
      signal?.removeEventListener('abort', onCallerAbort)
      this.#scopes.delete(scopeId)
      if (this.#active === active) this.#active = null
    }
    // With a store outside the process the run is accepted once it holds the session's lease.
    const refused = made.isAccepted ? null : await made.accepted()
    if (refused !== null) {
      release()
      throw toError(JSON.parse(refused))
    }
    // A run stopped from inside (its claim on the session lost, a critical queued notification
    // given up) aborts the signal its tools and callbacks hold, as the caller's abort does.
    if (made.mayBeStopped) {
      made.stopped().then((reason) => {
        if (reason !== null) active.abort(new AbortError(reason))
      })
    }
    return new AgentResponse(made, scope, this.sessionId, release)
  }

  abort(reason) {
    this.#active?.abort(reason === undefined ? new AbortError() : reason)
  }

  /** Blade's: `[{ id: 'default', name: <model>, provider: <provider> }]`. */
  async supportedModels() {
    return JSON.parse(this.#native.supportedModels())
  }

  /** Each `advanced.mcpServers` server: `{ name, status: 'connected' | 'closed', toolCount }`. */
  async mcpServerStatus() {
    return JSON.parse(this.#native.mcpServerStatus())
  }

  /** The MCP servers' tools: `{ name: 'mcp__<server>__<tool>', serverName, toolName, description, inputSchema }`. */
  async mcpListTools() {
    return JSON.parse(this.#native.mcpListTools())
  }

  /** From the next run. */
  async setModel(model) {
    this.#set('model', model)
  }

  /** From the next run. */
  async setMaxTurns(maxTurns) {
    this.#set('maxTurns', maxTurns)
  }

  /** Blade's `PermissionMode` values (or our preset names), from the next run. */
  async setPermissionMode(mode) {
    this.#set('permissionMode', mode)
  }

  /** What tools receive as their context: `{ environment?, metadata?, capabilities? }`. */
  getDefaultContext() {
    return JSON.parse(this.#native.defaultContext())
  }

  setDefaultContext(context) {
    this.#set('defaultContext', context)
  }

  #set(setting, value) {
    const failure = this.#native.set(setting, JSON.stringify(splitFunctions(value, 'the value', invalidInput).data) ?? 'null')
    if (failure !== null) throw toError(JSON.parse(failure))
  }

  /** A new agent with the same options and a copy of this conversation (its SessionStart has `isResume: false`). */
  async fork() {
    return open(this.#options, this.#native, null)
  }

  /** `await using agent = …` closes it. */
  async [Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')]() {
    await this.close()
  }

  /** Runs SessionEnd once; concurrent calls share one attempt, a failed one may be retried. */
  close() {
    this.#closing ??= this.#close().finally(() => {
      this.#closing = null
    })
    return this.#closing
  }

  async #close() {
    this.#active?.abort(new AbortError('Session is closed'))
    const scopeId = this.#nextScope++
    const scope = new Scope()
    this.#scopes.set(scopeId, scope)
    try {
      const failure = await this.#native.close(scopeId, process.env)
      if (failure !== null) throw toError(JSON.parse(failure), scope)
    } finally {
      this.#scopes.delete(scopeId)
    }
  }
}

async function createAgent(options) {
  return open(options, null, null)
}

/**
 * Opens a stored session (`advanced.store`) in this process: its conversation and pending
 * approvals come back; its stored webhook hooks run first, then the hooks of `options`.
 */
async function resumeAgent(options) {
  if (options === null || typeof options !== 'object') {
    throw new ConfigError(`options must be an object (got ${options === null ? 'null' : typeof options})`)
  }
  const { sessionId, ...rest } = options
  if (typeof sessionId !== 'string' || sessionId === '') throw new ConfigError(`sessionId must be the id of a stored session (got ${describeValue(sessionId)})`)
  const stored = await native.loadSession(JSON.stringify(splitFunctions(rest).data), sessionId)
  if (typeof stored === 'string') throw toError(JSON.parse(stored))
  return open(rest, null, stored)
}

/** Option keys warned about in this process: one warning per key. */
const warnedOptions = new Set()

/** Makes an agent (with `from`'s conversation, for `fork()`; from `stored`, for
 * `resumeAgent`) and runs its SessionStart. */
async function open(options, from, stored) {
  if (options === null || typeof options !== 'object') {
    throw new ConfigError(`options must be an object (got ${options === null ? 'null' : typeof options})`)
  }
  const { data, functions } = splitFunctions(options)
  const scopes = new Map()
  const made = native.createSession(JSON.stringify(data), makeInvoke(functions, scopes), makeAbortDispatch(scopes), makeStepGenerator(scopes), nextTurn, process.env, wakeNothing, stored)
  if (typeof made === 'string') throw toError(JSON.parse(made))
  for (const key of made.unsupportedOptions) {
    if (warnedOptions.has(key)) continue
    warnedOptions.add(key)
    process.emitWarning(`${key} is accepted for compatibility with @blade-ai/agent-sdk and ignored: agent-runtime-hooks does not build it`, { code: 'ARH_UNSUPPORTED_OPTION' })
  }
  if (from !== null) made.copyConversationFrom(from)
  const scope = new Scope()
  scopes.set(0, scope)
  try {
    const failure = await made.start(0, process.env)
    if (failure !== null) throw toError(JSON.parse(failure), scope)
  } finally {
    scopes.delete(0)
  }
  return new Agent(made, scopes, options)
}

async function prompt(message, options) {
  const agent = await createAgent(options)
  try {
    const response = await agent.send(message)
    return await response.result()
  } finally {
    await agent.close()
  }
}

/** Sends the spans batched for OpenTelemetry export now; resolves at once when export is off. */
async function flushTelemetry() {
  const failure = await native.flushTelemetry()
  if (failure != null) throw new Error(failure)
}

function defineTool(definition) {
  return definition
}

/** A tool returns `deferred()` when its result comes later: the call pauses (`pendingApprovals`
 * with `reason: 'deferred'`) until `completeToolCall` publishes it. */
function deferred() {
  return Object.freeze({ [DEFERRED]: true })
}

/**
 * Publishes a deferred call's result, once, from any process that reaches the store: the
 * session's stored webhook hooks see it first (after-controls, then PostToolUse); the first
 * final result wins, a denial included. Resolves `{ published, result: { output, isError } }`.
 */
async function completeToolCall({ store, sessionId, toolCallId, result } = {}) {
  if (typeof sessionId !== 'string' || typeof toolCallId !== 'string') throw invalidInput('completeToolCall takes { store, sessionId, toolCallId, result } with string ids')
  const options = JSON.stringify(splitFunctions({ advanced: { store } }, 'the options', invalidInput).data)
  const stored = await native.loadSession(options, sessionId)
  if (typeof stored === 'string') throw toError(JSON.parse(stored))
  const encoded = JSON.stringify(splitFunctions(result, 'the result', invalidInput).data) ?? 'null'
  const outcome = JSON.parse(await native.completeToolCall(stored, options, toolCallId, encoded, process.env))
  if (outcome.error) throw toError(outcome.error)
  return outcome.completed
}

/**
 * Tries every queued webhook notification (`delivery: 'queue'`) of the store once now, whatever
 * its backoff: for tests and graceful shutdown. Resolves `{ delivered, failed, remaining }`.
 */
async function drainOutbox({ store } = {}) {
  const options = JSON.stringify(splitFunctions({ advanced: { store } }, 'the options', invalidInput).data)
  const environment = JSON.stringify(Object.fromEntries(Object.entries(process.env).filter(([, value]) => typeof value === 'string')))
  const outcome = JSON.parse(await native.drainOutbox(options, environment))
  if (outcome.error) throw toError(outcome.error)
  return outcome.drained
}

/**
 * The approval token `approve(toolCallId, { updatedInput: input, token })` needs under
 * `advanced.approvalSecret`: HMAC-SHA256 over `[sessionId, toolCallId, fingerprint]`, where the
 * fingerprint is that of `{ input, toolName }`. Only whoever holds the secret can make one, so a
 * relay of a pending approval cannot change what runs.
 */
function approvalToken({ secret, sessionId, toolCallId, toolName, input } = {}) {
  for (const [name, value] of Object.entries({ secret, sessionId, toolCallId, toolName })) {
    if (typeof value !== 'string') throw invalidInput(`approvalToken's ${name} must be a string (got ${typeof value})`)
  }
  const encoded = JSON.stringify(splitFunctions(input, 'the input', invalidInput).data) ?? 'null'
  const outcome = JSON.parse(native.approvalToken(secret, sessionId, toolCallId, toolName, encoded))
  if (outcome.error) throw toError(outcome.error)
  return outcome.token
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

function scriptedModel(script) {
  return Object.freeze(typeof script === 'function' ? { kind: 'scripted', script } : { kind: 'scripted', turns: script })
}

module.exports = {
  createAgent,
  resumeAgent,
  prompt,
  defineTool,
  completeToolExecution,
  deferred,
  completeToolCall,
  drainOutbox,
  approvalToken,
  scriptedModel,
  flushTelemetry,
  AgentResponse,
  HookEvent,
  ToolKind,
  ToolSideEffect,
  PermissionMode,
  PermissionDecision,
  HookTimeoutErrorCode,
  SdkError,
  HookTimeoutError,
  ConfigError,
  AbortError,
  CriticalHookDeliveryError,
}
