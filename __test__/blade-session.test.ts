// Blade's session API (SPEC §10.1): createSession / resumeSession / forkSession / prompt(message,
// SessionOptions), the ISession object (send with priorities, stream, getPendingInputs,
// cancelInput, abort, fork, close), the stream events, provider objects, ProviderRegistry and the
// subpath exports — checked from the outside, the way a Blade user would notice them: what the
// model server is sent, what the stream yields, what a program prints.
//
// Written from Blade's docs (README.md, docs/en/session.md, examples/local-cli-agent) and
// research/blade-sessions-builtins.md §A, not from the implementation. Where the note marks a
// point as uncertain, or where Blade 4.2 and newest differ, the test says so in a comment.
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import ts from 'typescript'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  ConfigError,
  createSession,
  defineTool,
  forkSession,
  prompt,
  resumeSession,
  type HookCallback,
  type HookInput,
  type ISession,
  type SessionOptions,
  type SessionStreamEvent,
} from '../index.js'
// session-program.ts imports agent-runtime-hooks/core: it is loaded in its tests (a missing
// subpath fails those tests, not the whole file).
const sessionProgram = () => import('./blade/session-program.js')
import { childEnv, runScript, type ChildResult } from './helpers/child.js'
import { openaiChunks, rawStream, sleep, sse, useServer, type Handler } from './helpers/server.js'
import { contentText, drain, ofType, textOf } from './helpers/session.js'

const server = useServer()
const ROOT = resolve(__dirname, '..')

// ---------------------------------------------------------------------------------------------
// helpers

const API_KEY = 'sk-session-test'
const MODEL = 'session-model'

const provider = (extra: Record<string, unknown> = {}) => ({ type: 'openai-compatible' as const, apiKey: API_KEY, baseUrl: server.url + '/v1', ...extra })

/** Session options against the loopback server. `allowedTools: []` keeps the built-in tools
 * (on by default for a local Session) out of the requests unless a test asks for tools. */
function options(extra: Partial<SessionOptions> = {}): SessionOptions {
  return { provider: provider(), model: MODEL, allowedTools: [], ...extra } as SessionOptions
}

/** A streamed chat-completion answer: text and/or tool calls (11 prompt + 7 completion tokens). */
const chat = (text: string, calls: { id: string; name: string; arguments: string }[] = []): Handler => rawStream([sse(openaiChunks(text, calls))])

/**
 * A slow streamed answer: `head` at once, then `tail` after `holdMs` (or nothing, if the client
 * hung up first). `state.tailSent` tells whether the tail was ever written.
 */
function slowAnswer(head: string, tail: string, holdMs: number, state: { tailSent?: boolean; closed?: boolean } = {}): Handler {
  return async (_req, res: ServerResponse) => {
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
    await Promise.race([sleep(holdMs), closed])
    if (state.closed) return
    state.tailSent = true
    write({ choices: [{ index: 0, delta: { content: tail } }] })
    write({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
    write({ choices: [], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } })
    res.end('data: [DONE]\n\n')
  }
}

/** Event types, each run of `content` events shown once as `content…`. */
function shape(events: SessionStreamEvent[]): string[] {
  const out: string[] = []
  for (const event of events) {
    const type = event.type === 'content' ? 'content…' : event.type
    if (type === 'content…' && out.at(-1) === 'content…') continue
    out.push(type)
  }
  return out
}

/** `{ role, content }` of each message, system messages left out (whether Blade keeps the system
 * prompt in `session.messages` is not documented). */
const conversation = (messages: readonly any[]) =>
  messages.filter((message) => message.role !== 'system').map((message) => ({ role: message.role, content: contentText(message.content) }))

/** The messages of the model request `index`, as `{ role, content }` (system included). */
const sent = (index: number) => (server.requests[index].body.messages as any[]).map((message) => ({ role: message.role, content: contentText(message.content) }))

const toolNames = (index: number) => ((server.requests[index].body.tools ?? []) as any[]).map((tool) => tool.function?.name ?? tool.name)

const lookup = (log: string[] = []) =>
  defineTool<{ q: string }>({
    name: 'lookup',
    description: 'Looks a word up',
    kind: 'readonly',
    parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
    execute: async ({ q }) => {
      log.push(`lookup:${q}`)
      return `price of ${q}: 3`
    },
  })

const writeNote = (log: string[] = []) =>
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

/** Runs `node <args>` in `cwd` with the test's environment plus `env`. */
function runNode(args: string[], { cwd, env = {}, timeoutMs = 10000 }: { cwd: string; env?: Record<string, string | undefined>; timeoutMs?: number }): Promise<ChildResult> {
  return new Promise((done) => {
    const started = Date.now()
    execFile(process.execPath, args, { cwd, timeout: timeoutMs, env: childEnv(env) }, (error, stdout, stderr) => {
      const timedOut = Boolean(error && (error as any).killed) && Date.now() - started >= timeoutMs - 100
      done({ code: error ? ((error as any).code ?? null) : 0, signal: error ? ((error as any).signal ?? null) : null, stdout, stderr, timedOut })
    })
  })
}

/** Lines `<TAG> <json>` a child printed, by tag. */
function tagged(stdout: string): Record<string, any> {
  const out: Record<string, any> = {}
  for (const line of stdout.split('\n')) {
    const match = /^([A-Z]+) (.*)$/.exec(line)
    if (match) out[match[1]] = JSON.parse(match[2])
  }
  return out
}

const dirs: string[] = []
function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** A project that depends on agent-runtime-hooks the way an installed package does
 * (node_modules/agent-runtime-hooks → this repository), so bare imports go through "exports". */
function consumerProject(): string {
  const dir = tempDir('arh-blade-consumer-')
  mkdirSync(join(dir, 'node_modules'))
  symlinkSync(ROOT, join(dir, 'node_modules', 'agent-runtime-hooks'), 'junction')
  writeFileSync(join(dir, 'package.json'), '{"private":true,"type":"module"}\n')
  return dir
}

/** A TypeScript program of __test__/blade/, as plain ESM JavaScript (types erased, nothing else changed). */
function transpiled(file: string): string {
  const source = readFileSync(join(ROOT, '__test__', 'blade', file), 'utf8')
  return ts.transpileModule(source, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText
}

// ---------------------------------------------------------------------------------------------

describe('createSession and the ISession object', () => {
  it('resolves only after the SessionStart hooks ran; sessionId, messages and isClosed', async () => {
    const log: string[] = []
    const inputs: HookInput[] = []
    const sessionStart: HookCallback = async (input) => {
      await sleep(30)
      log.push('SessionStart')
      inputs.push(input)
      return { action: 'continue' }
    }
    const session = await createSession(options({ hooks: { SessionStart: [sessionStart] } }))
    expect(log).toEqual(['SessionStart'])
    expect(typeof session.sessionId).toBe('string')
    expect(session.sessionId.length).toBeGreaterThan(0)
    expect(inputs[0]).toMatchObject({ event: 'SessionStart', sessionId: session.sessionId })
    expect(session.messages).toEqual([])
    expect(session.isClosed).toBe(false)
    expect(server.requests).toHaveLength(0)
    await session.close()
    expect(session.isClosed).toBe(true)
  })

  it('send() starts a request; stream() yields turn_start, content…, turn_end, usage, result, each with sessionId', async () => {
    server.reply(chat('Hello there.'))
    const session = await createSession(options({ systemPrompt: 'You are terse.', tools: [lookup()], allowedTools: ['lookup'] }))
    const submission = await session.send('Say hello.')
    expect(submission).toEqual({ status: 'started', inputId: expect.any(String), requestId: expect.any(String) })
    const events = await drain(session)
    expect(shape(events)).toEqual(['turn_start', 'content…', 'turn_end', 'usage', 'result'])
    for (const event of events) expect(event.sessionId).toBe(session.sessionId)
    expect(textOf(events)).toBe('Hello there.')
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: 'Hello there.' })
    expect(ofType(events, 'turn_start')[0].turn).toBe(1)
    expect(ofType(events, 'usage')[0].usage).toMatchObject({ inputTokens: 11, outputTokens: 7, totalTokens: 18 })

    // What the model was sent.
    expect(server.requests).toHaveLength(1)
    const [request] = server.requests
    expect(request.method).toBe('POST')
    expect(request.url).toBe('/v1/chat/completions')
    expect(request.headers.authorization).toBe(`Bearer ${API_KEY}`)
    expect(request.body.model).toBe(MODEL)
    const messages = sent(0)
    expect(messages[0].role).toBe('system')
    // Blade may add to the system prompt (environment, skills); the user's text must be in it.
    expect(messages[0].content).toContain('You are terse.')
    expect(messages.at(-1)).toEqual({ role: 'user', content: 'Say hello.' })
    expect(toolNames(0)).toEqual(['lookup'])
    expect(request.body.tools[0].function.parameters).toEqual({ type: 'object', properties: { q: { type: 'string' } }, required: ['q'] })

    expect(conversation(session.messages)).toEqual([
      { role: 'user', content: 'Say hello.' },
      { role: 'assistant', content: 'Hello there.' },
    ])
    await session.close()
  })

  it('a second send() is a new request that carries the conversation so far', async () => {
    server.reply(chat('Hi Ada.'), chat('Your name is Ada.'))
    const session = await createSession(options())
    const first = await session.send('My name is Ada.')
    await drain(session)
    const second = await session.send('What is my name?')
    expect(second).toEqual({ status: 'started', inputId: expect.any(String), requestId: expect.any(String) })
    if (first.status !== 'started' || second.status !== 'started') throw new Error('not started')
    expect(second.requestId).not.toBe(first.requestId)
    expect(second.inputId).not.toBe(first.inputId)
    const events = await drain(session)
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: 'Your name is Ada.' })
    expect(sent(1).filter((message) => message.role !== 'system')).toEqual([
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Hi Ada.' },
      { role: 'user', content: 'What is my name?' },
    ])
    expect(conversation(session.messages)).toHaveLength(4)
    await session.close()
  })
})

// ---------------------------------------------------------------------------------------------

function anthropicEvent(type: string, data: object) {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
}

function anthropicText(text: string) {
  return (
    anthropicEvent('message_start', { message: { id: 'msg_1', role: 'assistant', content: [], usage: { input_tokens: 12, output_tokens: 1 } } }) +
    anthropicEvent('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }) +
    anthropicEvent('content_block_delta', { index: 0, delta: { type: 'text_delta', text } }) +
    anthropicEvent('content_block_stop', { index: 0 }) +
    anthropicEvent('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9 } }) +
    anthropicEvent('message_stop', {})
  )
}

async function answerOf(session: ISession, message: string): Promise<string> {
  await session.send(message)
  const events = await drain(session)
  const errors = ofType(events, 'error')
  if (errors.length) throw new Error(errors[0].message)
  return textOf(events)
}

describe('the provider object (SessionOptions.provider)', () => {
  it("openai-compatible: POST {baseUrl}/chat/completions with Authorization: Bearer <apiKey> and the custom headers", async () => {
    server.reply(chat('compatible'))
    const session = await createSession(options({ provider: provider({ headers: { 'X-Tenant': 'acme', 'X-Trace': 't-1' } }) }))
    expect(await answerOf(session, 'hi')).toBe('compatible')
    const [request] = server.requests
    expect(request.method).toBe('POST')
    expect(request.url).toBe('/v1/chat/completions')
    expect(request.headers.authorization).toBe(`Bearer ${API_KEY}`)
    expect(request.headers['x-tenant']).toBe('acme')
    expect(request.headers['x-trace']).toBe('t-1')
    await session.close()
  })

  it('anthropic: POST {baseUrl}/messages with x-api-key (Blade builds it with @ai-sdk/anthropic, which appends /messages)', async () => {
    server.reply(rawStream([anthropicText('Bonjour.')]))
    const session = await createSession(options({ provider: { type: 'anthropic', apiKey: 'ak-session', baseUrl: server.url + '/v1' }, model: 'claude-test' }))
    expect(await answerOf(session, 'hi')).toBe('Bonjour.')
    const [request] = server.requests
    expect(request.method).toBe('POST')
    expect(request.url).toBe('/v1/messages')
    expect(request.headers['x-api-key']).toBe('ak-session')
    expect(request.headers.authorization).toBeUndefined()
    expect(request.body.model).toBe('claude-test')
    await session.close()
  })

  it('deepseek: POST {baseUrl}/chat/completions with Bearer <apiKey>', async () => {
    server.reply(chat('deep'))
    const session = await createSession(options({ provider: { type: 'deepseek', apiKey: 'ds-key', baseUrl: server.url + '/v1' }, model: 'deepseek-chat' }))
    expect(await answerOf(session, 'hi')).toBe('deep')
    const [request] = server.requests
    expect(request.url).toBe('/v1/chat/completions')
    expect(request.headers.authorization).toBe('Bearer ds-key')
    expect(request.body.model).toBe('deepseek-chat')
    await session.close()
  })

  // Blade 4.2 silently treats an unknown type as openai-compatible; newest resolves it through
  // `providerRegistry`. With no registry entry, the contract here is a ConfigError naming the field.
  it('an unknown provider.type (and no providerRegistry entry for it) is a ConfigError naming provider.type', async () => {
    const error = await createSession(options({ provider: { type: 'no-such-provider', apiKey: 'k', baseUrl: server.url } as any })).catch((caught) => caught)
    expect(error).toBeInstanceOf(ConfigError)
    expect(String(error.message)).toMatch(/provider\.type/)
    expect(server.requests).toHaveLength(0)
  })

  it('a missing model, provider or provider.type is a clear error naming the field', async () => {
    const noModel = await createSession({ provider: provider() } as any).catch((caught) => caught)
    expect(noModel).toBeInstanceOf(ConfigError)
    expect(String(noModel.message)).toMatch(/\bmodel\b/)

    const noType = await createSession({ provider: { apiKey: API_KEY, baseUrl: server.url }, model: MODEL } as any).catch((caught) => caught)
    expect(noType).toBeInstanceOf(ConfigError)
    expect(String(noType.message)).toMatch(/provider\.type/)

    const noProvider = await createSession({ model: MODEL } as any).catch((caught) => caught)
    expect(noProvider).toBeInstanceOf(ConfigError)
    expect(String(noProvider.message)).toMatch(/\bprovider\b/)
    expect(server.requests).toHaveLength(0)
  })
})

// ---------------------------------------------------------------------------------------------

describe('prompt(message, SessionOptions)', () => {
  it('runs one request and resolves a PromptResult { result, toolCalls, usage, duration, turnsCount }, closing its session', async () => {
    server.reply(chat('', [{ id: 'call_1', name: 'lookup', arguments: '{"q":"tea"}' }]), chat('Tea costs 3.'))
    const ran: string[] = []
    const ends: string[] = []
    const result = await prompt('How much is tea?', {
      ...options({ tools: [lookup(ran)], allowedTools: ['lookup'] }),
      hooks: { SessionEnd: [async (input) => (ends.push(input.event), { action: 'continue' })] },
    })
    // Blade's five fields (this runtime's PromptResult has more: content, turns, stopReason).
    expect(Object.keys(result)).toEqual(expect.arrayContaining(['duration', 'result', 'toolCalls', 'turnsCount', 'usage']))
    expect(result.result).toBe('Tea costs 3.')
    expect(result.toolCalls).toHaveLength(1)
    const [call] = result.toolCalls
    expect(call).toMatchObject({ id: 'call_1', name: 'lookup', input: { q: 'tea' }, output: 'price of tea: 3' })
    expect(typeof call.duration).toBe('number')
    expect(call.duration).toBeGreaterThanOrEqual(0)
    expect(call.isError ?? false).toBe(false)
    // Two model calls of 11 + 7 tokens each.
    expect(result.usage).toMatchObject({ inputTokens: 22, outputTokens: 14, totalTokens: 36 })
    expect(typeof result.duration).toBe('number')
    expect(result.turnsCount).toBe(2)
    expect(ran).toEqual(['lookup:tea'])
    expect(ends).toEqual(['SessionEnd'])

    expect(server.requests).toHaveLength(2)
    expect(server.requests[1].body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'call_1', content: 'price of tea: 3' })
  })
})

// ---------------------------------------------------------------------------------------------

describe('tools, hooks and permissions on the session path', () => {
  it('a PreToolUse abort gives the model `Tool execution aborted: <reason>` and the tool does not run', async () => {
    server.reply(chat('', [{ id: 'call_1', name: 'lookup', arguments: '{"q":"tea"}' }]), chat('Lookups are paused.'))
    const ran: string[] = []
    const session = await createSession(
      options({
        tools: [lookup(ran)],
        allowedTools: ['lookup'],
        hooks: { PreToolUse: [async (input) => (input.toolName === 'lookup' ? { action: 'abort', reason: 'lookups are paused' } : { action: 'continue' })] },
      }),
    )
    await session.send('How much is tea?')
    const events = await drain(session)
    expect(ran).toEqual([])
    expect(server.requests[1].body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'call_1', content: 'Tool execution aborted: lookups are paused' })
    expect(ofType(events, 'tool_use')[0]).toMatchObject({ id: 'call_1', name: 'lookup', input: { q: 'tea' } })
    expect(ofType(events, 'tool_result')[0]).toMatchObject({ id: 'call_1', name: 'lookup' })
    expect(events.at(-1)).toMatchObject({ type: 'result', content: 'Lookups are paused.' })
    await session.close()
  })

  it('canUseTool receives toolKind; a deny reaches the model as `Tool execution aborted: <message>`', async () => {
    server.reply(
      chat('', [
        { id: 'call_r', name: 'lookup', arguments: '{"q":"tea"}' },
        { id: 'call_w', name: 'write_note', arguments: '{"text":"buy tea"}' },
      ]),
      chat('Looked up; could not write.'),
    )
    const ran: string[] = []
    const asked: Array<[string, unknown, string]> = []
    const session = await createSession(
      options({
        tools: [lookup(ran), writeNote(ran)],
        allowedTools: ['lookup', 'write_note'],
        canUseTool: async (toolName, input, opts) => {
          asked.push([toolName, input, opts.toolKind])
          return opts.toolKind === 'write' ? { behavior: 'deny', message: 'notes are read-only' } : { behavior: 'allow' }
        },
      }),
    )
    await session.send('Look tea up and note it.')
    await drain(session)
    // Whether canUseTool is also asked about a readonly tool in the default mode is not pinned.
    expect(asked).toContainEqual(['write_note', { text: 'buy tea' }, 'write'])
    for (const [, , kind] of asked) expect(['readonly', 'write', 'execute']).toContain(kind)
    expect(ran).toEqual(['lookup:tea'])
    const toolMessages = (server.requests[1].body.messages as any[]).filter((message) => message.role === 'tool')
    expect(toolMessages).toEqual([
      { role: 'tool', tool_call_id: 'call_r', content: 'price of tea: 3' },
      { role: 'tool', tool_call_id: 'call_w', content: 'Tool execution aborted: notes are read-only' },
    ])
    await session.close()
  })

  it('allowedTools: [] offers no tools; allowedTools: [x] offers only x; omitted offers the custom tools too', async () => {
    server.reply(chat('ok'))
    const tools = [lookup(), writeNote()]
    const none = await createSession(options({ tools, allowedTools: [] }))
    await answerOf(none, 'hi')
    expect(toolNames(0)).toEqual([])
    await none.close()

    server.requests.length = 0
    const only = await createSession(options({ tools, allowedTools: ['write_note'] }))
    await answerOf(only, 'hi')
    expect(toolNames(0)).toEqual(['write_note'])
    await only.close()

    server.requests.length = 0
    const open = await createSession({ provider: provider(), model: MODEL, tools })
    await answerOf(open, 'hi')
    // Built-in tools may be offered beside them (a local Session registers them by default).
    expect(toolNames(0)).toEqual(expect.arrayContaining(['lookup', 'write_note']))
    await open.close()
  })
})

// ---------------------------------------------------------------------------------------------
// docs/en/session.md "Steer an active request"

describe('steering an active request (now / next / later)', () => {
  // The step being steered is a plain text answer (no tool call): Blade 4.2's loop
  // (src/agent/AgentLoop.ts, "no tool calls" branch) then applies pending `next` inputs and runs
  // one more model turn instead of ending the request. Newest was not run (note §C).
  it("next: `steered`, input_applied at the next safe point, and the next model request carries it (the step is not interrupted)", async () => {
    const first: { tailSent?: boolean } = {}
    server.reply(slowAnswer('Draft ', 'answer.', 250, first), chat('Revised, public types kept.'))
    const session = await createSession(options())
    const started = await session.send('Refactor the parser')
    if (started.status !== 'started') throw new Error(`not started: ${JSON.stringify(started)}`)
    let steer: unknown
    const events = await drain(session, async (event) => {
      if (event.type === 'content' && event.delta && !steer) {
        steer = await session.send('Preserve all public types', { priority: 'next', expectedRequestId: started.requestId })
      }
    })
    expect(steer).toEqual({ status: 'steered', inputId: expect.any(String), requestId: started.requestId, priority: 'next' })
    const { inputId } = steer as { inputId: string }
    const applied = ofType(events, 'input_applied')
    expect(applied).toHaveLength(1)
    expect(applied[0]).toMatchObject({ inputId, requestId: started.requestId, priority: 'next', sessionId: session.sessionId })
    expect(typeof applied[0].turn).toBe('number')
    expect(ofType(events, 'turn_interrupted')).toEqual([])
    // The running step finished: its whole answer streamed, and it stays in the context.
    expect(first.tailSent).toBe(true)
    expect(textOf(events)).toContain('Draft answer.')
    expect(server.requests).toHaveLength(2)
    const next = sent(1).filter((message) => message.role !== 'system')
    expect(next).toEqual([
      { role: 'user', content: 'Refactor the parser' },
      { role: 'assistant', content: 'Draft answer.' },
      { role: 'user', content: 'Preserve all public types' },
    ])
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: 'Revised, public types kept.' })
    await session.close()
  })

  it('now: `steered`, turn_interrupted ends the in-flight model step, its partial text is not sent again, the next request carries the input', async () => {
    const first: { tailSent?: boolean } = {}
    server.reply(slowAnswer('Partial ', 'never streamed', 1500, first), chat('Stopped; findings only.'))
    const session = await createSession(options())
    const started = await session.send('Analyze the repository')
    if (started.status !== 'started') throw new Error(`not started: ${JSON.stringify(started)}`)
    let steer: unknown
    let steeredAt = 0
    const events = await drain(session, async (event) => {
      if (event.type === 'content' && event.delta && !steer) {
        steeredAt = Date.now()
        steer = await session.send('Stop editing and only report findings', { priority: 'now', expectedRequestId: started.requestId })
      }
    })
    const took = Date.now() - steeredAt
    expect(steer).toEqual({ status: 'steered', inputId: expect.any(String), requestId: started.requestId, priority: 'now' })
    const { inputId } = steer as { inputId: string }
    const interrupted = ofType(events, 'turn_interrupted')
    expect(interrupted).toHaveLength(1)
    expect(interrupted[0]).toMatchObject({ inputId, requestId: started.requestId, turn: 1, sessionId: session.sessionId })
    // docs/en/session.md's event table: input_applied is emitted for `now` inputs too.
    expect(ofType(events, 'input_applied')).toEqual([expect.objectContaining({ inputId, priority: 'now' })])
    // The slow step was cut: its tail never came, and the request did not wait for it.
    expect(first.tailSent).not.toBe(true)
    expect(textOf(events)).not.toContain('never streamed')
    expect(took).toBeLessThan(1200)
    expect(server.requests).toHaveLength(2)
    const next = sent(1)
    expect(JSON.stringify(next)).not.toContain('Partial')
    expect(next.at(-1)).toEqual({ role: 'user', content: 'Stop editing and only report findings' })
    expect(next.filter((message) => message.role === 'user').map((message) => message.content)).toEqual([
      'Analyze the repository',
      'Stop editing and only report findings',
    ])
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: 'Stopped; findings only.' })
    await session.close()
  })

  it('later: `queued`, listed by getPendingInputs(), kept out of the active request, run by the next stream()', async () => {
    server.reply(slowAnswer('First ', 'answer.', 150), chat('Later done.'))
    const session = await createSession(options())
    await session.send('Do the first thing')
    let queued: any
    let pending: readonly any[] = []
    const events = await drain(session, async (event) => {
      if (event.type === 'content' && event.delta && !queued) {
        queued = await session.send('Run this later', { priority: 'later' })
        pending = session.getPendingInputs()
      }
    })
    expect(queued).toEqual({ status: 'queued', inputId: expect.any(String), priority: 'later' })
    expect(pending).toContainEqual(expect.objectContaining({ inputId: queued.inputId, content: 'Run this later', priority: 'later', acceptedAt: expect.any(Number) }))
    expect(ofType(events, 'input_applied')).toEqual([])
    expect(events.at(-1)).toMatchObject({ type: 'result', content: 'First answer.' })
    expect(server.requests).toHaveLength(1)
    expect(JSON.stringify(server.requests[0].body)).not.toContain('Run this later')

    const later = await drain(session)
    expect(later.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: 'Later done.' })
    expect(server.requests).toHaveLength(2)
    expect(sent(1).at(-1)).toEqual({ role: 'user', content: 'Run this later' })
    expect(session.getPendingInputs()).toEqual([])
    await session.close()
  })

  it('cancelInput(id) of a queued input: true, gone from getPendingInputs(), never reaches the model', async () => {
    server.reply(slowAnswer('Only ', 'this.', 150), chat('must not be asked'))
    const session = await createSession(options())
    await session.send('Do the first thing')
    let queued: any
    let cancelled: boolean | undefined
    let pendingAfter: readonly any[] = []
    await drain(session, async (event) => {
      if (event.type === 'content' && event.delta && !queued) {
        queued = await session.send('Cancelled before it ran', { priority: 'later' })
        expect(session.getPendingInputs().map((input) => input.inputId)).toContain(queued.inputId)
        cancelled = await session.cancelInput(queued.inputId)
        pendingAfter = session.getPendingInputs()
      }
    })
    expect(queued.status).toBe('queued')
    expect(cancelled).toBe(true)
    expect(pendingAfter.map((input) => input.inputId)).not.toContain(queued.inputId)
    await sleep(50)
    expect(server.requests).toHaveLength(1)
    expect(JSON.stringify(server.requests.map((request) => request.body))).not.toContain('Cancelled before it ran')
    expect(session.getPendingInputs()).toEqual([])
    // Blade: cancelInput() answers false for an input it no longer holds.
    expect(await session.cancelInput(queued.inputId)).toBe(false)
    await session.close()
  })

  it('a stale expectedRequestId is rejected with an error that says so, and nothing is queued', async () => {
    server.reply(slowAnswer('Working ', 'on it.', 150), chat('Second request.'))
    const session = await createSession(options())
    const started = await session.send('First request')
    if (started.status !== 'started') throw new Error('not started')
    let wrong: any
    const events = await drain(session, async (event) => {
      if (event.type === 'content' && event.delta && !wrong) {
        wrong = await session.send('Steer the wrong one', { priority: 'next', expectedRequestId: 'req-stale' as any }).catch((caught) => caught)
      }
    })
    expect(wrong).toBeInstanceOf(Error)
    expect(String(wrong.message)).toMatch(/req-stale/)
    expect(String(wrong.message)).toMatch(/request/i)
    expect(ofType(events, 'input_applied')).toEqual([])
    expect(session.getPendingInputs()).toEqual([])
    expect(server.requests).toHaveLength(1)

    // The request it named has finished: steering it now is stale too, and starts nothing.
    const late = await session.send('Too late', { expectedRequestId: started.requestId }).catch((caught) => caught)
    expect(late).toBeInstanceOf(Error)
    expect(String(late.message)).toContain(started.requestId)
    expect(session.getPendingInputs()).toEqual([])
    await sleep(30)
    expect(server.requests).toHaveLength(1)
    expect(JSON.stringify(server.requests.map((request) => request.body))).not.toMatch(/Steer the wrong one|Too late/)

    // The session is still usable.
    expect(await answerOf(session, 'Next')).toBe('Second request.')
    await session.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('abort() and close()', () => {
  it('abort() ends the active request at once, the slow answer never arrives, and the next send works', async () => {
    const first: { tailSent?: boolean } = {}
    server.reply(slowAnswer('Thinking ', 'slow tail', 1500, first), chat('Second answer.'))
    const session = await createSession(options())
    await session.send('Run a long analysis')
    let abortedAt = 0
    const events = await drain(session, async (event) => {
      if (event.type === 'content' && event.delta && !abortedAt) {
        abortedAt = Date.now()
        await session.abort()
      }
    })
    expect(Date.now() - abortedAt).toBeLessThan(1000)
    expect(first.tailSent).not.toBe(true)
    expect(textOf(events)).not.toContain('slow tail')
    // Blade 4.2 still ends the stream with a `result` event after abort(); newest is unknown: not pinned.
    expect(session.isClosed).toBe(false)

    const again = await session.send('Again')
    expect(again.status).toBe('started')
    const next = await drain(session)
    expect(next.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: 'Second answer.' })
    await session.close()
  })

  it('close() is idempotent, runs SessionEnd once, and send() afterwards rejects /closed/i', async () => {
    const ends: HookInput[] = []
    const session = await createSession(options({ hooks: { SessionEnd: [async (input) => (ends.push(input), { action: 'continue' })] } }))
    await session.close()
    await session.close()
    expect(ends).toHaveLength(1)
    expect(ends[0]).toMatchObject({ event: 'SessionEnd', sessionId: session.sessionId })
    expect(session.isClosed).toBe(true)
    await expect(session.send('hello?')).rejects.toThrow(/closed/i)
    expect(server.requests).toHaveLength(0)
  })

  it('close() during an active request ends it, and the stream finishes', async () => {
    const first: { tailSent?: boolean } = {}
    server.reply(slowAnswer('Busy ', 'slow tail', 1500, first))
    let ends = 0
    const session = await createSession(options({ hooks: { SessionEnd: [async () => (ends++, { action: 'continue' })] } }))
    await session.send('Run a long analysis')
    let closedAt = 0
    const events = await drain(session, async (event) => {
      if (event.type === 'content' && event.delta && !closedAt) {
        closedAt = Date.now()
        await session.close()
      }
    }).catch((error) => [{ type: 'thrown', error } as any])
    expect(Date.now() - closedAt).toBeLessThan(1000)
    expect(first.tailSent).not.toBe(true)
    expect(JSON.stringify(events)).not.toContain('slow tail')
    expect(ends).toBe(1)
    expect(session.isClosed).toBe(true)
  })
})

// ---------------------------------------------------------------------------------------------

describe('fork()', () => {
  it('gives a new sessionId with the same messages, independent afterwards', async () => {
    server.reply(chat('Hi Ada.'), chat('You are Ada.'), chat('Something else, then.'))
    const session = await createSession(options())
    await answerOf(session, 'My name is Ada.')
    const branch = await session.fork()
    expect(typeof branch.sessionId).toBe('string')
    expect(branch.sessionId).not.toBe(session.sessionId)
    expect(conversation(branch.messages)).toEqual(conversation(session.messages))
    expect(conversation(branch.messages)).toEqual([
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Hi Ada.' },
    ])

    await branch.send('What is my name?')
    const branchEvents = await drain(branch)
    for (const event of branchEvents) expect(event.sessionId).toBe(branch.sessionId)
    expect(sent(1).filter((message) => message.role !== 'system')).toEqual([
      { role: 'user', content: 'My name is Ada.' },
      { role: 'assistant', content: 'Hi Ada.' },
      { role: 'user', content: 'What is my name?' },
    ])
    expect(conversation(branch.messages)).toHaveLength(4)
    expect(conversation(session.messages)).toHaveLength(2)

    await answerOf(session, 'Talk about tea.')
    expect(JSON.stringify(server.requests[2].body.messages)).not.toContain('What is my name?')
    expect(conversation(branch.messages)).toHaveLength(4)
    await branch.close()
    expect(session.isClosed).toBe(false)
    await session.close()
  })
})

// ---------------------------------------------------------------------------------------------
// docs/en/session.md "Persistence", "Resume", "Fork"

/** A child process that opens a session on `store` (resuming `sessionId` when given), says `say`,
 * prints what it saw (OPENED, ANSWER, ERROR, FAILED) and closes. */
const PERSIST_CHILD = String.raw`
const { createSession, resumeSession } = require(process.env.ENTRY)
const env = process.env
const print = (tag, value) => process.stdout.write(tag + ' ' + JSON.stringify(value) + '\n')
const options = () => ({
  provider: { type: 'openai-compatible', apiKey: env.API_KEY, baseUrl: env.BASE_URL },
  model: env.MODEL,
  allowedTools: [],
  storagePath: env.STORE,
})
;(async () => {
  const session = env.SESSION ? await resumeSession({ ...options(), sessionId: env.SESSION }) : await createSession(options())
  print('OPENED', { sessionId: session.sessionId, messages: session.messages.map((m) => ({ role: m.role, content: m.content })) })
  await session.send(env.SAY)
  let text = ''
  for await (const event of session.stream()) {
    if (event.type === 'content') text += event.delta
    if (event.type === 'error') print('ERROR', event.message)
  }
  print('ANSWER', text)
  await session.close()
})().catch((error) => { print('FAILED', String((error && error.message) || error)); process.exitCode = 1 })
`

function persistChild(store: string, say: string, sessionId?: string) {
  return runScript(PERSIST_CHILD, {
    timeoutMs: 10000,
    env: { STORE: store, SAY: say, API_KEY, MODEL, BASE_URL: server.url + '/v1', ...(sessionId ? { SESSION: sessionId } : {}) },
  })
}

async function storeOneTurn(store: string): Promise<string> {
  server.reply(chat('Noted: 42.'))
  const child = await persistChild(store, 'Remember the number 42.')
  const out = tagged(child.stdout)
  expect(child.stderr).toBe('')
  expect(out.FAILED).toBeUndefined()
  expect(out.ANSWER).toBe('Noted: 42.')
  expect(typeof out.OPENED.sessionId).toBe('string')
  return out.OPENED.sessionId
}

describe('storagePath persistence: resumeSession / forkSession', () => {
  it('resumeSession() in a second process keeps the sessionId and the first turn, and the model is sent it', async () => {
    const store = tempDir('arh-blade-store-')
    const sessionId = await storeOneTurn(store)
    // Blade writes JSONL under {storagePath}/sessions/; the layout is not pinned, only that it is there.
    expect(readdirSync(store).length).toBeGreaterThan(0)

    server.requests.length = 0
    server.reply(chat('It was 42.'))
    const child = await persistChild(store, 'Which number?', sessionId)
    const out = tagged(child.stdout)
    expect(out.FAILED).toBeUndefined()
    expect(out.OPENED.sessionId).toBe(sessionId)
    expect(conversation(out.OPENED.messages)).toEqual([
      { role: 'user', content: 'Remember the number 42.' },
      { role: 'assistant', content: 'Noted: 42.' },
    ])
    expect(out.ANSWER).toBe('It was 42.')
    expect(server.requests).toHaveLength(1)
    expect(sent(0).filter((message) => message.role !== 'system')).toEqual([
      { role: 'user', content: 'Remember the number 42.' },
      { role: 'assistant', content: 'Noted: 42.' },
      { role: 'user', content: 'Which number?' },
    ])
  })

  // Blade 4.2 resumes an unknown id as an empty session; the contract here (SPEC §8.2) is an error.
  it('resumeSession() of an unknown id rejects with an error naming the id', async () => {
    const store = tempDir('arh-blade-store-')
    const error = await resumeSession({ ...options(), storagePath: store, sessionId: 'no-such-session-7' }).catch((caught) => caught)
    expect(error).toBeInstanceOf(Error)
    expect(String(error.message)).toContain('no-such-session-7')
    expect(server.requests).toHaveLength(0)
  })

  it('forkSession() of a stored session: a new sessionId with a copy of the history; the stored one is unchanged', async () => {
    const store = tempDir('arh-blade-store-')
    const sessionId = await storeOneTurn(store)
    server.requests.length = 0
    server.reply(chat('Still 42.'))
    const branch = await forkSession({ ...options(), storagePath: store, sessionId })
    expect(branch.sessionId).not.toBe(sessionId)
    expect(conversation(branch.messages)).toEqual([
      { role: 'user', content: 'Remember the number 42.' },
      { role: 'assistant', content: 'Noted: 42.' },
    ])
    expect(await answerOf(branch, 'And now?')).toBe('Still 42.')
    expect(sent(0).filter((message) => message.role !== 'system').map((message) => message.content)).toEqual([
      'Remember the number 42.',
      'Noted: 42.',
      'And now?',
    ])
    await branch.close()

    const original = await resumeSession({ ...options(), storagePath: store, sessionId })
    expect(original.sessionId).toBe(sessionId)
    expect(conversation(original.messages)).toHaveLength(2)
    await original.close()
  })
})

// ---------------------------------------------------------------------------------------------
// README "Package Entry Points"; research note §A.5

describe('subpath exports', () => {
  it('root, /core, /tools, /session, /server, /local and /node, through import and require alike', async () => {
    const dir = consumerProject()
    const expected: Record<string, string[]> = {
      'agent-runtime-hooks': ['createSession', 'resumeSession', 'forkSession', 'prompt', 'InputPriority'],
      'agent-runtime-hooks/core': ['InputPriority', 'ToolKind', 'PermissionMode'],
      'agent-runtime-hooks/tools': ['defineTool'],
      'agent-runtime-hooks/session': ['createSession', 'resumeSession', 'forkSession', 'prompt'],
      'agent-runtime-hooks/server': ['createSession'],
      'agent-runtime-hooks/local': ['createSession', 'getBuiltinTools'],
      'agent-runtime-hooks/node': ['createSession', 'resumeSession', 'forkSession', 'prompt', 'ProviderRegistry'],
    }
    writeFileSync(
      join(dir, 'exports.mjs'),
      `import { createRequire } from 'node:module'
const require = createRequire(import.meta.url)
const expected = ${JSON.stringify(expected)}
const out = {}
for (const [id, names] of Object.entries(expected)) {
  let esm, cjs
  try { esm = await import(id) } catch (error) { out[id] = { importError: String(error.message).split('\\n')[0] }; continue }
  try { cjs = require(id) } catch (error) { out[id] = { requireError: String(error.message).split('\\n')[0] }; continue }
  out[id] = {}
  for (const name of names) {
    const value = esm[name]
    out[id][name] = { esm: typeof value, cjs: typeof cjs[name], same: value === cjs[name], value: typeof value === 'object' ? value : null }
  }
}
console.log(JSON.stringify(out))
`,
    )
    const child = await runNode(['exports.mjs'], { cwd: dir })
    expect(child.stderr).toBe('')
    const out = JSON.parse(child.stdout)
    const fn = { esm: 'function', cjs: 'function', same: true, value: null }
    const obj = (value: unknown) => ({ esm: 'object', cjs: 'object', same: true, value })
    const INPUT_PRIORITY = { NOW: 'now', NEXT: 'next', LATER: 'later' }
    expect(out).toEqual({
      'agent-runtime-hooks': { createSession: fn, resumeSession: fn, forkSession: fn, prompt: fn, InputPriority: obj(INPUT_PRIORITY) },
      'agent-runtime-hooks/core': {
        InputPriority: obj(INPUT_PRIORITY),
        ToolKind: obj({ ReadOnly: 'readonly', Write: 'write', Execute: 'execute' }),
        PermissionMode: obj({ DEFAULT: 'default', AUTO_EDIT: 'autoEdit', YOLO: 'yolo', PLAN: 'plan' }),
      },
      'agent-runtime-hooks/tools': { defineTool: fn },
      'agent-runtime-hooks/session': { createSession: fn, resumeSession: fn, forkSession: fn, prompt: fn },
      'agent-runtime-hooks/server': { createSession: fn },
      'agent-runtime-hooks/local': { createSession: fn, getBuiltinTools: fn },
      'agent-runtime-hooks/node': { createSession: fn, resumeSession: fn, forkSession: fn, prompt: fn, ProviderRegistry: fn },
    })
  })

  it("a CommonJS program can require('agent-runtime-hooks/node') and run a session on a ProviderRegistry model", async () => {
    const dir = consumerProject()
    writeFileSync(
      join(dir, 'echo.cjs'),
      `const { createSession, ProviderRegistry } = require('agent-runtime-hooks/node')
const registry = new ProviderRegistry([{
  type: 'echo',
  create(config) {
    return {
      async chat() { return { content: 'ready' } },
      async sideQuery() { return { content: 'ready' } },
      async *streamChat(messages) {
        yield { content: 'echo: ' + messages.at(-1).content }
        yield { finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } }
      },
      getConfig() { return config },
      updateConfig() {},
    }
  },
}])
;(async () => {
  const session = await createSession({ provider: { type: 'echo' }, providerRegistry: registry, model: 'demo', allowedTools: [] })
  await session.send('from require')
  for await (const event of session.stream()) if (event.type === 'content') process.stdout.write(event.delta)
  await session.close()
})()
`,
    )
    const child = await runNode(['echo.cjs'], { cwd: dir })
    expect(child.stderr).toBe('')
    expect(child.code).toBe(0)
    expect(child.stdout).toBe('echo: from require')
  })
})

// ---------------------------------------------------------------------------------------------
// research note §A.6; examples/local-cli-agent

describe('ProviderRegistry', () => {
  it('a custom provider type: the session streams from its streamChat(messages), with no HTTP at all', async () => {
    // Through a variable: vite resolves a literal specifier while transforming the file, so a
    // missing "./node" export would fail every test here instead of this one.
    const nodeEntry = 'agent-runtime-hooks/node'
    const { createSession: createLocalSession, ProviderRegistry } = (await import(/* @vite-ignore */ nodeEntry)) as typeof import('agent-runtime-hooks/node')
    const created: unknown[] = []
    const seen: any[][] = []
    const registry = new ProviderRegistry([
      {
        type: 'echo-model',
        create(config: unknown) {
          created.push(config)
          return {
            async chat() {
              return { content: 'ready' }
            },
            async sideQuery() {
              return { content: 'ready' }
            },
            async *streamChat(messages: any[]) {
              seen.push(JSON.parse(JSON.stringify(messages)))
              const last = messages.at(-1)
              yield { content: `echo: ${typeof last?.content === 'string' ? last.content : '?'}` }
              yield { finishReason: 'stop', usage: { promptTokens: 1, completionTokens: 4, totalTokens: 5 } }
            },
            getConfig() {
              return config
            },
            updateConfig() {},
          }
        },
      },
    ])
    const session = await createLocalSession({ provider: { type: 'echo-model' }, providerRegistry: registry, model: 'demo', systemPrompt: 'Echo.', allowedTools: [] })
    await session.send('ping')
    const events = await drain(session as ISession)
    expect(shape(events)).toEqual(['turn_start', 'content…', 'turn_end', 'usage', 'result'])
    expect(textOf(events)).toBe('echo: ping')
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: 'echo: ping' })
    expect(ofType(events, 'usage')[0].usage).toMatchObject({ inputTokens: 1, outputTokens: 4, totalTokens: 5 })
    expect(created.length).toBeGreaterThan(0)
    expect(seen).toHaveLength(1)
    expect(seen[0].at(-1)).toMatchObject({ role: 'user', content: 'ping' })
    expect(server.requests).toHaveLength(0)
    await session.close()
  })

  it('examples/local-cli-agent --smoke prints `Local Agent received: minimal local starter smoke`', async () => {
    const cwd = tempDir('arh-blade-local-')
    const child = await runNode([join(ROOT, '__test__', 'blade', 'local-cli-agent', 'index.mjs'), '--smoke'], { cwd, env: { OPENAI_API_KEY: undefined, BLADE_DEMO_MODE: undefined } })
    expect(child.stderr).toBe('')
    expect(child.code).toBe(0)
    expect(child.stdout).toBe('Local Agent received: minimal local starter smoke\n')
    // Its JSONL store (`storagePath: .data/local-cli-agent`) got the session.
    expect(readdirSync(join(cwd, '.data', 'local-cli-agent')).length).toBeGreaterThan(0)
  })

  it('examples/local-cli-agent with BLADE_DEMO_MODE=mock answers the prompt given after --', async () => {
    const cwd = tempDir('arh-blade-local-')
    const child = await runNode([join(ROOT, '__test__', 'blade', 'local-cli-agent', 'index.mjs'), '--', 'Hello'], { cwd, env: { OPENAI_API_KEY: undefined, BLADE_DEMO_MODE: 'mock' } })
    expect(child.stderr).toBe('')
    expect(child.stdout).toBe('Local Agent received: Hello\n')
  })
})

// ---------------------------------------------------------------------------------------------
// Blade's README programs, run as a user runs them (types erased, from a project that depends on
// the package).

describe("Blade's README programs (__test__/blade/readme-*.ts)", () => {
  let dir = ''
  beforeAll(() => {
    dir = consumerProject()
    writeFileSync(join(dir, 'readme-session.mjs'), transpiled('readme-session.ts'))
    writeFileSync(join(dir, 'readme-prompt.mjs'), transpiled('readme-prompt.ts'))
  })

  it('Quick Start: prints the streamed answer and exits on its own', async () => {
    server.reply(chat('It runs agents with hooks.'))
    const child = await runNode(['readme-session.mjs'], { cwd: dir, env: { OPENAI_API_KEY: 'sk-readme', OPENAI_BASE_URL: server.url + '/v1' } })
    expect(child.timedOut).toBe(false)
    expect(child.stderr).toBe('')
    expect(child.code).toBe(0)
    expect(child.stdout).toBe('It runs agents with hooks.')
    expect(server.requests).toHaveLength(1)
    const [request] = server.requests
    // SPEC §10: a provider of type 'openai' speaks Chat Completions here (Blade 4.2 uses /responses).
    expect(request.url).toBe('/v1/chat/completions')
    expect(request.headers.authorization).toBe('Bearer sk-readme')
    expect(request.body).toMatchObject({ model: 'gpt-4o-mini', temperature: 0.2 })
    // type 'openai' is sent OpenAI's current field for the output limit (its reasoning models
    // refuse max_tokens); Blade 4.2 sent max_tokens. Either carries maxOutputTokens.
    expect(request.body.max_completion_tokens ?? request.body.max_tokens).toBe(4096)
    expect(sent(0).at(-1)).toEqual({ role: 'user', content: 'Summarize the responsibilities of this project' })
  })

  it('prompt(): prints result, toolCalls and usage', async () => {
    server.reply(chat('A session-first API.'))
    const child = await runNode(['readme-prompt.mjs'], { cwd: dir, env: { OPENAI_API_KEY: 'sk-readme', OPENAI_BASE_URL: server.url + '/v1' } })
    expect(child.stderr).toBe('')
    expect(child.code).toBe(0)
    expect(child.stdout.startsWith('A session-first API.\n[]\n')).toBe(true)
    expect(child.stdout).toMatch(/inputTokens: 11/)
    expect(child.stdout).toMatch(/outputTokens: 7/)
    expect(child.stdout).toMatch(/totalTokens: 18/)
    expect(sent(0).at(-1)).toEqual({ role: 'user', content: 'Explain this API surface' })
    expect(server.requests[0].body.model).toBe('gpt-4o-mini')
  })
})

// ---------------------------------------------------------------------------------------------

describe('a third-party style session program (__test__/blade/session-program.ts)', () => {
  const target = () => ({ baseUrl: server.url + '/v1', apiKey: 'sk-desk', model: 'desk-model' })

  it('tools, hooks, canUseTool and allowedTools together, read through every stream event', async () => {
    server.reply(
      chat('', [
        { id: 'call_price', name: 'lookup_price', arguments: '{"tea":"sencha"}' },
        { id: 'call_order', name: 'place_order', arguments: '{"tea":"sencha","tins":2}' },
        { id: 'call_refund', name: 'refund', arguments: '{"order":"A-1"}' },
      ]),
      chat('Sencha is 12 EUR; I could not order or refund.'),
    )
    const { ORDER_REFUSAL, REFUND_REFUSAL, SYSTEM_PROMPT, runOrderDesk } = await sessionProgram()
    const run = await runOrderDesk(target(), 'Price of sencha? Order two tins and refund A-1.')
    expect(run.submission).toEqual({ status: 'started', inputId: expect.any(String), requestId: expect.any(String) })
    expect(run.text).toBe('Sencha is 12 EUR; I could not order or refund.')
    expect(run.events.at(-1)).toMatchObject({ type: 'result', subtype: 'success' })
    for (const event of run.events) expect(event.sessionId).toBe(run.sessionId)
    expect(run.lines).toContain('tool lookup_price (call_price) called with {"tea":"sencha"}')
    expect(run.lines).toContain('tool lookup_price completed: sencha: 12 EUR')
    expect(run.usage).toMatchObject({ inputTokens: 22, outputTokens: 14, totalTokens: 36 })

    // Only the readonly tool ran: the write was denied by canUseTool, the refund aborted by PreToolUse.
    expect(run.executed).toEqual(['lookup_price'])
    expect(run.permissionCalls).toContainEqual({ toolName: 'place_order', input: { tea: 'sencha', tins: 2 }, toolKind: 'write' })
    expect(run.permissionCalls.map((call) => call.toolName)).not.toContain('refund')
    const toolMessages = Object.fromEntries((server.requests[1].body.messages as any[]).filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content]))
    expect(toolMessages).toEqual({
      call_price: 'sencha: 12 EUR',
      call_order: `Tool execution aborted: ${ORDER_REFUSAL}`,
      call_refund: `Tool execution aborted: ${REFUND_REFUSAL}`,
    })
    expect(run.toolCalls.map((call) => [call.id, call.name, call.output])).toEqual([
      ['call_price', 'lookup_price', 'sencha: 12 EUR'],
      ['call_order', 'place_order', `Tool execution aborted: ${ORDER_REFUSAL}`],
      ['call_refund', 'refund', `Tool execution aborted: ${REFUND_REFUSAL}`],
    ])

    // What the model was offered and told.
    const [first] = server.requests
    expect(first.headers.authorization).toBe('Bearer sk-desk')
    expect(first.body.model).toBe('desk-model')
    expect(toolNames(0)).toEqual(['lookup_price', 'place_order', 'refund'])
    expect(sent(0)[0].role).toBe('system')
    expect(sent(0)[0].content).toContain(SYSTEM_PROMPT)

    // Hooks: SessionStart first, SessionEnd once and last; PostToolUse only for the tool that ran.
    expect(run.hookCalls[0]).toBe('SessionStart')
    expect(run.hookCalls.filter((call) => call === 'SessionEnd')).toEqual(['SessionEnd'])
    expect(run.hookCalls.at(-1)).toBe('SessionEnd')
    expect(run.hookCalls.filter((call) => call.startsWith('PostToolUse'))).toEqual(['PostToolUse:lookup_price'])
    expect(run.hookCalls).toEqual(expect.arrayContaining(['PreToolUse:lookup_price', 'PreToolUse:place_order', 'PreToolUse:refund']))
    expect(run.messagesAfter).toBeGreaterThanOrEqual(4)
    expect(run.closed).toBe(true)
  })

  it('its one-shot form through prompt(): the PromptResult the program types', async () => {
    server.reply(chat('', [{ id: 'call_price', name: 'lookup_price', arguments: '{"tea":"oolong"}' }]), chat('Oolong is 18 EUR.'))
    const { quote } = await sessionProgram()
    const result = await quote(target(), 'Price of oolong?')
    expect(result.result).toBe('Oolong is 18 EUR.')
    expect(result.turnsCount).toBe(2)
    expect(result.toolCalls).toEqual([
      expect.objectContaining({ id: 'call_price', name: 'lookup_price', input: { tea: 'oolong' }, output: 'oolong: 18 EUR', duration: expect.any(Number) }),
    ])
    expect(result.executed).toEqual(['lookup_price'])
  })
})

// ---------------------------------------------------------------------------------------------
// Everything built holds through this door: the same session underneath (SPEC §3, §5, §8).

describe('what createAgent guarantees holds on the session path', () => {
  it('hookTimeoutMs is a real deadline: a PreToolUse callback past it fails the call closed, and the tool never runs', async () => {
    const ran: string[] = []
    server.reply(chat('', [{ id: 'call_1', name: 'lookup', arguments: '{"q":"tea"}' }]), chat('done'))
    const session = await createSession(
      options({
        tools: [lookup(ran)],
        allowedTools: ['lookup'],
        hookTimeoutMs: 50,
        hooks: { PreToolUse: [async () => (await sleep(200), { action: 'continue' as const })] },
      }),
    )
    await session.send('price?')
    const events = await drain(session)
    const [result] = ofType(events, 'tool_result')
    expect(result.isError).toBe(true)
    expect(result.output).toBe('Tool execution failed: Hook PreToolUse exceeded 50ms')
    expect(ran).toEqual([])
    // The late callback settles before close (which refuses while one is still cleaning up).
    await sleep(250)
    await session.close()
  })

  it("a permissionMode 'default' ask with no handler pauses the call for a person; approve + resume goes on", async () => {
    const ran: string[] = []
    server.reply(chat('', [{ id: 'call_1', name: 'write_note', arguments: '{"text":"hi"}' }]), chat('noted'))
    const session = await createSession(options({ tools: [writeNote(ran)], allowedTools: ['write_note'], permissionMode: 'default' }))
    await session.send('note it')
    const first = await drain(session)
    expect(ofType(first, 'result')[0].result.stopReason).toBe('interrupted')
    expect(session.pendingApprovals.map((call) => call.toolName)).toEqual(['write_note'])
    expect(ran).toEqual([])
    await session.approve('call_1')
    const resumed = await session.resume()
    expect(resumed.status).toBe('started')
    const second = await drain(session)
    expect(ran).toEqual(['write_note:hi'])
    expect(textOf(second)).toBe('noted')
    await session.close()
  })

  it("permissionMode 'plan' beside canUseTool: the write is denied with Blade's text before canUseTool is asked", async () => {
    const asked: string[] = []
    const ran: string[] = []
    server.reply(chat('', [{ id: 'call_1', name: 'write_note', arguments: '{"text":"hi"}' }]), chat('ok'))
    const session = await createSession(
      options({
        tools: [writeNote(ran)],
        allowedTools: ['write_note'],
        permissionMode: 'plan',
        canUseTool: async (name) => (asked.push(name), { behavior: 'allow' as const }),
      }),
    )
    await session.send('note it')
    const events = await drain(session)
    expect(ofType(events, 'tool_result')[0].output).toBe(
      'Tool execution aborted: Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)',
    )
    expect(asked).toEqual([])
    expect(ran).toEqual([])
    await session.close()
  })

  it('agents: the model is offered Task, and the sub-agent runs under the session hooks', async () => {
    const seen: string[] = []
    server.reply(
      chat('', [{ id: 'call_1', name: 'Task', arguments: JSON.stringify({ subagent_type: 'researcher', description: 'look', prompt: 'find tea' }) }]),
      chat('', [{ id: 'call_2', name: 'lookup', arguments: '{"q":"tea"}' }]),
      chat('tea is 3'),
      chat('The researcher says tea is 3.'),
    )
    const session = await createSession(
      options({
        tools: [lookup()],
        allowedTools: ['lookup'],
        agents: { researcher: { name: 'researcher', description: 'Looks things up', allowedTools: ['lookup'] } },
        hooks: { PreToolUse: [async (input) => (seen.push(String(input.toolName)), { action: 'continue' as const })] },
      }),
    )
    await session.send('ask the researcher')
    const events = await drain(session)
    expect(toolNames(0)).toContain('Task')
    expect(seen).toEqual(['Task', 'lookup'])
    expect(textOf(events)).toBe('The researcher says tea is 3.')
    await session.close()
  })
})
