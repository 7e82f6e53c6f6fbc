// The session door (createSession / resumeSession / forkSession, ISession.send with priorities,
// stream, cancelInput, abort, close, ProviderRegistry) under hostile and careless use: every
// input goes through UserPromptSubmit, a refused or interrupted input is never kept or lost
// silently, policies fail closed, bad values are clear errors naming what was wrong, and no
// secret shows in an error. Each test states what a user should be able to rely on.
import type { ServerResponse } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  createSession,
  defineTool,
  forkSession,
  ProviderRegistry,
  resumeSession,
  type HookCallback,
  type ISession,
  type SessionOptions,
  type SessionStreamEvent,
} from '../index.js'
import { openaiChunks, rawStream, sleep, sse, until, useServer, type Handler } from './helpers/server.js'
import { contentText, drain, ofType, textOf } from './helpers/session.js'

const server = useServer()

const API_KEY = 'sk-safety-secret-4242'
const MODEL = 'safety-model'

const provider = (extra: Record<string, unknown> = {}) => ({ type: 'openai-compatible' as const, apiKey: API_KEY, baseUrl: server.url + '/v1', ...extra })

function options(extra: Record<string, unknown> = {}): SessionOptions {
  return { provider: provider(), model: MODEL, allowedTools: [], ...extra } as SessionOptions
}

const chat = (text: string, calls: { id: string; name: string; arguments: string }[] = []): Handler => rawStream([sse(openaiChunks(text, calls))])

/** A model answer held open until `gate.open()`: `head` at once, then `tail` (unless the client
 * hung up first). `gate.started` resolves once the request arrived. */
function gate() {
  let open!: () => void
  let arrived!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  const started = new Promise<void>((resolve) => (arrived = resolve))
  const state = { tailSent: false, closed: false }
  const handler = (head: string, tail: string): Handler =>
    async (_req, res: ServerResponse) => {
      const write = (chunk: unknown) => res.write(`data: ${JSON.stringify(chunk)}\n\n`)
      let hungUp: () => void = () => {}
      const closed = new Promise<void>((done) => (hungUp = done))
      res.on('close', () => {
        state.closed = true
        hungUp()
      })
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      write({ choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] })
      write({ choices: [{ index: 0, delta: { content: head } }] })
      arrived()
      await Promise.race([opened, closed, sleep(5000)])
      if (state.closed) return
      state.tailSent = true
      write({ choices: [{ index: 0, delta: { content: tail } }] })
      write({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
      write({ choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } })
      res.end('data: [DONE]\n\n')
    }
  return { open, started, state, handler }
}

const userTexts = (messages: readonly any[]) => messages.filter((message) => message.role === 'user').map((message) => contentText(message.content))

const allRequests = () => JSON.stringify(server.requests.map((request) => request.body))

async function answerOf(session: ISession, message: string): Promise<string> {
  await session.send(message)
  const events = await drain(session)
  const errors = ofType(events, 'error')
  if (errors.length) throw new Error(errors[0].message)
  return textOf(events)
}

const errorOf = async (promise: Promise<unknown>): Promise<any> =>
  promise.then(
    (value) => {
      throw new Error(`resolved instead of rejecting: ${JSON.stringify(value)}`)
    },
    (error) => error,
  )

const writeNote = (log: string[]) =>
  defineTool<{ text: string }>({
    name: 'write_note',
    description: 'Writes a note',
    kind: 'write',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
    execute: async ({ text }) => {
      log.push(`write_note:${text}`)
      return 'written'
    },
  })

const runCommand = (log: string[]) =>
  defineTool<{ cmd: string }>({
    name: 'run_command',
    description: 'Runs a command',
    kind: 'execute',
    parameters: { type: 'object', properties: { cmd: { type: 'string' } }, required: ['cmd'] },
    execute: async ({ cmd }) => {
      log.push(`run_command:${cmd}`)
      return 'ran'
    },
  })

const slowLookup = (log: string[], ms: number) =>
  defineTool<{ q: string }>({
    name: 'lookup',
    description: 'Looks a word up',
    kind: 'readonly',
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    execute: async ({ q }) => {
      log.push(`lookup:${q}:start`)
      await sleep(ms)
      log.push(`lookup:${q}:end`)
      return `price of ${q}: 3`
    },
  })

const dirs: string[] = []
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** A UserPromptSubmit hook: `decide(prompt)` returns what to do with each prompt. */
function promptHook(decide: (prompt: string) => Awaited<ReturnType<HookCallback>> | Promise<Awaited<ReturnType<HookCallback>>>): HookCallback {
  return async (input: any) => decide(String(input.userPrompt))
}

// ---------------------------------------------------------------------------------------------

describe('steering inputs pass UserPromptSubmit on every path', () => {
  it("a `next` input is rewritten by UserPromptSubmit: the model and session.messages get the rewrite, never the original", async () => {
    const g = gate()
    server.reply(g.handler('Draft ', 'answer.'), chat('Done.'))
    const session = await createSession(
      options({ hooks: { UserPromptSubmit: [promptHook((text) => (text.includes('password') ? { action: 'continue', modifiedInput: { userPrompt: '[redacted]' } } : { action: 'continue' }))] } }),
    )
    await session.send('Start')
    const drained = drain(session)
    await g.started
    const steer = await session.send('my password is hunter2', { priority: 'next' })
    expect(steer.status).toBe('steered')
    g.open()
    const events = await drained
    expect(events.at(-1)).toMatchObject({ type: 'result', content: 'Done.' })
    expect(allRequests()).not.toContain('hunter2')
    expect(userTexts(server.requests[1].body.messages)).toEqual(['Start', '[redacted]'])
    expect(JSON.stringify(session.messages)).not.toContain('hunter2')
    // Taken by the loop: too late to cancel.
    expect(await session.cancelInput(steer.inputId)).toBe(false)
    await session.close()
  })

  it('a `now` input aborted by UserPromptSubmit fails the request, and is in neither session.messages nor any later request', async () => {
    const g = gate()
    server.reply(g.handler('Partial ', 'never'), chat('Fine.'))
    const session = await createSession(
      options({ hooks: { UserPromptSubmit: [promptHook((text) => (text.includes('rm -rf') ? { action: 'abort', reason: 'dangerous prompt' } : { action: 'continue' }))] } }),
    )
    await session.send('Start')
    const drained = drain(session)
    await g.started
    expect((await session.send('now rm -rf /', { priority: 'now' })).status).toBe('steered')
    const events = await drained
    const [error] = ofType(events, 'error')
    expect(error).toMatchObject({ message: 'dangerous prompt', code: 'HOOK_ABORTED' })
    expect(ofType(events, 'input_applied')).toEqual([])
    expect(JSON.stringify(session.messages)).not.toContain('rm -rf')
    expect(session.getPendingInputs()).toEqual([])
    expect(await answerOf(session, 'Next one')).toBe('Fine.')
    expect(allRequests()).not.toContain('rm -rf')
    await session.close()
  })

  it('a `later` input started by stream() is rewritten by UserPromptSubmit; one it aborts ends with an error and is never kept', async () => {
    const g = gate()
    server.reply(g.handler('First ', 'answer.'), chat('Later done.'))
    const session = await createSession(
      options({
        hooks: {
          UserPromptSubmit: [
            promptHook((text) =>
              text.includes('forbidden') ? { action: 'abort', reason: 'not allowed' } : text.includes('secret') ? { action: 'continue', modifiedInput: '[scrubbed]' } : { action: 'continue' },
            ),
          ],
        },
      }),
    )
    await session.send('First')
    const drained = drain(session)
    await g.started
    expect((await session.send('the secret is 99', { priority: 'later' })).status).toBe('queued')
    expect((await session.send('forbidden thing', { priority: 'later' })).status).toBe('queued')
    g.open()
    await drained
    const later = await drain(session)
    expect(later.at(-1)).toMatchObject({ type: 'result', content: 'Later done.' })
    expect(userTexts(server.requests[1].body.messages).at(-1)).toBe('[scrubbed]')
    const refused = await drain(session)
    expect(ofType(refused, 'error')[0]).toMatchObject({ message: 'not allowed', code: 'HOOK_ABORTED' })
    expect(allRequests()).not.toMatch(/secret is 99|forbidden thing/)
    expect(JSON.stringify(session.messages)).not.toMatch(/secret is 99|forbidden thing/)
    expect(server.requests).toHaveLength(2)
    await session.close()
  })

  // Docs: "a hook that aborts it fails the request: it is never applied" — about that input.
  // The other inputs claimed at the same safe point were not refused by anyone.
  it('when UserPromptSubmit aborts one of two `next` inputs, the other one is not silently lost', async () => {
    const g = gate()
    server.reply(g.handler('Draft ', 'answer.'), chat('Answered the kept input.'))
    const session = await createSession(
      options({ hooks: { UserPromptSubmit: [promptHook((text) => (text.includes('bad') ? { action: 'abort', reason: 'bad input' } : { action: 'continue' }))] } }),
    )
    await session.send('Start')
    const drained = drain(session)
    await g.started
    const bad = await session.send('bad input', { priority: 'next' })
    const good = await session.send('good input, keep me', { priority: 'next' })
    expect([bad.status, good.status]).toEqual(['steered', 'steered'])
    g.open()
    const events = await drained
    expect(ofType(events, 'error')[0]).toMatchObject({ message: 'bad input' })
    // The good input was neither applied nor refused: it must still wait (as one left by a
    // failed request does), or have been applied. Here it is neither.
    const pending = session.getPendingInputs().map((input) => input.inputId)
    const applied = JSON.stringify(session.messages).includes('good input, keep me')
    expect(applied || pending.includes(good.inputId)).toBe(true)
    await session.close()
  })

  // Docs: "An input that waited for a request that ended (aborted, failed, maxTurns) waits for
  // the next one."
  it('abort() while a steering input is in its UserPromptSubmit hook: the inputs not applied still wait for the next request', async () => {
    const g = gate()
    server.reply(g.handler('Draft ', 'answer.'), chat('after abort'))
    let hookEntered = false
    const session = await createSession(
      options({
        hooks: {
          UserPromptSubmit: [
            promptHook(async (text) => {
              if (text.startsWith('steer')) {
                hookEntered = true
                await sleep(300)
              }
              return { action: 'continue' }
            }),
          ],
        },
      }),
    )
    await session.send('Start')
    const drained = drain(session)
    await g.started
    const one = await session.send('steer one', { priority: 'next' })
    const two = await session.send('steer two', { priority: 'next' })
    g.open()
    await until(() => hookEntered)
    await session.abort()
    await drained
    await sleep(350)
    expect(JSON.stringify(session.messages)).not.toMatch(/steer one|steer two/)
    const pending = session.getPendingInputs().map((input) => input.inputId)
    expect(pending).toEqual(expect.arrayContaining([one.inputId, two.inputId]))
    await session.close()
  })

  it('abort() with a `next` input not yet claimed: it is kept as `later`, not applied to the aborted request, and runs (through UserPromptSubmit) on the next stream()', async () => {
    const g = gate()
    server.reply(g.handler('Draft ', 'never'), chat('Handled the kept input.'))
    const prompts: string[] = []
    const session = await createSession(options({ hooks: { UserPromptSubmit: [promptHook((text) => (prompts.push(text), { action: 'continue' }))] } }))
    await session.send('Start')
    const drained = drain(session)
    await g.started
    const steer = await session.send('keep me', { priority: 'next' })
    await session.abort()
    await drained
    expect(session.getPendingInputs()).toEqual([expect.objectContaining({ inputId: steer.inputId, priority: 'later', content: 'keep me' })])
    expect(JSON.stringify(session.messages)).not.toContain('keep me')
    const events = await drain(session)
    expect(events.at(-1)).toMatchObject({ type: 'result', content: 'Handled the kept input.' })
    expect(prompts).toEqual(['Start', 'keep me'])
    await session.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('inputs at the end of a request', () => {
  it('`next` sent after the last safe point (during TaskCompleted) is queued, not steered into a request that will not apply it; stream() runs it', async () => {
    server.reply(chat('First answer.'), chat('Second answer.'))
    let during: any
    let session!: ISession
    session = await createSession(
      options({
        hooks: {
          TaskCompleted: [
            async () => {
              if (!during) during = await session.send('sent while completing', { priority: 'next' })
              return { action: 'continue' as const }
            },
          ],
        },
      }),
    )
    await session.send('First')
    const first = await drain(session)
    expect(first.at(-1)).toMatchObject({ type: 'result', content: 'First answer.' })
    expect(during).toEqual({ status: 'queued', inputId: expect.any(String), priority: 'later' })
    expect(server.requests).toHaveLength(1)
    const second = await drain(session)
    expect(second.at(-1)).toMatchObject({ type: 'result', content: 'Second answer.' })
    expect(userTexts(server.requests[1].body.messages).at(-1)).toBe('sent while completing')
    await session.close()
  })

  // Docs: input_applied's `turn` "is the first model turn that sees it", and an input that
  // waited for a request that ended at maxTurns waits for the next one.
  it('a `next` input applied after the last allowed turn (maxTurns) is announced only for a model turn that sees it', async () => {
    const ran: string[] = []
    server.reply(chat('', [{ id: 'call_1', name: 'lookup', arguments: '{"q":"tea"}' }]), chat('must not be asked in this request'))
    const session = await createSession(options({ tools: [slowLookup(ran, 100)], allowedTools: ['lookup'], maxTurns: 1 }))
    await session.send('Price tea')
    let steer: any
    const events = await drain(session, async (event) => {
      if (event.type === 'tool_use' && !steer) steer = await session.send('also milk', { priority: 'next' })
    })
    expect(steer.status).toBe('steered')
    expect(ofType(events, 'result')[0].result.stopReason).toBe('max_turns')
    const turns = ofType(events, 'turn_start').map((event) => event.turn)
    for (const applied of ofType(events, 'input_applied')) expect(turns).toContain(applied.turn)
    await session.close()
  })
})

describe('a queued input is never lost when stream() cannot start its request', () => {
  it('stream() called again while a request still runs: it rejects as busy, and the `later` input still waits', async () => {
    const g = gate()
    server.reply(g.handler('First ', 'answer.'), chat('Later done.'))
    const session = await createSession(options())
    await session.send('First')
    const drained = drain(session)
    await g.started
    const queued = await session.send('queued for later', { priority: 'later' })
    const second = await errorOf(drain(session))
    expect(String(second.message)).toMatch(/still active/)
    expect(session.getPendingInputs().map((input) => input.inputId)).toContain(queued.inputId)
    g.open()
    await drained
    const later = await drain(session)
    expect(later.at(-1)).toMatchObject({ type: 'result', content: 'Later done.' })
    expect(userTexts(server.requests[1].body.messages).at(-1)).toBe('queued for later')
    await session.close()
  })

  it('a `later` input queued before the request paused for approval: stream() refuses while approvals wait, and the input still waits', async () => {
    const ran: string[] = []
    // The first answer (a write call) comes after a pause, so the input is queued while it runs.
    server.reply(
      async (req, res) => {
        await sleep(150)
        await chat('', [{ id: 'call_1', name: 'write_note', arguments: '{"text":"hi"}' }])(req, res)
      },
      chat('noted'),
      chat('later handled'),
    )
    const session = await createSession(options({ tools: [writeNote(ran)], allowedTools: ['write_note'], permissionMode: 'default' }))
    await session.send('note it')
    const queued = { id: '' }
    const first = await drain(session, async (event) => {
      if (event.type === 'turn_start' && !queued.id) queued.id = (await session.send('after the note', { priority: 'later' })).inputId
    })
    expect(ofType(first, 'result')[0].result.stopReason).toBe('interrupted')
    expect(session.pendingApprovals).toHaveLength(1)
    expect(session.getPendingInputs().map((input) => input.inputId)).toContain(queued.id)
    const refused = await errorOf(drain(session))
    expect(String(refused.message)).toMatch(/approval|pending/i)
    expect(session.getPendingInputs().map((input) => input.inputId)).toContain(queued.id)
    await session.approve('call_1')
    await session.resume()
    await drain(session)
    expect(ran).toEqual(['write_note:hi'])
    const later = await drain(session)
    expect(later.at(-1)).toMatchObject({ type: 'result', content: 'later handled' })
    await session.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('`now` leaves a conversation the next model call accepts', () => {
  it('`now` while tools run: the tools finish, every tool call is answered in the next request, and the input is applied', async () => {
    const ran: string[] = []
    server.reply(
      chat('Looking up.', [
        { id: 'call_a', name: 'lookup', arguments: '{"q":"tea"}' },
        { id: 'call_b', name: 'lookup', arguments: '{"q":"milk"}' },
      ]),
      chat('Both looked up; stopping.'),
    )
    const session = await createSession(options({ tools: [slowLookup(ran, 150)], allowedTools: ['lookup'] }))
    await session.send('Price tea and milk')
    let steer: any
    const events = await drain(session, async (event) => {
      if (event.type === 'tool_use' && !steer) steer = await session.send('stop after these', { priority: 'now' })
    })
    expect(steer.status).toBe('steered')
    expect(ran).toEqual(['lookup:tea:start', 'lookup:milk:start', 'lookup:tea:end', 'lookup:milk:end'])
    expect(events.at(-1)).toMatchObject({ type: 'result', content: 'Both looked up; stopping.' })
    const next = server.requests[1].body.messages as any[]
    const calls = next.flatMap((message) => (message.tool_calls ?? []).map((call: any) => call.id))
    const answered = next.filter((message) => message.role === 'tool').map((message) => message.tool_call_id)
    expect(calls).toEqual(['call_a', 'call_b'])
    expect(answered).toEqual(['call_a', 'call_b'])
    expect(next.at(-1)).toMatchObject({ role: 'user', content: 'stop after these' })
    // Every assistant message with tool calls is followed by their results before any user message.
    const assistantIndex = next.findIndex((message) => message.tool_calls?.length)
    expect(next.slice(assistantIndex + 1, assistantIndex + 3).map((message) => message.role)).toEqual(['tool', 'tool'])
    await session.close()
  })

  it('`now` during the model step: the partial answer is kept nowhere (neither session.messages nor the next request)', async () => {
    const g = gate()
    server.reply(g.handler('PARTIAL-TEXT ', 'never'), chat('Fresh answer.'))
    const session = await createSession(options())
    await session.send('Start')
    const drained = drain(session)
    await g.started
    await session.send('change of plan', { priority: 'now' })
    const events = await drained
    expect(ofType(events, 'turn_interrupted')).toHaveLength(1)
    expect(events.at(-1)).toMatchObject({ type: 'result', content: 'Fresh answer.' })
    expect(JSON.stringify(server.requests[1].body)).not.toContain('PARTIAL-TEXT')
    expect(JSON.stringify(session.messages)).not.toContain('PARTIAL-TEXT')
    expect(userTexts(session.messages)).toEqual(['Start', 'change of plan'])
    await session.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('send(): bounds, malformed messages and options', () => {
  it('the inbox holds at most 32 inputs and 1 MiB: the exact error, code SESSION_INPUT_QUEUE_FULL, nothing kept', async () => {
    const g = gate()
    server.reply(g.handler('Busy ', 'done.'))
    const session = await createSession(options())
    await session.send('Start')
    const drained = drain(session)
    await g.started
    for (let i = 0; i < 32; i++) expect((await session.send(`input ${i}`, { priority: 'later' })).status).toBe('queued')
    const full = await errorOf(session.send('one too many', { priority: 'later' }))
    expect(full.message).toBe('Session input queue capacity exceeded (32 inputs, 1048576 bytes)')
    expect(full.code).toBe('SESSION_INPUT_QUEUE_FULL')
    expect(session.getPendingInputs()).toHaveLength(32)
    for (const input of session.getPendingInputs()) expect(await session.cancelInput(input.inputId)).toBe(true)
    // One byte past 1 MiB (multi-byte characters count as bytes).
    const huge = await errorOf(session.send('é'.repeat(512 * 1024) + 'x', { priority: 'later' }))
    expect(huge.code).toBe('SESSION_INPUT_QUEUE_FULL')
    expect(session.getPendingInputs()).toEqual([])
    g.open()
    await drained
    await session.close()
  })

  it('malformed messages reject with INVALID_INPUT naming the message, idle or steering, and leave nothing behind', async () => {
    server.reply(chat('still fine'))
    const session = await createSession(options())
    const throwingGetter = { get type() { throw new Error('getter exploded') } }
    const hostileProxy = new Proxy({}, { ownKeys() { throw new Error('proxy exploded') } })
    const circular: any[] = [{ type: 'text', text: 'a' }]
    circular.push(circular)
    const bad: unknown[] = [42, null, undefined, { text: 'hi' }, [{ type: 'text', text: 5 }], [{ type: 'image_url', image_url: {} }], [throwingGetter], hostileProxy, 10n, Symbol('s'), circular, () => 'fn', new Date(), new String('hi'), []]
    const unclear: string[] = []
    for (const message of bad) {
      const error = await session.send(message as any).then(
        async (submission) => {
          // Accepted: let its request end before the next attempt.
          await drain(session).catch(() => [])
          return { code: 'ACCEPTED', message: JSON.stringify(submission) }
        },
        (caught) => caught,
      )
      if (error.code !== 'INVALID_INPUT' || !/\bmessage\b/.test(error.message)) unclear.push(`${Array.isArray(message) ? 'array' : typeof message}: ${error.code} ${error.message}`)
    }
    // Each is refused as INVALID_INPUT by a message that names the message (an empty list of
    // parts is no message at all).
    expect(unclear).toEqual([])
    expect(server.requests).toHaveLength(0)
    expect(session.messages).toEqual([])
    // The same while a request runs: nothing is queued.
    const g = gate()
    server.reply(g.handler('Busy ', 'done.'))
    await session.send('Start')
    const drained = drain(session)
    await g.started
    for (const message of bad) {
      const error = await errorOf(session.send(message as any, { priority: 'next' }))
      expect(error.code, `${String(typeof message)}: ${error.message}`).toBe('INVALID_INPUT')
    }
    expect(session.getPendingInputs()).toEqual([])
    g.open()
    await drained
    await session.close()
  })

  it('bad send options: a clear error naming the option, and nothing starts or is queued', async () => {
    const g = gate()
    server.reply(g.handler('Busy ', 'done.'))
    const session = await createSession(options())
    expect((await errorOf(session.send('x', { priority: 'urgent' as any }))).message).toBe("options.priority must be 'now', 'next' or 'later' (got \"urgent\")")
    expect((await errorOf(session.send('x', { priority: 1 as any }))).message).toMatch(/^options\.priority must be/)
    expect((await errorOf(session.send('x', 'now' as any))).message).toMatch(/^send options must be an object/)
    expect((await errorOf(session.send('x', { expectedRequestId: 7 as any }))).message).toMatch(/^options\.expectedRequestId must be a string/)
    expect((await errorOf(session.send('x', { signal: {} as any }))).message).toMatch(/^options\.signal must be an AbortSignal/)
    expect(server.requests).toHaveLength(0)
    const started = await session.send('Start')
    if (started.status !== 'started') throw new Error('not started')
    const drained = drain(session)
    await g.started
    const during = await errorOf(session.send('steer', { maxTurns: 3 }))
    expect(during.message).toBe('signal, maxTurns, and context can only be set when starting an idle request')
    expect(during.code).toBe('SESSION_INPUT_OPTIONS_UNSUPPORTED')
    // The request's inputId is not its requestId.
    const spoof = await errorOf(session.send('steer', { expectedRequestId: started.inputId as any }))
    expect(spoof.code).toBe('SESSION_REQUEST_MISMATCH')
    expect(spoof.message).toBe(`Expected request "${started.inputId}" but "${started.requestId}" is active`)
    expect(session.getPendingInputs()).toEqual([])
    expect((await errorOf(session.cancelInput(42 as any))).message).toMatch(/^cancelInput takes an input id string/)
    expect(await session.cancelInput('no-such-input')).toBe(false)
    g.open()
    await drained
    await session.close()
  })

  it('after close(): send rejects `Session is closed` (SESSION_CLOSED), even with the `later` priority, and stream() does not start a request', async () => {
    const g = gate()
    server.reply(g.handler('Busy ', 'done.'), chat('must not be asked'))
    const session = await createSession(options())
    await session.send('Start')
    const drained = drain(session).catch((error) => [{ type: 'thrown', error } as any])
    await g.started
    await session.send('left for later', { priority: 'later' })
    await session.close()
    await drained
    for (const priority of [undefined, 'now', 'next', 'later'] as const) {
      const error = await errorOf(session.send('after close', { priority }))
      expect(error.message).toBe('Session is closed')
      expect(error.code).toBe('SESSION_CLOSED')
    }
    await expect(drain(session)).rejects.toThrow(/closed|No pending message/)
    await sleep(30)
    expect(server.requests).toHaveLength(1)
  })
})

// ---------------------------------------------------------------------------------------------

describe('permissions fail closed on the session path', () => {
  const writeCall = () => chat('', [{ id: 'call_w', name: 'write_note', arguments: '{"text":"x"}' }])

  async function writeAttempt(extra: Record<string, unknown>) {
    const ran: string[] = []
    server.reply(writeCall(), chat('ok'))
    const session = await createSession(options({ tools: [writeNote(ran)], allowedTools: ['write_note'], ...extra }))
    await session.send('write it')
    const events = await drain(session)
    await sleep(20)
    await session.close().catch(async () => {
      await sleep(300)
      await session.close()
    })
    return { ran, events, result: ofType(events, 'tool_result')[0] }
  }

  it('a canUseTool that throws denies the call: the tool does not run', async () => {
    const { ran, result } = await writeAttempt({
      canUseTool: async () => {
        throw new Error('policy service down')
      },
    })
    expect(ran).toEqual([])
    expect(result.isError).toBe(true)
  })

  it('a canUseTool past hookTimeoutMs denies the call: the tool does not run', async () => {
    const { ran, result } = await writeAttempt({
      hookTimeoutMs: 50,
      canUseTool: async () => (await sleep(250), { behavior: 'allow' as const }),
    })
    expect(ran).toEqual([])
    expect(result.isError).toBe(true)
  })

  for (const [label, answer] of [
    ['an unknown string', 'yes'],
    ['an unknown behavior', { behavior: 'maybe' }],
    ['null', null],
    ['undefined', undefined],
    ['a number', 1],
    ['behavior with a trailing space', { behavior: 'allow ' }],
    ['true', true],
  ] as const) {
    it(`a canUseTool answering ${label} denies the call`, async () => {
      const { ran, result } = await writeAttempt({ canUseTool: async () => answer })
      expect(ran).toEqual([])
      expect(result.isError).toBe(true)
    })
  }

  it('a permissionHandler answering garbage denies the call', async () => {
    for (const answer of ['yes', { decision: 'allow' }, null, 7]) {
      const { ran, result } = await writeAttempt({ permissionHandler: async () => answer })
      expect(ran).toEqual([])
      expect(result.isError).toBe(true)
    }
  })

  it("permissionMode 'plan' beside a permissionHandler that allows everything: an execute tool is denied with Blade's text", async () => {
    const ran: string[] = []
    let asked = 0
    server.reply(chat('', [{ id: 'call_x', name: 'run_command', arguments: '{"cmd":"rm -rf /"}' }]), chat('ok'))
    const session = await createSession(
      options({ tools: [runCommand(ran)], allowedTools: ['run_command'], permissionMode: 'plan', permissionHandler: async () => (asked++, { behavior: 'allow' }) }),
    )
    await session.send('run it')
    const events = await drain(session)
    expect(ran).toEqual([])
    expect(asked).toBe(0)
    expect(ofType(events, 'tool_result')[0].output).toBe(
      'Tool execution aborted: Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)',
    )
    await session.close()
  })

  it("setPermissionMode('plan') on a session whose canUseTool allows everything: the next request's write is denied", async () => {
    const ran: string[] = []
    server.reply(writeCall(), chat('ok'))
    const session = await createSession(options({ tools: [writeNote(ran)], allowedTools: ['write_note'], canUseTool: async () => ({ behavior: 'allow' as const }) }))
    await session.setPermissionMode('plan')
    await session.send('write it')
    const events = await drain(session)
    expect(ran).toEqual([])
    expect(ofType(events, 'tool_result')[0].isError).toBe(true)
    await session.close()
  })

  it('a ProviderRegistry model is under the same policies: its write call is denied in plan mode and PreToolUse sees it', async () => {
    const ran: string[] = []
    const seen: string[] = []
    let turn = 0
    const registry = new ProviderRegistry([
      {
        type: 'local-model',
        create: () => ({
          async *streamChat() {
            turn++
            if (turn === 1) yield { toolCalls: [{ index: 0, id: 'call_r', function: { name: 'write_note', arguments: '{"text":"pwn"}' } }] }
            else yield { content: 'done' }
          },
        }),
      },
    ])
    const session = await createSession({
      provider: { type: 'local-model' },
      providerRegistry: registry,
      model: 'local',
      tools: [writeNote(ran)],
      allowedTools: ['write_note'],
      permissionMode: 'plan',
      hooks: { PreToolUse: [async (input: any) => (seen.push(input.toolName), { action: 'continue' as const })] },
    } as any)
    await session.send('go')
    const events = await drain(session)
    expect(ran).toEqual([])
    expect(ofType(events, 'tool_result')[0].isError).toBe(true)
    expect(events.at(-1)).toMatchObject({ type: 'result', content: 'done' })
    expect(server.requests).toHaveLength(0)
    await session.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('provider objects: no secret in errors, no header injection, http(s) only', () => {
  it('a baseUrl that is not http(s) is a ConfigError naming provider.baseUrl, without the user-info in it', async () => {
    for (const baseUrl of ['file:///etc/passwd', 'ftp://example.com/v1', 'javascript:alert(1)', 'not a url', `https://user:${API_KEY}@[::1`]) {
      const error = await errorOf(createSession(options({ provider: provider({ baseUrl }) })))
      expect(error.message, baseUrl).toMatch(/^provider\.baseUrl must be an http\(s\) URL/)
      expect(error.message).not.toContain(API_KEY)
    }
    expect(server.requests).toHaveLength(0)
  })

  it('a header value with CR/LF is refused naming the header, without echoing the value', async () => {
    const error = await errorOf(createSession(options({ provider: provider({ headers: { 'X-Team': `a\r\nX-Injected: ${API_KEY}` } }) })))
    expect(error.message).toBe('provider.headers.X-Team is not a valid header value')
    const name = await errorOf(createSession(options({ provider: provider({ headers: { 'X Bad\r\n': 'v' } }) })))
    expect(name.message).toMatch(/not a valid header name/)
    expect(server.requests).toHaveLength(0)
  })

  it('an apiKey with CR/LF never becomes an injected header; createSession refuses it naming provider.apiKey, without showing the key', async () => {
    const key = `${API_KEY}\r\nX-Injected: yes`
    server.reply(chat('should not be reached'))
    const outcome = await createSession(options({ provider: provider({ apiKey: key }) })).then(
      async (session) => {
        await session.send('hi')
        const events = await drain(session)
        await session.close()
        return `created; the request ended with: ${ofType(events, 'error')[0]?.message ?? 'no error'}`
      },
      (error) => String(error.message),
    )
    expect(outcome).not.toContain(API_KEY)
    expect(server.requests.some((request) => request.headers['x-injected'] !== undefined)).toBe(false)
    // Refused where the headers are (at createSession, as provider.headers values are), naming the field.
    expect(outcome).toBe('provider.apiKey is not a valid header value')
  })

  it('model errors (401 with the key echoed back aside) and an unreachable server never show the apiKey', async () => {
    server.reply((_req, res) => {
      res.writeHead(401, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: 'Incorrect API key provided' } }))
    })
    const session = await createSession(options({ provider: provider({ maxRetries: 0 }) }))
    await session.send('hi')
    const events = await drain(session)
    const [error] = ofType(events, 'error')
    expect(error).toBeDefined()
    expect(JSON.stringify(events)).not.toContain(API_KEY)
    await session.close()

    const down = await createSession(options({ provider: provider({ baseUrl: 'http://127.0.0.1:9/v1', maxRetries: 0 }) }))
    await down.send('hi')
    const downEvents = await drain(down)
    expect(ofType(downEvents, 'error')).toHaveLength(1)
    expect(JSON.stringify(downEvents)).not.toContain(API_KEY)
    await down.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('ProviderRegistry models that misbehave', () => {
  const sessionOn = (model: object | (() => object), extra: Record<string, unknown> = {}) =>
    createSession({
      provider: { type: 'hostile' },
      providerRegistry: new ProviderRegistry([{ type: 'hostile', create: (typeof model === "function" ? model : () => model) as any }]),
      model: 'm',
      allowedTools: [],
      ...extra,
    } as any)

  it('create() that throws: createSession rejects with its error, and no session is left', async () => {
    const error = await errorOf(
      sessionOn(() => {
        throw new Error('no GPU')
      }),
    )
    expect(error.message).toMatch(/no GPU/)
    const notModel = await errorOf(sessionOn(() => 42 as any))
    expect(notModel.message).toBe(`providerRegistry's "hostile" create() must return a model with streamChat() or chat()`)
  })

  it('streamChat() that throws mid-answer: the request ends with an error naming it, and the session takes the next request', async () => {
    let calls = 0
    const session = await sessionOn({
      async *streamChat() {
        calls++
        if (calls === 1) {
          yield { content: 'half' }
          throw new Error('model crashed')
        }
        yield { content: 'recovered' }
      },
    })
    await session.send('one')
    const events = await drain(session)
    expect(ofType(events, 'error')[0]?.message).toMatch(/model crashed/)
    expect(JSON.stringify(session.messages)).not.toContain('half')
    expect(await answerOf(session, 'two')).toBe('recovered')
    await session.close()
  })

  it('streamChat() yielding garbage chunks: no crash; the request ends with a result or a clear error, and the session goes on', async () => {
    const garbage = [42, null, 'text', { content: 7 }, { toolCalls: 'nope' }, { toolCalls: [null] }, { usage: { promptTokens: 'many' } }]
    for (const chunk of garbage) {
      const session = await sessionOn({
        async *streamChat() {
          yield chunk
          yield { content: 'ok' }
        },
      })
      await session.send('go')
      const events = await drain(session)
      const last = events.at(-1)
      expect(['result', 'error'], JSON.stringify(chunk)).toContain(last?.type)
      if (last?.type === 'error') expect(String((last as any).message).length).toBeGreaterThan(0)
      await session.close()
    }
  })

  it('a tool call without an id or with non-JSON arguments: the request ends (result or error) without crashing the process', async () => {
    let turn = 0
    const ran: string[] = []
    const session = await sessionOn(
      {
        async *streamChat() {
          turn++
          if (turn === 1) yield { toolCalls: [{ index: 0, function: { name: 'write_note', arguments: '{not json' } }] }
          else yield { content: 'done' }
        },
      },
      { tools: [writeNote(ran)], allowedTools: ['write_note'], permissionMode: 'yolo' },
    )
    await session.send('go')
    const events = await drain(session)
    expect(['result', 'error']).toContain(events.at(-1)?.type)
    expect(ran).toEqual([])
    await session.close()
  })

  it('streamChat() that never ends: abort() ends the request within a second, and close() works', async () => {
    const session = await sessionOn({
      async *streamChat() {
        yield { content: 'thinking' }
        await new Promise(() => {})
      },
    })
    await session.send('go')
    let abortedAt = 0
    setTimeout(() => {
      abortedAt = Date.now()
      void session.abort()
    }, 100)
    const events = await drain(session)
    expect(abortedAt).toBeGreaterThan(0)
    expect(Date.now() - abortedAt).toBeLessThan(1000)
    expect(events.at(-1)).toMatchObject({ type: 'error', code: 'ABORT' })
    expect(session.isClosed).toBe(false)
    await session.close()
    expect(session.isClosed).toBe(true)
  })

  it('a chat() that never resolves: close() during the request ends it', async () => {
    const session = await sessionOn({ chat: () => new Promise(() => {}) })
    await session.send('go')
    const drained = drain(session).catch(() => [])
    await sleep(50)
    const closing = Date.now()
    await session.close()
    await drained
    expect(Date.now() - closing).toBeLessThan(1000)
    expect(session.isClosed).toBe(true)
  })
})

// ---------------------------------------------------------------------------------------------

describe('resumeSession / forkSession with bad ids', () => {
  it('a sessionId that is not a string is a clear error naming sessionId', async () => {
    const store = tempDir('arh-safety-store-')
    for (const sessionId of [42, null, { id: 'x' }, ['a'], '']) {
      for (const open of [resumeSession, forkSession]) {
        const error = await errorOf(open({ ...options(), storagePath: store, sessionId } as any))
        expect(error.message, `${open.name}(${JSON.stringify(sessionId)})`).toMatch(/sessionId/)
      }
    }
    const missing = await errorOf(resumeSession({ ...options(), storagePath: store } as any))
    expect(missing.message).toMatch(/sessionId/)
  })

  it("a session of another store is not found, naming the id, in either function", async () => {
    const one = tempDir('arh-safety-store-')
    const other = tempDir('arh-safety-store-')
    server.reply(chat('Noted.'))
    const session = await createSession(options({ storagePath: one }))
    await answerOf(session, 'remember')
    await session.close()
    for (const open of [resumeSession, forkSession]) {
      const error = await errorOf(open({ ...options(), storagePath: other, sessionId: session.sessionId }))
      expect(error.code).toBe('SESSION_NOT_FOUND')
      expect(error.message).toContain(session.sessionId)
    }
  })

  it('forkSession of a session paused for approvals is refused; resumeSession of it brings the approvals back', async () => {
    const store = tempDir('arh-safety-store-')
    const ran: string[] = []
    server.reply(chat('', [{ id: 'call_1', name: 'write_note', arguments: '{"text":"hi"}' }]))
    const session = await createSession(options({ storagePath: store, tools: [writeNote(ran)], allowedTools: ['write_note'], permissionMode: 'default' }))
    await session.send('note it')
    await drain(session)
    expect(session.pendingApprovals).toHaveLength(1)
    await session.close()
    const fork = await errorOf(forkSession({ ...options({ tools: [writeNote(ran)], allowedTools: ['write_note'] }), storagePath: store, sessionId: session.sessionId }))
    expect(fork.message).toMatch(/paused|approval|resume/i)
    const resumed = await resumeSession({ ...options({ tools: [writeNote(ran)], allowedTools: ['write_note'], permissionMode: 'default' }), storagePath: store, sessionId: session.sessionId })
    expect(resumed.pendingApprovals.map((call) => call.toolCallId)).toEqual(['call_1'])
    expect(ran).toEqual([])
    await resumed.close()
  })
})
