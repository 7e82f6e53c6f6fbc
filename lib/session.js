'use strict'
// Blade's session API, a second door into the same native session `createAgent` opens:
// `createSession`, `resumeSession`, `forkSession`, `prompt(message, sessionOptions)`, and the
// `Session` (Blade's `ISession`): `send` steers or queues while a request runs (decided in
// Rust), `stream()` reads one request's events. Options are read in Rust, as `SessionOptions`.

const { SdkError, invalidInput } = require('./errors.js')
const { unwrap, encode, describeValue, isSignal } = require('./wire.js')
const { open, openStored, SESSION_DOOR } = require('./agent.js')
const { resolveProvider } = require('./providers.js')

const NO_PENDING_MESSAGE = 'No pending message. Call send() before stream().'
/** Send options only a request that starts takes (Blade refuses them while one runs). */
const STARTING_OPTIONS = ['signal', 'maxTurns', 'context', 'toolChoice']

class Session {
  #agent
  #door
  /** Requests started (`send` on an idle session) whose events no `stream()` has taken yet. */
  #requests = []

  constructor(agent) {
    this.#agent = agent
    this.#door = agent[SESSION_DOOR]
  }

  get sessionId() {
    return this.#agent.sessionId
  }

  get messages() {
    return this.#agent.messages
  }

  get isClosed() {
    return this.#agent.isClosed
  }

  /**
   * Blade's `send`: starts a request on an idle session (`{ status: 'started', inputId,
   * requestId }`); while one runs, steers it (`priority` `'now'` or `'next'`, the default:
   * `{ status: 'steered', … }`) or queues the input for the next `stream()` (`'later'`:
   * `{ status: 'queued', … }`). `expectedRequestId` must name the active request.
   */
  async send(message, options = {}) {
    if (options === null || typeof options !== 'object') throw invalidInput(`send options must be an object (got ${describeValue(options)})`)
    const { priority, expectedRequestId, signal, maxTurns, toolChoice, context } = options
    if (priority !== undefined && typeof priority !== 'string') throw invalidInput(`options.priority must be 'now', 'next' or 'later' (got ${describeValue(priority)})`)
    if (expectedRequestId !== undefined && typeof expectedRequestId !== 'string') throw invalidInput(`options.expectedRequestId must be a string (got ${describeValue(expectedRequestId)})`)
    if (signal !== undefined && !isSignal(signal)) throw invalidInput(`options.signal must be an AbortSignal (got ${signal === null ? 'null' : typeof signal})`)
    const encoded = encode(message, 'the message', invalidInput).json ?? 'null'
    const starting = STARTING_OPTIONS.some((key) => options[key] !== undefined)
    const submitted = JSON.parse(unwrap(this.#door.native.submit(encoded, priority ?? null, expectedRequestId ?? null, starting)))
    if (submitted.status !== 'idle') return submitted
    if (context !== undefined) warnOnce('send options.context', 'per-request contexts are not built here: use setDefaultContext()')
    const response = await this.#door.start({ signal, maxTurns, toolChoice }, 'send', (scopeId, runOptions) => this.#door.native.send(encoded, scopeId, runOptions, process.env))
    this.#requests.push(response)
    return response.submission
  }

  /**
   * The events of the oldest request no `stream()` has read, or (with none) of a request
   * started from the first input queued for later. Drain it, once per request.
   */
  async *stream(options = {}) {
    let response = this.#requests.shift()
    response ??= await this.#door.start({}, 'stream', (scopeId, runOptions) => this.#door.native.sendLater(scopeId, runOptions, process.env))
    if (response === null) throw new Error(NO_PENDING_MESSAGE)
    const thinking = options?.includeThinking === true
    for await (const event of response.stream()) {
      if (event.type === 'thinking' && !thinking) continue
      yield event
    }
  }

  /** Inputs waiting to be applied: `{ inputId, content, priority, targetRequestId?, acceptedAt }`. */
  getPendingInputs() {
    return JSON.parse(this.#door.native.pendingInputs())
  }

  /** Removes a waiting input: `true`, or `false` once the loop has taken it. */
  async cancelInput(inputId) {
    if (typeof inputId !== 'string') throw invalidInput(`cancelInput takes an input id string (got ${describeValue(inputId)})`)
    return this.#door.native.cancelInput(inputId)
  }

  /** Ends the active request (not the session). */
  async abort() {
    this.#agent.abort()
  }

  async close() {
    await this.#agent.close()
  }

  async [Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')]() {
    await this.close()
  }

  /** A new session with a new id and a copy of this conversation. */
  async fork(options = {}) {
    refuseMessageId(options)
    return new Session(await this.#agent.fork())
  }

  // The rest is the agent's own, word for word.
  getDefaultContext() {
    return this.#agent.getDefaultContext()
  }

  setDefaultContext(context) {
    this.#agent.setDefaultContext(context)
  }

  async setPermissionMode(mode) {
    await this.#agent.setPermissionMode(mode)
  }

  async setModel(model) {
    await this.#agent.setModel(model)
  }

  async setMaxTurns(maxTurns) {
    await this.#agent.setMaxTurns(maxTurns)
  }

  async supportedModels() {
    return this.#agent.supportedModels()
  }

  async mcpServerStatus() {
    return this.#agent.mcpServerStatus()
  }

  async mcpListTools() {
    return this.#agent.mcpListTools()
  }

  /** Approvals (ours): as on an agent; `resume()` queues its request for `stream()`. */
  get pendingApprovals() {
    return this.#agent.pendingApprovals
  }

  async approve(toolCallId, options) {
    await this.#agent.approve(toolCallId, options)
  }

  async reject(toolCallId, options) {
    await this.#agent.reject(toolCallId, options)
  }

  async resume(options = {}) {
    const response = await this.#door.start(options, 'resume', (scopeId, runOptions) => this.#door.native.resume(scopeId, runOptions, process.env))
    this.#requests.push(response)
    return response.submission
  }
}

/** Messages carry no ids here: a fork copies the whole conversation. */
function refuseMessageId(options) {
  if (options?.messageId !== undefined) {
    throw new SdkError('CONFIG_ERROR', 'messageId is not supported: messages carry no ids here, and a fork copies the whole conversation')
  }
}

/** Session options as the binding reads them: a `providerRegistry` entry resolved in JS. */
const prepared = resolveProvider

const warned = new Set()

function warnOnce(what, why) {
  if (warned.has(what)) return
  warned.add(what)
  process.emitWarning(`${what} is accepted for compatibility with @blade-ai/agent-sdk and ignored: ${why}`, { code: 'ARH_UNSUPPORTED_OPTION' })
}

async function createSession(options) {
  return new Session(await open(prepared(options), null, null, 'session'))
}

/** A stored session (`storagePath`), in this process, with the same `sessionId`. */
async function resumeSession(options) {
  return new Session(await openStored(prepared(options), 'session'))
}

/** A new session with a new id and a copy of the stored session `sessionId`'s conversation. */
async function forkSession(options) {
  refuseMessageId(options)
  return new Session(await openStored(prepared(options), 'session', { fork: true }))
}

/** One request on a temporary agent, always closed: `options` are `createAgent`'s or (Blade's
 * `prompt`) `createSession`'s; the binding tells them apart. */
async function prompt(message, options) {
  const agent = await open(prepared(options), null, null, 'prompt')
  try {
    const response = await agent.send(message)
    return await response.result()
  } finally {
    await agent.close()
  }
}

module.exports = { Session, createSession, resumeSession, forkSession, prompt }
