'use strict'
// The wire between the binding and user code: how options cross (`encode`), the
// operations user functions run in (`Scope`), and the functions Rust calls — `invoke`,
// `stepGenerator`, `abortDispatch`, `nextTurn` (src/binding/host.rs) — with the encoding of
// their replies; and `unwrap`, the one reader of what a failing binding function returns.

const native = require('../binding.js')
const { SdkError, ConfigError, HookTimeoutError, messageOf, toError } = require('./errors.js')

/** How Rust wants a function's return read: `Reply` in src/binding/host.rs. */
const { Reply } = native

const FUNCTION_KEY = '$function'
// Marks an option value JSON cannot carry (NaN, Infinity, a bigint, a symbol), so Rust can name it.
const JS_VALUE_KEY = '$js'

/**
 * What a binding function that can fail returned (`NativeResult` in src/binding/result.rs):
 * its value, or its error thrown. `scope` is the operation whose thrown values the error may
 * name.
 */
function unwrap(made, scope) {
  if (made?.error !== undefined) throw toError(made.error, scope)
  return made
}

/** `process.env` as the JSON of its string entries, for calls that learn from the store which variables they need. */
function environmentJson() {
  return JSON.stringify(Object.fromEntries(Object.entries(process.env).filter(([, value]) => typeof value === 'string')))
}

/**
 * `value` as the JSON text it crosses into Rust in (`undefined` for `undefined`), with every
 * function replaced by `{ "$function": n }`: the functions stay here, in `functions`, and are
 * called by number (with their object as `this`). Values JSON would silently change (NaN,
 * Infinity, bigints, symbols) become `{ "$js": text }`, for Rust to name. Only own enumerable
 * fields cross (a Date is `{}`: no `toJSON` is called). A cycle, or a getter that throws, is
 * refused with `refuse(message)`'s error, naming where it is (`root` names `value` itself).
 */
function encode(value, root = 'the options', refuse = (message, field) => new ConfigError(message, { field })) {
  const functions = []
  // Where the walk is, key by key (an array index as a number), and the objects open along it:
  // a path's text is only written for an error, so a long script costs no string per value.
  const keys = []
  const open = []
  const pathOf = (depth) => {
    let path = ''
    for (let i = 0; i < depth; i++) path += typeof keys[i] === 'number' ? `[${keys[i]}]` : i === 0 ? keys[i] : `.${keys[i]}`
    return path
  }
  // The options' own fields go by their names (`advanced.hooks`); anything else's by its root's.
  const describe = (path) => (path === '' ? root : root === 'the options' ? path : `${root}${path.startsWith('[') ? '' : '.'}${path}`)
  const walk = (value, owner) => {
    if (typeof value === 'function') {
      functions.push({ fn: value, owner })
      return { [FUNCTION_KEY]: functions.length - 1 }
    }
    if ((typeof value === 'number' && !Number.isFinite(value)) || typeof value === 'bigint' || typeof value === 'symbol') {
      return { [JS_VALUE_KEY]: typeof value === 'bigint' ? `${value}n` : String(value) }
    }
    if (value === null || typeof value !== 'object') return value
    const depth = keys.length
    // A cycle comes back to an object still open. Options and messages nest a few levels, so
    // the chain is short; a value nested too deep for the walk is refused as unreadable.
    const opened = open.indexOf(value)
    if (opened !== -1) {
      const subject = root === 'the options' ? 'options contain' : `${root} contains`
      const path = describe(pathOf(depth))
      throw refuse(`${subject} a circular reference: ${path} refers back to ${describe(pathOf(opened))}`, path)
    }
    open.push(value)
    let copy
    try {
      if (Array.isArray(value)) {
        copy = value.map((item, index) => {
          keys.push(index)
          const walked = walk(item, undefined)
          keys.pop()
          return walked
        })
      } else {
        copy = {}
        const names = Object.keys(value)
        for (let i = 0; i < names.length; i++) {
          keys.push(names[i])
          copy[names[i]] = walk(value[names[i]], value)
          keys.pop()
        }
      }
    } catch (error) {
      if (error instanceof SdkError) throw error
      keys.length = depth
      throw refuse(`${describe(pathOf(depth))} could not be read: ${messageOf(error)}`, depth === 0 ? undefined : describe(pathOf(depth)))
    }
    open.pop()
    return copy
  }
  return { json: JSON.stringify(walk(value, undefined)), functions }
}

/** An AbortSignal of any realm (Jest's VM realm has its own class). */
function isSignal(value) {
  return value !== null && typeof value === 'object' && typeof value.aborted === 'boolean' && typeof value.addEventListener === 'function'
}

function isError(value) {
  return value instanceof Error || Object.prototype.toString.call(value) === '[object Error]'
}

const NEVER_ABORTED = new AbortController().signal

/** Rust schedules its work on the JS thread through a threadsafe function made on this no-op. */
function wakeNothing() {}

// Node's own, not the global a test's fake timers replace: a run's turns must not wait for them.
const { setImmediate: immediate } = require('node:timers')

/** Settles `token` on a later turn of the event loop, once its timers and I/O had their turn:
 * Rust waits for it between the steps of a run that has held the loop for a while. */
function nextTurn(token) {
  immediate(settleEmpty, token)
  return token
}

const settleEmpty = (token) => native.settleReply(token, '')

/**
 * A reply that comes later: `returned` (a promise) is read with `settled`, or `failed` when it
 * rejects, and the reply goes to Rust through `settleReply(token, reply)`; the caller answers
 * with `token`. One function made once serves every call, and it polls the waiting run at once.
 */
async function settleLater(token, returned, settled, failed) {
  let reply
  try {
    reply = settled(await returned)
  } catch (thrown) {
    try {
      reply = failed(thrown)
    } catch {
      reply = '!{"message":"an error that cannot be described"}'
    }
  }
  native.settleReply(token, reply)
}

/** What a scope's maps are until their first entry: shared, so read and deleted from only. */
const NOTHING_KEPT = new (class NothingKept extends Map {
  set() {
    throw new Error('internal error: a scope wrote to its shared empty map')
  }
})()

/**
 * One caller-side operation (`createAgent`, a `send`, `close`): the signal its user functions
 * get, the values they threw (so the caller can get the very same one back), and the signals
 * of its hook dispatches, which Rust aborts at their deadline.
 */
class Scope {
  constructor(signal = NEVER_ABORTED) {
    this.signal = signal
    // Each made on its first entry: most operations keep no thrown value, generator, dispatch
    // signal or timeout, and an operation is made per send, start and close.
    this.thrown = NOTHING_KEPT
    this.dispatches = NOTHING_KEPT
    this.reasons = NOTHING_KEPT
    this.generators = NOTHING_KEPT
    this.nextGenerator = 1
  }

  /** Map `name` (`thrown`, `dispatches`, `reasons`, `generators`), made at its first entry. */
  #writable(name) {
    if (this[name] === NOTHING_KEPT) this[name] = new Map()
    return this[name]
  }

  /** Keeps a generator a tool returned, for `stepGenerator`. */
  keepGenerator(generator) {
    const id = this.nextGenerator++
    this.#writable('generators').set(id, generator)
    return id
  }

  keep(error) {
    const id = this.thrown.size + 1
    this.#writable('thrown').set(id, error)
    return id
  }

  /** The signal of dispatch `id`; `linked` also follows the operation's own signal. */
  dispatchSignal(id, linked) {
    if (this.reasons.has(id)) return AbortSignal.abort(this.reasons.get(id))
    let entry = this.dispatches.get(id)
    if (!entry) {
      const controller = new AbortController()
      entry = { controller, signal: linked ? AbortSignal.any([this.signal, controller.signal]) : controller.signal }
      this.#writable('dispatches').set(id, entry)
    }
    return entry.signal
  }

  /** Rust's clock ran out for dispatch `id`: abort its signal with a HookTimeoutError (a
   * tool's, event `''`: with the tool timeout's error). */
  timeOut(id, event, timeoutMs) {
    const reason = event === '' ? new SdkError('TOOL_TIMEOUT', `Tool execution timeout after ${timeoutMs}ms`) : new HookTimeoutError(event, timeoutMs)
    this.#writable('reasons').set(id, reason)
    this.dispatches.get(id)?.controller.abort(reason)
    this.dispatches.delete(id)
  }
}

/**
 * One agent's operations by id, for `invoke` and the functions beside it. Ids start at 1: 0 is
 * none (`ScopeId::NONE` in src/host.rs), and a call of none gets a scope of its own.
 */
class Scopes extends Map {
  #next = 1

  /** The id of an operation about to start. */
  newId() {
    return this.#next++
  }
}

/**
 * Where an input's lazily made dispatch signal comes from, kept in a private field stamped on
 * the input (a class constructor may return another object, and its fields land on that one):
 * invisible to `Object.keys`, spread, JSON and test matchers, and cheaper to add than a second
 * `Object.defineProperty` (callgrind: ~1 600 instructions per input against ~4 000). A field
 * can be added to an object once: every input is fresh from `JSON.parse` in `invoke`.
 */
class SignalSource extends function stampTarget(target) {
  return target
} {
  #source
  constructor(target, source) {
    super(target)
    this.#source = source
  }

  /** The source stamped on `value`, if it is an object that has one. */
  static of(value) {
    return value !== null && typeof value === 'object' && #source in value ? value.#source : undefined
  }
}

/** One getter for every input: V8 then reuses the objects' shapes instead of making new ones. */
const lazySignalDescriptors = new Map()

function lazySignalDescriptor(key) {
  let descriptor = lazySignalDescriptors.get(key)
  if (!descriptor) {
    descriptor = {
      get() {
        // A getter copied onto another object by its descriptor has no source there.
        const source = SignalSource.of(this)
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
  new SignalSource(target, { scope, dispatch, linked })
  Object.defineProperty(target, key, lazySignalDescriptor(key))
}

/** A value that is not plain data, found by `checkPlainData`: what is wrong, and where. */
class NotData extends Error {
  constructor(problem) {
    super(problem)
    this.problem = problem
    /** The keys leading to it, outermost first (`.a`, `[0]`). */
    this.where = []
  }

  /** `the value.a[0] is a getter`, `the value.b is an accessor, not data` */
  describe() {
    return `the value${this.where.join('')} ${this.problem}`
  }
}

/** Deeper than this is taken for a cycle (JSON.stringify would refuse one anyway). */
const MAX_DATA_DEPTH = 100
const { isProxy } = require('node:util').types
// Annex B's, taken once: an object of null prototype has none of its own.
const { __lookupGetter__: lookupGetter } = Object.prototype

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
    try {
      // Asked of an own key, this stops at it and makes no descriptor object (it runs for
      // every key of every hook output); a getter is found before it could be called. An
      // accessor without one (a setter only, or neither) reads `undefined`: only such a value
      // needs its descriptor to tell.
      if (lookupGetter.call(value, key) !== undefined) throw new NotData('is a getter')
      const item = value[key]
      if (item === undefined && !('value' in Object.getOwnPropertyDescriptor(value, key))) throw new NotData('is an accessor, not data')
      checkPlainData(item, depth + 1)
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
 * The function Rust calls for every user function; its arguments are described once, on
 * `InvokeArgs` in src/binding/host.rs. The call gets its signal and error as those say; `reply`
 * says how the return is read (plain data, with `mock()` for PreToolUse; JSON; a tool's return,
 * a generator kept for `stepGenerator`; a handler). The reply is that text, `''` for
 * `undefined`, or `'!'` and `{ message, thrown }` when the function threw or its value could not
 * be read; a promise of it when the function returned one.
 */
function makeInvoke(functions, scopes) {
  return function invoke(fn, argsJson, scopeId, reply, signalArg, signalKey, dispatch, last, linked, errorJson, token) {
    const args = JSON.parse(argsJson)
    const scope = scopes.get(scopeId) ?? new Scope()
    const call = new Invocation(functions, scope, reply, dispatch, last)
    // PreToolUse: `input.mock(result)`; the first call wins and is reported with the reply, as
    // the JSON text it had when mocked.
    if (reply === Reply.DataWithMock) args[0].mock = (result) => call.mock(result)
    if (signalArg >= 0 && dispatch === null) args[signalArg][signalKey] = scope.signal
    // A dispatch's signal is made on first use: most callbacks never look at it.
    else if (signalArg >= 0) defineLazySignal(args[signalArg], signalKey, scope, dispatch, linked)
    if (errorJson !== null) {
      const [arg, key, message, thrownId] = JSON.parse(errorJson)
      const thrown = thrownId == null ? undefined : scope.thrown.get(thrownId)
      args[arg][key] = isError(thrown) ? thrown : new Error(message)
    }
    // Reply at once to a plain value; later, through `settleReply`, when the function returned a
    // promise.
    let returned
    try {
      const { fn: user, owner } = functions[fn]
      returned = user.apply(owner, args)
    } catch (thrown) {
      return call.failed(thrown)
    }
    try {
      if (!isThenable(returned)) return call.settled(returned)
      settleLater(
        token,
        returned,
        (value) => call.settled(value),
        (thrown) => call.failed(thrown),
      )
      return token
    } catch (thrown) {
      return call.failed(thrown)
    }
  }
}

/** One call of a user function, from `invoke` to its reply: what the reply needs, and the
 * result a PreToolUse hook mocked. */
class Invocation {
  constructor(functions, scope, reply, dispatch, last) {
    this.functions = functions
    this.scope = scope
    this.reply = reply
    this.dispatch = dispatch
    this.last = last
    /** The mocked result's JSON text, once `mock()` was called with one. */
    this.mocked = undefined
  }

  /** `input.mock(result)`: a result that is not plain data is reported as such, and the call
   * then fails (never runs). */
  mock(result) {
    if (this.mocked !== undefined || result === undefined) return false
    try {
      checkPlainData(result)
      this.mocked = JSON.stringify(result)
    } catch (error) {
      this.mocked = JSON.stringify({ [JS_VALUE_KEY]: `a value that is not plain data (${error instanceof NotData ? error.describe() : messageOf(error)})` })
    }
    return true
  }

  settled(value) {
    if (this.dispatch !== null && this.last) this.scope.dispatches.delete(this.dispatch)
    return encodeReply(value, this.reply, this.scope, this.mocked, this.functions)
  }

  failed(thrown) {
    // A callback that mocked and then threw still mocked: the mock wins.
    if (this.mocked !== undefined) return this.settled(undefined)
    if (this.dispatch !== null) this.scope.dispatches.delete(this.dispatch)
    return failure(thrown, this.scope)
  }
}

function isThenable(value) {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function'
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
  if (reply === Reply.Handler) {
    // confirmationHandlerFactory's handler: its method is kept and called by number.
    if (value === null || typeof value !== 'object' || typeof value.requestConfirmation !== 'function') {
      return JSON.stringify({ [JS_VALUE_KEY]: value === null ? 'null' : `${describeValue(value)} without a requestConfirmation method` })
    }
    functions.push({ fn: value.requestConfirmation, owner: value })
    return `{"function":${functions.length - 1}}`
  }
  if (reply === Reply.Tool) {
    if (isDeferred(value)) return '{"deferred":true}'
    if (value !== null && typeof value === 'object' && GENERATOR_TAGS.has(Object.prototype.toString.call(value))) {
      return `{"generator":${scope.keepGenerator(value)}}`
    }
    const invalid = notJson(value)
    if (invalid !== undefined) return JSON.stringify({ invalid })
    const json = JSON.stringify(value)
    return json === undefined ? '{}' : `{"returned":${json}}`
  }
  if (reply === Reply.Data || reply === Reply.DataWithMock) {
    // Not data: Rust gets a marker it names, and treats as the invalid decision it is.
    try {
      checkPlainData(value)
    } catch (error) {
      if (!(error instanceof NotData)) throw error
      value = { [JS_VALUE_KEY]: `a value that is not plain data (${error.describe()})` }
    }
  }
  if (reply === Reply.DataWithMock) {
    const returned = JSON.stringify(value)
    if (mocked === undefined) return returned === undefined ? '{}' : `{"returned":${returned}}`
    return returned === undefined ? `{"mocked":${mocked}}` : `{"returned":${returned},"mocked":${mocked}}`
  }
  return JSON.stringify(value) ?? ''
}

/**
 * Advances generator `id` of scope `scopeId` (a tool's): `finish` calls `return()`. Replies
 * `{ done, value }`, `{ done, invalid }`, or a failure as `invoke` does; for an async
 * generator, later through `settleReply(token, …)`.
 */
function makeStepGenerator(scopes) {
  return function stepGenerator(scopeId, id, finish, token) {
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
      if (typeof step?.then === 'function') {
        settleLater(token, step, settled, failed)
        return token
      }
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

module.exports = {
  native,
  Reply,
  unwrap,
  environmentJson,
  encode,
  describeValue,
  isSignal,
  Scope,
  Scopes,
  nextTurn,
  wakeNothing,
  makeInvoke,
  makeStepGenerator,
  makeAbortDispatch,
  DEFERRED,
}
