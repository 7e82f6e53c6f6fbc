'use strict'
// `Agent`, and the functions that make one or reach a session without one: `createAgent`,
// `resumeAgent`, `prompt`, `completeToolCall`, `drainOutbox`, `approvalToken`. Options and
// arguments are checked in Rust; what is checked here cannot cross as JSON (a signal) or must
// be a string before it can be passed at all.

const { AbortError, invalidInput, messageOf } = require('./errors.js')
const { AgentResponse } = require('./response.js')
const { withToolSchemas } = require('./schemas.js')
const {
  native,
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
} = require('./wire.js')

/** Where `lib/session.js` reaches an agent's native session (not part of the API). */
const SESSION_DOOR = Symbol('sessionDoor')

class Agent {
  #native
  #sessionId
  #scopes
  #options
  #active = null
  /** The scope every `close()` passes, once one was called. */
  #closeScope = 0

  /** Which API's options `options` are (`'agent'` or `'session'`), for `fork()`. */
  #shape

  constructor(nativeAgent, scopes, options, shape) {
    this.#native = nativeAgent
    this.#sessionId = nativeAgent.sessionId
    this.#scopes = scopes
    this.#options = options
    this.#shape = shape
  }

  get sessionId() {
    return this.#sessionId
  }

  get isClosed() {
    return this.#native.isClosed
  }

  get messages() {
    return JSON.parse(this.#native.messages())
  }

  /** What is registered, per event in dispatch order (the environment's hooks as a run now would see them). */
  hooks() {
    return JSON.parse(unwrap(this.#native.hooks(process.env)))
  }

  async send(message, options = {}) {
    const encoded = encode(message, 'the message', invalidInput).json ?? 'null'
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
    unwrap(await this.#native.decide(approve, toolCallId, encode(options ?? {}, 'the options', invalidInput).json))
  }

  /** Starts a run (`send`, `resume`): its abort plumbing and its response, once the run is accepted (it holds the session). */
  async #start(options, what, begin) {
    if (options !== undefined && options !== null && typeof options !== 'object') throw invalidInput(`${what} options must be an object (got ${typeof options})`)
    const { signal, maxTurns, toolChoice } = options ?? {}
    if (signal !== undefined && !isSignal(signal)) throw invalidInput(`options.signal must be an AbortSignal (got ${signal === null ? 'null' : typeof signal})`)
    signal?.throwIfAborted()
    const controller = new AbortController()
    const scopeId = this.#scopes.newId()
    const scope = new Scope(controller.signal)
    const started = unwrap(begin(scopeId, encode({ maxTurns, toolChoice }, `the ${what} options`, invalidInput).json))
    // Nothing to start (a session's `stream()` with no input waiting).
    if (started === null) return null
    const { run } = started
    this.#scopes.set(scopeId, scope)
    // Every abort of the run comes through here (the controller is never handed out), so the
    // run is told directly, before the signal's own listeners run: no listener of ours needed.
    const active = {
      abort(reason) {
        if (controller.signal.aborted) return
        run.abort(messageOf(reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason))
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
    if (!started.isAccepted) {
      try {
        unwrap(await run.accepted())
      } catch (refused) {
        release()
        throw refused
      }
    }
    // A run stopped from inside (its claim on the session lost, a critical queued notification
    // given up) aborts the signal its tools and callbacks hold, as the caller's abort does.
    if (started.mayBeStopped) {
      run.stopped().then((reason) => {
        if (reason !== null) active.abort(new AbortError(reason))
      })
    }
    return new AgentResponse(started, scope, this.#sessionId, release)
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
    unwrap(this.#native.set(setting, encode(value, 'the value', invalidInput).json ?? 'null'))
  }

  /** A new agent with the same options and a copy of this conversation (its SessionStart has `isResume: false`). */
  async fork() {
    return open(this.#options, this.#native, null, this.#shape)
  }

  /** For `lib/session.js`, the session door over the same native session: the native session,
   * and a request started through this agent's abort plumbing (`null`: nothing to start). */
  get [SESSION_DOOR]() {
    return {
      native: this.#native,
      start: (options, what, begin) => this.#start(options, what, begin),
    }
  }

  /** `await using agent = …` closes it. */
  async [Symbol.asyncDispose ?? Symbol.for('nodejs.asyncDispose')]() {
    await this.close()
  }

  /** Runs SessionEnd once; concurrent calls share one attempt, a failed one may be retried. */
  async close() {
    this.#active?.abort(new AbortError(native.SESSION_CLOSED))
    // Every close passes one scope: a call that joins the attempt under way (Rust shares it)
    // gets its errors as the very values the first call gets.
    if (this.#closeScope === 0) {
      this.#closeScope = this.#scopes.newId()
      this.#scopes.set(this.#closeScope, new Scope())
    }
    unwrap(await this.#native.close(this.#closeScope, process.env), this.#scopes.get(this.#closeScope))
  }
}

async function createAgent(options) {
  return open(options, null, null, 'agent')
}

/**
 * Opens a stored session (`advanced.store`) in this process: its conversation and pending
 * approvals come back; its stored webhook hooks run first, then the hooks of `options`.
 */
async function resumeAgent(options) {
  return openStored(options, 'agent')
}

/** A stored session, opened with the options of `shape` (less the `sessionId` naming it);
 * with `fork`, a new session with a copy of its conversation instead. */
async function openStored(options, shape, { fork = false } = {}) {
  const stored = unwrap(await native.loadSession(encode(options).json, shape))
  // The binding checked that `options` is an object with a `sessionId`.
  const { sessionId, messageId, ...rest } = options
  return fork ? open(rest, stored, null, shape) : open(rest, null, stored, shape)
}

/** Option keys warned about in this process: one warning per key. */
const warnedOptions = new Set()

/** Makes an agent (with `from`'s conversation, for `fork()` and `forkSession`; from
 * `stored`, for `resumeAgent`) and runs its SessionStart. */
async function open(options, from, stored, shape) {
  const { json, functions } = encode(withToolSchemas(options))
  const scopes = new Scopes()
  const made = unwrap(native.createSession(json, makeInvoke(functions, scopes), makeAbortDispatch(scopes), makeStepGenerator(scopes), nextTurn, process.env, wakeNothing, stored, shape))
  for (const key of made.unsupportedOptions) {
    if (warnedOptions.has(key)) continue
    warnedOptions.add(key)
    process.emitWarning(`${key} is accepted for compatibility with @blade-ai/agent-sdk and ignored: agent-runtime-hooks does not build it`, { code: 'ARH_UNSUPPORTED_OPTION' })
  }
  // `from`: an agent (`fork()`) or a stored session (`forkSession`).
  if (from instanceof native.NativeStored) unwrap(made.copyStoredConversation(from))
  else if (from !== null) made.copyConversationFrom(from)
  // SessionStart runs in a scope of its own, as every operation does.
  const scopeId = scopes.newId()
  const scope = new Scope()
  scopes.set(scopeId, scope)
  try {
    unwrap(await made.start(scopeId, process.env), scope)
  } finally {
    scopes.delete(scopeId)
  }
  return new Agent(made, scopes, options, shape)
}

/** One request on a temporary agent, always closed: `options` are `createAgent`'s or (Blade's
 * `prompt`) `createSession`'s; the binding tells them apart. */
async function prompt(message, options) {
  const agent = await open(options, null, null, 'prompt')
  try {
    const response = await agent.send(message)
    return await response.result()
  } finally {
    await agent.close()
  }
}

/**
 * Publishes a deferred call's result, once, from any process that reaches the store: the
 * session's stored webhook hooks see it first (after-controls, then PostToolUse); the first
 * final result wins, a denial included. Resolves `{ published, result: { output, isError } }`.
 */
async function completeToolCall({ store, sessionId, toolCallId, result } = {}) {
  const call = encode({ sessionId, toolCallId, advanced: { store } }, 'the options', invalidInput).json
  const encoded = encode(result, 'the result', invalidInput).json ?? 'null'
  return JSON.parse(unwrap(await native.completeToolCall(call, encoded, environmentJson())))
}

/**
 * Tries every queued webhook notification (`delivery: 'queue'`) of the store once now, whatever
 * its backoff: for tests and graceful shutdown. Resolves `{ delivered, failed, remaining }`.
 */
async function drainOutbox({ store } = {}) {
  const options = encode({ advanced: { store } }, 'the options', invalidInput).json
  return JSON.parse(unwrap(await native.drainOutbox(options, environmentJson())))
}

/**
 * The approval token `approve(toolCallId, { updatedInput: input, token })` needs under
 * `advanced.approvalSecret`: HMAC-SHA256 over `[sessionId, toolCallId, fingerprint]`, where the
 * fingerprint is that of `{ input, toolName }`. Only whoever holds the secret can make one, so a
 * relay of a pending approval cannot change what runs.
 */
function approvalToken({ secret, sessionId, toolCallId, toolName, input, agentPath } = {}) {
  for (const [name, value] of Object.entries({ secret, sessionId, toolCallId, toolName })) {
    if (typeof value !== 'string') throw invalidInput(`approvalToken's ${name} must be a string (got ${typeof value})`)
  }
  // A sub-agent's call is signed with its place in the tree (pendingApprovals[].agentPath).
  const path = agentPath ?? []
  if (!Array.isArray(path) || !path.every((name) => typeof name === 'string')) {
    throw invalidInput(`approvalToken's agentPath must be an array of strings (got ${describeValue(agentPath)})`)
  }
  const encoded = encode(input, 'the input', invalidInput).json ?? 'null'
  return unwrap(native.approvalToken(secret, sessionId, toolCallId, toolName, encoded, path))
}

module.exports = { createAgent, resumeAgent, prompt, completeToolCall, drainOutbox, approvalToken, open, openStored, SESSION_DOOR }
