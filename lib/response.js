'use strict'
// `AgentResponse`: one run's events, pulled from the binding in batches, replayed to every
// reader (`stream()`, `textStream()`, `result()`), and handed to `on()` listeners first.

const { internalError, invalidInput, messageOf, toError } = require('./errors.js')

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
  /** The result or error event `result()` read on its own (`null`: the binding had none left). */
  #outcome

  /** `started` is the binding's `RunStarted`: the run and its submission's ids. */
  constructor(started, scope, sessionId, onSettled) {
    const { run } = started
    this.#run = run
    this.#scope = scope
    this.#sessionId = sessionId
    this.#submission = Object.freeze({ status: 'started', inputId: started.inputId, requestId: started.requestId })
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
            for (let event of JSON.parse(batch)) {
              // The outcome result() has read stays the one object every reader sees.
              if (this.#outcome && (event.type === 'result' || event.type === 'error')) event = this.#outcome
              else if (event.type === 'error') event.error = toError(event.error, this.#scope)
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
        this.#fail(internalError(messageOf(error)))
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
    await this.#finished
    // The outcome is read alone, where it is, unless `on()` listeners must see every event
    // first: the run's other events stay in the binding, unserialized, for a later stream()
    // (most runs are never streamed).
    if (!this.#ended && this.#listeners.size === 0) this.#outcome ??= this.#readOutcome()
    if (this.#outcome) {
      if (this.#outcome.type === 'error') throw this.#outcome.error
      return this.#outcome.result
    }
    // Otherwise one pull takes all of its events; the result or error among them is the outcome.
    while (!this.#ended) await this.#pull()
    for (const event of this.#events) {
      if (event.type === 'result') return event.result
      if (event.type === 'error') throw event.error
    }
    throw internalError('The run ended without a result')
  }

  /** The run's result or error event if the binding still holds it, else `null`. */
  #readOutcome() {
    const text = this.#run.outcome()
    if (text === null) return null
    const event = JSON.parse(text)
    if (event.type === 'error') event.error = toError(event.error, this.#scope)
    return event
  }

  async text() {
    return (await this.result()).content
  }
}

module.exports = { AgentResponse }
