// Blade compatibility: a program written for @blade-ai/agent-sdk from its docs must run on
// agent-runtime-hooks after changing only its import line (SPEC §10), with Blade's exports,
// stream events, texts, Agent methods and options (SPEC §2, §6, §10).
//
// Written from SPEC.md and research/blade-sdk*.md, not from the implementation. Where SPEC is
// silent or ambiguous the test follows Blade and says so in a comment ("Blade:").
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  AgentResponse,
  completeToolExecution,
  ConfigError,
  createAgent,
  defineTool,
  HookEvent,
  HookTimeoutError,
  HookTimeoutErrorCode,
  PermissionDecision,
  PermissionMode,
  prompt,
  scriptedModel,
  SdkError,
  ToolKind,
  ToolSideEffect,
  type Agent,
  type AgentOptions,
  type HookCallback,
  type HookInput,
  type JsonObject,
  type ScriptedTurn,
  type ScriptRequest,
  type StreamEvent,
  type ToolContext,
  type ToolDefinition,
} from '../index.js'
import { FILES, describeResult, main, type DocsAgentRun } from './blade/docs-agent.js'
import { runScript } from './helpers/child.js'
import { onceSettled, openaiChunks, rawStream, sleep, sse, until, untilAborted, useServer } from './helpers/server.js'

const server = useServer()

// ---------------------------------------------------------------------------------------------
// helpers

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = []
  for await (const item of iterable) items.push(item)
  return items
}

/** Event types, with each run of consecutive `content` events shown as one `content…`
 * (how a model's text is cut into deltas is not part of the contract). */
function shape(events: StreamEvent[]): string[] {
  const out: string[] = []
  for (const event of events) {
    const type = event.type === 'content' ? 'content…' : event.type
    if (type === 'content…' && out[out.length - 1] === 'content…') continue
    out.push(type)
  }
  return out
}

const ofType = <T extends StreamEvent['type']>(events: StreamEvent[], type: T) =>
  events.filter((event): event is Extract<StreamEvent, { type: T }> => event.type === type)

const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value))

/** A scripted model that records what it was asked (a deep copy of each request). */
function recordingModel(turns: ScriptedTurn[] | ((request: ScriptRequest) => ScriptedTurn | Promise<ScriptedTurn>)) {
  const requests: ScriptRequest[] = []
  let next = 0
  const model = scriptedModel(async (request) => {
    requests.push(clone(request))
    if (typeof turns === 'function') return turns(request)
    const turn = turns[next++]
    if (!turn) throw new Error('script exhausted')
    return turn
  })
  return { model, requests }
}

/** The tool messages the model was sent, by tool call id. */
function toolMessages(request: ScriptRequest): Record<string, string> {
  const out: Record<string, string> = {}
  for (const message of request.messages) if (message.role === 'tool') out[message.tool_call_id] = message.content
  return out
}

const continueHook =
  (log: string[], label?: (input: HookInput) => string): HookCallback =>
  async (input) => {
    log.push(label ? label(input) : input.toolName ? `${input.event}:${input.toolName}` : input.event)
    return { action: 'continue' }
  }

const PLAN_DENIAL =
  'Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)'
const BUSY = 'The previous Agent response is still active. Consume it before sending another message.'
const TOOL_CLEANUP = 'Tool execution failed: A tool execution is still cleaning up; refusing to start another tool'
const TIMEOUT_RANGE = 'toolTimeoutMs must be a positive integer no greater than 2147483647'

// ---------------------------------------------------------------------------------------------

describe('root exports: Blade names with exact values (SPEC §10)', () => {
  it('ToolKind, ToolSideEffect, PermissionMode, PermissionDecision, HookTimeoutErrorCode have Blade values', () => {
    expect(ToolKind).toEqual({ ReadOnly: 'readonly', Write: 'write', Execute: 'execute' })
    expect(ToolSideEffect).toEqual({ PURE: 'pure', IDEMPOTENT: 'idempotent', NON_IDEMPOTENT: 'non_idempotent' })
    expect(PermissionMode).toEqual({ DEFAULT: 'default', AUTO_EDIT: 'autoEdit', YOLO: 'yolo', PLAN: 'plan' })
    expect(PermissionDecision).toEqual({ ALLOW: 'allow', DENY: 'deny', ASK: 'ask' })
    expect(HookTimeoutErrorCode).toBe('HOOK_TIMEOUT')
    expect(new HookTimeoutError('PreToolUse', 5).code).toBe(HookTimeoutErrorCode)
    expect(typeof AgentResponse).toBe('function')
    expect(typeof completeToolExecution).toBe('function')
  })

  it('HookEvent still lists exactly the eight session events in Blade order (regression)', () => {
    expect(Object.values(HookEvent)).toEqual([
      'PreToolUse',
      'PostToolUse',
      'PostToolUseFailure',
      'PermissionRequest',
      'UserPromptSubmit',
      'SessionStart',
      'SessionEnd',
      'TaskCompleted',
    ])
  })

  it('require() (index.js) and import (index.mjs) in a plain Node process give the same objects with the same values', async () => {
    const names = [
      'createAgent',
      'prompt',
      'defineTool',
      'completeToolExecution',
      'AgentResponse',
      'HookEvent',
      'ToolKind',
      'ToolSideEffect',
      'PermissionMode',
      'PermissionDecision',
      'SdkError',
      'ConfigError',
      'AbortError',
      'HookTimeoutError',
      'HookTimeoutErrorCode',
    ]
    const source = `
      const { pathToFileURL } = require('node:url')
      const cjs = require(process.env.ENTRY)
      import(pathToFileURL(process.env.ENTRY.replace(/index\\.js$/, 'index.mjs')).href).then((esm) => {
        const out = {}
        for (const name of ${JSON.stringify(names)}) {
          const value = cjs[name]
          out[name] = { cjs: typeof value, esm: typeof esm[name], same: value === esm[name], value: typeof value === 'function' ? null : value }
        }
        console.log(JSON.stringify(out))
      }, (error) => { console.log(JSON.stringify({ error: String(error) })) })
    `
    const child = await runScript(source, { timeoutMs: 15000 })
    expect(child.stderr).toBe('')
    const out = JSON.parse(child.stdout)
    const fn = { cjs: 'function', esm: 'function', same: true, value: null }
    const obj = (value: unknown) => ({ cjs: 'object', esm: 'object', same: true, value })
    expect(out).toEqual({
      createAgent: fn,
      prompt: fn,
      defineTool: fn,
      completeToolExecution: fn,
      AgentResponse: fn,
      HookEvent: obj(Object.fromEntries(Object.values(HookEvent).map((name) => [name, name]))),
      ToolKind: obj({ ReadOnly: 'readonly', Write: 'write', Execute: 'execute' }),
      ToolSideEffect: obj({ PURE: 'pure', IDEMPOTENT: 'idempotent', NON_IDEMPOTENT: 'non_idempotent' }),
      PermissionMode: obj({ DEFAULT: 'default', AUTO_EDIT: 'autoEdit', YOLO: 'yolo', PLAN: 'plan' }),
      PermissionDecision: obj({ ALLOW: 'allow', DENY: 'deny', ASK: 'ask' }),
      SdkError: fn,
      ConfigError: fn,
      AbortError: fn,
      HookTimeoutError: fn,
      HookTimeoutErrorCode: { cjs: 'string', esm: 'string', same: true, value: 'HOOK_TIMEOUT' },
    })
  })

  it('completeToolExecution(result) is an async generator that yields nothing and returns the result', async () => {
    const result = { status: 'success' as const, model: 'm', display: { summary: 's' } }
    const execution = completeToolExecution(result)
    expect(Object.prototype.toString.call(execution)).toBe('[object AsyncGenerator]')
    expect(await execution.next()).toEqual({ done: true, value: result })
  })
})

// ---------------------------------------------------------------------------------------------

describe('a docs-style Blade program runs unchanged (__test__/blade/docs-agent.ts)', () => {
  const FINAL = 'Saved a one-line summary.'
  const SAVE_ARGS = { path: 'notes/summary.txt', text: 'Buy milk; call Ada at 5.' }
  const QUESTION = 'Summarise notes.txt and save the summary.'

  /** What the program must have seen, whichever way the model is reached. */
  function checkRun(run: DocsAgentRun) {
    const { events } = run
    // SPEC §2 order: per turn turn_start, deltas, tool_use, tool_progress, tool_result (call order), turn_end.
    expect(shape(events)).toEqual([
      'turn_start',
      'tool_use',
      'tool_use',
      'tool_progress',
      'tool_progress',
      'tool_result',
      'tool_result',
      'turn_end',
      'turn_start',
      'tool_use',
      'tool_result',
      'turn_end',
      'turn_start',
      'content…',
      'turn_end',
      'usage',
      'result',
    ])
    for (const event of events) expect(event.sessionId).toBe(run.sessionId)
    expect(ofType(events, 'turn_start').map((event) => event.turn)).toEqual([1, 2, 3])
    expect(ofType(events, 'turn_end').map((event) => event.turn)).toEqual([1, 2, 3])
    // tool_use carries the model's arguments, before any hook (save_note's PreToolUse adds `author`).
    expect(ofType(events, 'tool_use')).toEqual([
      { type: 'tool_use', id: 'call_read', name: 'read_file', input: { path: 'notes.txt' }, sessionId: run.sessionId },
      { type: 'tool_use', id: 'call_time', name: 'current_time', input: {}, sessionId: run.sessionId },
      { type: 'tool_use', id: 'call_save', name: 'save_note', input: SAVE_ARGS, sessionId: run.sessionId },
    ])
    expect(ofType(events, 'tool_progress')).toEqual([
      { type: 'tool_progress', id: 'call_read', name: 'read_file', progress: { kind: 'progress', message: 'Opening notes.txt', completed: 0, total: 1 }, sessionId: run.sessionId },
      {
        type: 'tool_progress',
        id: 'call_read',
        name: 'read_file',
        progress: { kind: 'progress', message: 'Read complete', completed: 1, total: 1 },
        sessionId: run.sessionId,
      },
    ])
    const results = ofType(events, 'tool_result')
    expect(results.map((event) => event.id)).toEqual(['call_read', 'call_time', 'call_save'])
    expect(results[0]).toMatchObject({
      name: 'read_file',
      output: FILES['notes.txt'],
      isError: false,
      status: 'success',
      display: { summary: `Read ${FILES['notes.txt'].length} characters from notes.txt` },
    })
    expect(results[1]).toMatchObject({ name: 'current_time', output: '2026-01-01T12:00:00.000Z (UTC)', isError: false, status: 'success' })
    expect(results[2]).toMatchObject({ name: 'save_note', output: 'Saved notes/summary.txt', isError: false, display: { summary: '📝 notes/summary.txt' } })
    expect(ofType(events, 'result')).toEqual([expect.objectContaining({ type: 'result', subtype: 'success', content: FINAL })])

    // The four ways of reading the replayable response agree (Blade's live test checks the same).
    expect(run.text).toBe(FINAL)
    expect(run.resultContent).toBe(FINAL)
    expect(run.onContent.join('')).toBe(FINAL)
    expect(run.textStream.join('')).toBe(FINAL)
    expect(ofType(events, 'content').map((event) => event.delta).join('')).toBe(FINAL)
    expect(run.lines).toContain(`answer: ${FINAL}`)

    // Hooks: SessionStart first, SessionEnd once and last though close() ran and `await using`
    // disposed; per tool call PreToolUse → PermissionRequest → PostToolUse; TaskCompleted after them.
    expect(run.hookCalls[0]).toBe('SessionStart')
    expect(run.hookCalls[1]).toBe('UserPromptSubmit')
    expect(run.hookCalls.slice(-2)).toEqual(['TaskCompleted', 'SessionEnd'])
    expect(run.hookCalls.filter((call) => call === 'SessionEnd')).toHaveLength(1)
    for (const tool of ['read_file', 'current_time', 'save_note']) {
      expect(run.hookCalls.filter((call) => call.endsWith(`:${tool}`))).toEqual([`PreToolUse:${tool}`, `PermissionRequest:${tool}`, `PostToolUse:${tool}`])
    }
    expect(run.hookCalls).toHaveLength(2 + 9 + 2)
    expect(run.hookInputs[0]).toMatchObject({ event: 'SessionStart', isResume: false, sessionId: run.sessionId })
    expect(run.hookInputs[1]).toMatchObject({ event: 'UserPromptSubmit', userPrompt: QUESTION, hasImages: false, imageCount: 0 })

    // The permission function saw Blade's `kind` values and the input after PreToolUse.
    expect(run.permissionRequests).toEqual(
      expect.arrayContaining([
        { toolName: 'read_file', kind: 'readonly', input: { path: 'notes.txt' }, affectedPaths: expect.any(Array) },
        { toolName: 'current_time', kind: 'readonly', input: {}, affectedPaths: expect.any(Array) },
        { toolName: 'save_note', kind: 'write', input: { ...SAVE_ARGS, author: 'docs-agent' }, affectedPaths: expect.any(Array) },
      ]),
    )
    expect(run.permissionRequests).toHaveLength(3)

    // Tools ran once each, with the defaultContext, and their side effects happened.
    expect(run.toolRuns.map((call) => call.name).sort()).toEqual(['current_time', 'read_file', 'save_note'])
    for (const call of run.toolRuns) {
      expect(call.environment).toEqual({ APP_ENV: 'docs' })
      expect(call.metadata).toEqual({ tenant: 'acme' })
    }
    expect(run.toolRuns.find((call) => call.name === 'save_note')?.input).toEqual({ ...SAVE_ARGS, author: 'docs-agent' })
    expect(run.filesRead).toEqual(['notes.txt'])
    expect(run.savedNotes).toEqual({ [SAVE_ARGS.path]: SAVE_ARGS.text })
  }

  it('against a loopback OpenAI-compatible server (provider openai-compatible, SSE)', async () => {
    server.reply(
      rawStream([
        sse(
          openaiChunks('', [
            { id: 'call_read', name: 'read_file', arguments: '{"path":"notes.txt"}' },
            { id: 'call_time', name: 'current_time', arguments: '{}' },
          ]),
        ),
      ]),
      rawStream([sse(openaiChunks('', [{ id: 'call_save', name: 'save_note', arguments: JSON.stringify(SAVE_ARGS) }]))]),
      rawStream([sse(openaiChunks(FINAL))]),
    )
    const run = await main({ baseUrl: server.url + '/v1' })
    checkRun(run)

    expect(run.supportedModels).toEqual([{ id: 'default', name: 'docs-model', provider: 'openai-compatible' }])
    // openaiChunks reports 11 prompt + 7 completion tokens per call; maxContextTokens defaults to 128000.
    expect(run.usage).toEqual({ inputTokens: 33, outputTokens: 21, totalTokens: 54, maxContextTokens: 128000 })
    expect(ofType(run.events, 'usage')[0].usage).toEqual(run.usage)

    // What the model was sent: the rewritten prompt, the tools, and only `model` of each result.
    expect(server.requests).toHaveLength(3)
    for (const request of server.requests) {
      expect(request.url).toBe('/v1/chat/completions')
      expect(request.headers.authorization).toBe('Bearer sk-docs')
      expect(request.body.model).toBe('docs-model')
      expect(request.body.stream).toBe(true)
    }
    const [first, second, third] = server.requests
    expect(first.body.messages).toEqual([
      { role: 'system', content: 'You are a concise notes assistant.' },
      { role: 'user', content: `${QUESTION}\nAnswer in one sentence.` },
    ])
    expect(first.body.tools.map((tool: any) => tool.function.name)).toEqual(['read_file', 'current_time', 'save_note'])
    expect(first.body.tools[0].function.parameters).toEqual({
      type: 'object',
      properties: { path: { type: 'string', description: 'Path relative to the workspace' } },
      required: ['path'],
    })
    expect(second.body.messages.slice(2)).toEqual([
      {
        role: 'assistant',
        content: '',
        tool_calls: [
          { id: 'call_read', type: 'function', function: { name: 'read_file', arguments: '{"path":"notes.txt"}' } },
          { id: 'call_time', type: 'function', function: { name: 'current_time', arguments: '{}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_read', content: FILES['notes.txt'] },
      { role: 'tool', tool_call_id: 'call_time', content: '2026-01-01T12:00:00.000Z (UTC)' },
    ])
    expect(third.body.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: 'call_save', content: 'Saved notes/summary.txt' })
    // Neither a display nor a progress report ever reaches the model.
    const sent = JSON.stringify(server.requests.map((request) => request.body))
    expect(sent).not.toContain('characters from')
    expect(sent).not.toContain('📝')
    expect(sent).not.toContain('Opening notes.txt')
    expect(sent).not.toContain('Read complete')
  })

  it('with scriptedModel: the same run, and the model sees only what a model would', async () => {
    const { model, requests } = recordingModel([
      {
        toolCalls: [
          { id: 'call_read', name: 'read_file', input: { path: 'notes.txt' } },
          { id: 'call_time', name: 'current_time', input: {} },
        ],
      },
      { toolCalls: [{ id: 'call_save', name: 'save_note', input: SAVE_ARGS }] },
      { text: FINAL },
    ])
    const run = await main({ model })
    checkRun(run)
    expect(requests).toHaveLength(3)
    expect(requests.map((request) => request.turn)).toEqual([1, 2, 3])
    expect(requests[0].messages[1]).toEqual({ role: 'user', content: `${QUESTION}\nAnswer in one sentence.` })
    expect(requests[0].tools.map((tool) => tool.name)).toEqual(['read_file', 'current_time', 'save_note'])
    expect(toolMessages(requests[2])).toEqual({
      call_read: FILES['notes.txt'],
      call_time: '2026-01-01T12:00:00.000Z (UTC)',
      call_save: 'Saved notes/summary.txt',
    })
    expect(JSON.stringify(requests)).not.toContain('characters from')
  })

  it("describeResult() reads Blade's PromptResult fields", async () => {
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'noop', input: {} }] }, { text: 'fine' }]),
      tools: [defineTool({ name: 'noop', execute: () => 'ok' })],
    })
    const response = await agent.send('go')
    const line = describeResult(await response.result())
    expect(line).toMatch(/^fine \[2 turns, \d+ms, \d+ tokens; noop in \d+ms\]$/)
    await agent.close()
  })
})

// ---------------------------------------------------------------------------------------------

/** `{ n: number }`, as each typed tool must say to the model. */
const N = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }

describe('tool forms (SPEC §2: plain, async, generator, async generator, completeToolExecution)', () => {
  it('every form runs; yields become tool_progress events before that call’s tool_result; the return value is the result', async () => {
    let sideEffects = 0
    const tools: ToolDefinition<any>[] = [
      defineTool<{ n: number }>({ name: 'plain', parameters: N, execute: ({ n }) => `plain:${n}` }),
      defineTool<{ n: number }>({
        name: 'async',
        parameters: N,
        execute: async ({ n }) => {
          await sleep(1)
          return `async:${n}`
        },
      }),
      defineTool<{ n: number }>({
        name: 'gen',
        parameters: N,
        *execute({ n }) {
          sideEffects++
          yield { step: 1 }
          yield { step: 2 }
          sideEffects++
          return `gen:${n}`
        },
      }),
      defineTool<{ n: number }>({
        name: 'agen',
        parameters: N,
        async *execute({ n }) {
          sideEffects++
          yield 'a'
          await sleep(1)
          yield 'b'
          sideEffects++
          return { status: 'success', model: `agen:${n}`, display: { summary: 'shown to the user only' } }
        },
      }),
      defineTool<{ n: number }>({ name: 'complete', parameters: N, execute: ({ n }) => completeToolExecution(`complete:${n}`) }),
      defineTool({
        name: 'completeResult',
        execute: () => completeToolExecution({ status: 'success', model: { ok: true }, display: 'ui-only' }),
      }),
    ]
    const names = ['plain', 'async', 'gen', 'agen', 'complete', 'completeResult']
    const { model, requests } = recordingModel([
      ...names.map((name, i): ScriptedTurn => ({ toolCalls: [{ id: `c_${name}`, name, input: { n: i + 1 } }] })),
      { text: 'all done' },
    ])
    const agent = await createAgent({ model, tools })
    const response = await agent.send('run them all')
    const events = await collect(response.stream())

    const results = ofType(events, 'tool_result')
    expect(results.map((event) => [event.name, event.output, event.isError])).toEqual([
      ['plain', 'plain:1', false],
      ['async', 'async:2', false],
      ['gen', 'gen:3', false],
      ['agen', 'agen:4', false],
      ['complete', 'complete:5', false],
      ['completeResult', '{"ok":true}', false],
    ])
    expect(results[3].display).toEqual({ summary: 'shown to the user only' })
    expect(results[5].display).toBe('ui-only')
    expect(ofType(events, 'tool_progress').map(({ id, name, progress }) => ({ id, name, progress }))).toEqual([
      { id: 'c_gen', name: 'gen', progress: { step: 1 } },
      { id: 'c_gen', name: 'gen', progress: { step: 2 } },
      { id: 'c_agen', name: 'agen', progress: 'a' },
      { id: 'c_agen', name: 'agen', progress: 'b' },
    ])
    // Each progress event sits between its call's tool_use and tool_result.
    for (const [index, event] of events.entries()) {
      if (event.type !== 'tool_progress') continue
      const use = events.findIndex((other) => other.type === 'tool_use' && other.id === event.id)
      const result = events.findIndex((other) => other.type === 'tool_result' && other.id === event.id)
      expect(use).toBeGreaterThanOrEqual(0)
      expect(index).toBeGreaterThan(use)
      expect(index).toBeLessThan(result)
    }
    // The generators' bodies really ran, once each.
    expect(sideEffects).toBe(4)
    // The model got `model`, never `display` or progress.
    expect(toolMessages(requests.at(-1)!)).toEqual({
      c_plain: 'plain:1',
      c_async: 'async:2',
      c_gen: 'gen:3',
      c_agen: 'agen:4',
      c_complete: 'complete:5',
      c_completeResult: '{"ok":true}',
    })
    expect(JSON.stringify(requests)).not.toContain('shown to the user only')
    expect(JSON.stringify(requests)).not.toContain('ui-only')
    const result = await response.result()
    expect(result.toolCalls.map((call) => [call.id, call.isError, call.status])).toEqual(names.map((name) => [`c_${name}`, false, 'success']))
    await agent.close()
  })

  it('{status:"error", error:{message}} from any form is a failed call: isError and "Tool execution failed: <message>"', async () => {
    const tools = [
      defineTool({ name: 'plainError', execute: () => ({ status: 'error', error: { message: 'disk full' } }) }),
      defineTool({
        name: 'genError',
        async *execute() {
          yield 'working'
          return { status: 'error', error: { message: 'quota exceeded', type: 'execution_error' } }
        },
      }),
      defineTool({
        name: 'genThrows',
        *execute() {
          yield 'about to fail'
          throw new Error('boom')
        },
      }),
    ]
    const { model, requests } = recordingModel([
      { toolCalls: [{ id: 'e1', name: 'plainError', input: {} }] },
      { toolCalls: [{ id: 'e2', name: 'genError', input: {} }] },
      { toolCalls: [{ id: 'e3', name: 'genThrows', input: {} }] },
      { text: 'handled' },
    ])
    const failures: string[] = []
    const agent = await createAgent({
      model,
      tools,
      advanced: { hooks: { PostToolUseFailure: [continueHook(failures)] } },
    })
    const response = await agent.send('go')
    const events = await collect(response.stream())
    expect(ofType(events, 'tool_result').map(({ id, output, isError, status }) => ({ id, output, isError, status }))).toEqual([
      { id: 'e1', output: 'Tool execution failed: disk full', isError: true, status: 'error' },
      { id: 'e2', output: 'Tool execution failed: quota exceeded', isError: true, status: 'error' },
      { id: 'e3', output: 'Tool execution failed: boom', isError: true, status: 'error' },
    ])
    expect(ofType(events, 'tool_progress').map((event) => event.progress)).toEqual(['working', 'about to fail'])
    expect(failures).toEqual(['PostToolUseFailure:plainError', 'PostToolUseFailure:genError', 'PostToolUseFailure:genThrows'])
    expect(toolMessages(requests[3])).toEqual({
      e1: 'Tool execution failed: disk full',
      e2: 'Tool execution failed: quota exceeded',
      e3: 'Tool execution failed: boom',
    })
    const result = await response.result()
    expect(result.toolCalls.map((call) => call.isError)).toEqual([true, true, true])
    expect(result.stopReason).toBe('done')
    await agent.close()
  })

  it('a function, a Symbol, or an iterator that is not a generator fails the call loudly (never {} or "" as success)', async () => {
    const cases: Record<string, () => unknown> = {
      returnsFunction: () => () => 'never called',
      returnsSymbol: () => Symbol('tool result'),
      returnsIterator: () => ({
        next: () => ({ done: true, value: 'iterated' }),
        [Symbol.iterator]() {
          return this
        },
      }),
      returnsAsyncIterator: () => ({
        next: async () => ({ done: true, value: 'iterated' }),
        [Symbol.asyncIterator]() {
          return this
        },
      }),
    }
    const tools = Object.entries(cases).map(([name, execute]) => defineTool({ name, execute: execute as never }))
    const { model, requests } = recordingModel([
      ...Object.keys(cases).map((name): ScriptedTurn => ({ toolCalls: [{ id: `x_${name}`, name, input: {} }] })),
      { text: 'end' },
    ])
    const agent = await createAgent({ model, tools })
    const response = await agent.send('go')
    const events = await collect(response.stream())
    const results = ofType(events, 'tool_result')
    expect(results.map((event) => event.name)).toEqual(Object.keys(cases))
    for (const event of results) {
      expect(event.isError).toBe(true)
      expect(event.status).toBe('error')
      expect(event.output).toMatch(/^Tool execution failed: \S/)
    }
    const sent = toolMessages(requests.at(-1)!)
    for (const event of results) expect(sent[event.id]).toBe(event.output)
    expect(Object.values(sent)).not.toContain('{}')
    expect(Object.values(sent)).not.toContain('')
    expect(Object.values(sent)).not.toContain('iterated')
    await agent.close()
  })

  it('kind and sideEffect accept the ToolKind and ToolSideEffect values (plan mode lets a ToolKind.ReadOnly tool run)', async () => {
    const ran: string[] = []
    const result = await prompt('go', {
      model: scriptedModel([
        {
          toolCalls: [
            { id: 'r', name: 'lookup', input: {} },
            { id: 'w', name: 'store', input: {} },
          ],
        },
        { text: 'ok' },
      ]),
      tools: [
        defineTool({ name: 'lookup', kind: ToolKind.ReadOnly, sideEffect: ToolSideEffect.PURE, execute: () => (ran.push('lookup'), 'found') }),
        defineTool({ name: 'store', kind: ToolKind.Write, sideEffect: ToolSideEffect.IDEMPOTENT, execute: () => (ran.push('store'), 'stored') }),
      ],
      advanced: { permission: 'plan' },
    })
    expect(ran).toEqual(['lookup'])
    expect(result.toolCalls.map((call) => call.output)).toEqual(['found', `Tool execution aborted: ${PLAN_DENIAL}`])
  })
})

// ---------------------------------------------------------------------------------------------

describe('stream events and PromptResult (SPEC §2)', () => {
  it('a text-only run: turn_start, content…, turn_end, usage, result — sessionId on every event', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'Hello world', usage: { inputTokens: 3, outputTokens: 2 } }]) })
    const response = await agent.send('hi')
    const events = await collect(response.stream())
    expect(shape(events)).toEqual(['turn_start', 'content…', 'turn_end', 'usage', 'result'])
    for (const event of events) expect(event.sessionId).toBe(agent.sessionId)
    expect(events[0]).toMatchObject({ type: 'turn_start', turn: 1 })
    expect(ofType(events, 'turn_end')).toEqual([expect.objectContaining({ turn: 1 })])
    expect(ofType(events, 'usage')[0].usage).toEqual({ inputTokens: 3, outputTokens: 2, totalTokens: 5, maxContextTokens: 128000 })
    const result = events.at(-1)!
    expect(result).toMatchObject({ type: 'result', subtype: 'success', content: 'Hello world', result: { result: 'Hello world', content: 'Hello world' } })
    await agent.close()
  })

  it('a tool run: turn_start, tool_use, tool_progress…, tool_result, turn_end, turn_start, content…, turn_end, usage, result', async () => {
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 't1', name: 'count', input: { to: 2 } }] }, { text: 'counted' }]),
      tools: [
        defineTool<{ to: number }>({
          name: 'count',
          parameters: { type: 'object', properties: { to: { type: 'number' } }, required: ['to'] },
          async *execute({ to }) {
            for (let i = 1; i <= to; i++) yield i
            return `counted to ${to}`
          },
        }),
      ],
    })
    const response = await agent.send('count')
    const events = await collect(response.stream())
    expect(shape(events)).toEqual([
      'turn_start',
      'tool_use',
      'tool_progress',
      'tool_progress',
      'tool_result',
      'turn_end',
      'turn_start',
      'content…',
      'turn_end',
      'usage',
      'result',
    ])
    for (const event of events) expect(event.sessionId).toBe(agent.sessionId)
    expect(ofType(events, 'turn_start').map((event) => event.turn)).toEqual([1, 2])
    expect(ofType(events, 'turn_end').map((event) => event.turn)).toEqual([1, 2])
    expect(ofType(events, 'tool_progress').map(({ progress, id, name }) => ({ progress, id, name }))).toEqual([
      { progress: 1, id: 't1', name: 'count' },
      { progress: 2, id: 't1', name: 'count' },
    ])
    expect(ofType(events, 'tool_result')[0]).toMatchObject({ id: 't1', name: 'count', output: 'counted to 2', isError: false, status: 'success' })
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: 'counted' })
    await agent.close()
  })

  it("PromptResult has Blade's fields (result, duration, turnsCount, toolCalls[i].duration/isError) and ours (content, turns, stopReason)", async () => {
    const agent = await createAgent({
      model: scriptedModel([
        { toolCalls: [{ id: 's1', name: 'slow', input: {} }], usage: { inputTokens: 4, outputTokens: 1 } },
        { text: 'finished', usage: { inputTokens: 6, outputTokens: 2 } },
      ]),
      tools: [
        defineTool({
          name: 'slow',
          execute: async () => {
            await sleep(30)
            return 'slept'
          },
        }),
      ],
    })
    const response = await agent.send('go')
    const result = await response.result()
    expect(result).toMatchObject({
      result: 'finished',
      content: 'finished',
      turnsCount: 2,
      turns: 2,
      stopReason: 'done',
      usage: { inputTokens: 10, outputTokens: 3, totalTokens: 13, maxContextTokens: 128000 },
      toolCalls: [{ id: 's1', name: 'slow', input: {}, output: 'slept', isError: false, status: 'success' }],
    })
    expect(typeof result.duration).toBe('number')
    expect(typeof result.toolCalls[0].duration).toBe('number')
    // Durations are milliseconds: the tool slept 30 ms, and the run lasted at least as long as it.
    expect(result.toolCalls[0].duration).toBeGreaterThanOrEqual(25)
    expect(result.duration).toBeGreaterThanOrEqual(result.toolCalls[0].duration)
    const viaEvent = ofType(await collect(response.stream()), 'result')[0]
    expect(viaEvent.result).toEqual(result)
    await agent.close()
  })

  it('prompt() resolves the same PromptResult shape', async () => {
    const result = await prompt('hi', { model: scriptedModel([{ text: 'one shot' }]) })
    expect(result).toMatchObject({ result: 'one shot', content: 'one shot', turnsCount: 1, turns: 1, stopReason: 'done', toolCalls: [] })
    expect(result.duration).toBeGreaterThanOrEqual(0)
  })

  it('a failed run ends with an error event (message, code, sessionId) instead of result; text() and result() reject with it', async () => {
    const agent = await createAgent({ model: scriptedModel([]) }) // out of turns → MODEL_ERROR (SPEC §3)
    const response = await agent.send('hi')
    const events = await collect(response.stream())
    const last = events.at(-1)!
    expect(last).toMatchObject({ type: 'error', code: 'MODEL_ERROR', sessionId: agent.sessionId })
    if (last.type !== 'error') throw new Error('unreachable')
    expect(typeof last.message).toBe('string')
    expect(last.message.length).toBeGreaterThan(0)
    expect(last.error).toBeInstanceOf(SdkError)
    expect(last.message).toBe(last.error.message)
    expect(events.filter((event) => event.type === 'result')).toEqual([])
    // Blade: a failed run emits no usage either (Session.stream's catch yields only the error);
    // SPEC §2 only says "ends with error instead of result".
    expect(events.filter((event) => event.type === 'usage')).toEqual([])
    await expect(response.text()).rejects.toMatchObject({ message: last.message, code: 'MODEL_ERROR' })
    await expect(response.result()).rejects.toMatchObject({ message: last.message, code: 'MODEL_ERROR' })
    await agent.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('AgentResponse (SPEC §2, §10)', () => {
  it('is an AgentResponse; submission is {status:"started", inputId, requestId}, new ids per send', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'a' }, { text: 'b' }]) })
    const first = await agent.send('one')
    expect(first).toBeInstanceOf(AgentResponse)
    expect(first.submission).toEqual({ status: 'started', inputId: expect.any(String), requestId: expect.any(String) })
    expect(first.submission.inputId.length).toBeGreaterThan(0)
    expect(first.submission.requestId.length).toBeGreaterThan(0)
    await first.text()
    const second = await agent.send('two')
    await second.text()
    expect(second.submission.status).toBe('started')
    expect(second.submission.inputId).not.toBe(first.submission.inputId)
    expect(second.submission.requestId).not.toBe(first.submission.requestId)
    await agent.close()
  })

  it('on(type, listener) returns the response and starts consumption by itself', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'abc' }]) })
    const response = await agent.send('hi')
    const deltas: string[] = []
    const results: string[] = []
    expect(response.on('content', (event) => void deltas.push(event.delta))).toBe(response)
    response.on('result', (event) => void results.push(event.content ?? ''))
    await until(() => response.isSettled)
    await until(() => results.length === 1)
    expect(deltas.join('')).toBe('abc')
    expect(results).toEqual(['abc'])
    await agent.close()
  })

  it('listeners are awaited in registration order before iterators see the event', async () => {
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'noop', input: {} }] }, { text: 'done' }]),
      tools: [defineTool({ name: 'noop', execute: () => 'ok' })],
    })
    const response = await agent.send('go')
    const log: string[] = []
    response
      .on('tool_result', async (event) => {
        log.push(`L1 start ${event.id}`)
        await sleep(20)
        log.push(`L1 end ${event.id}`)
      })
      .on('tool_result', (event) => {
        log.push(`L2 ${event.id}`)
      })
      .on('result', async () => {
        await sleep(10)
        log.push('L result')
      })
    for await (const event of response.stream()) {
      if (event.type === 'tool_result') log.push(`I ${event.id}`)
      if (event.type === 'result') log.push('I result')
    }
    // Per event: every listener, in registration order, finished before the iterator saw it.
    const at = (entry: string) => log.indexOf(entry)
    expect(log).toHaveLength(6)
    expect(log.slice(0, 3)).toEqual(['L1 start c1', 'L1 end c1', 'L2 c1'])
    expect(at('I c1')).toBeGreaterThan(at('L2 c1'))
    expect(at('I result')).toBeGreaterThan(at('L result'))
    // A second, later iteration replays from the first event.
    expect(shape(await collect(response.stream()))[0]).toBe('turn_start')
    await agent.close()
  })

  // Blade: AgentResponse wakes iterators once *that* event's listeners are done; a slow listener
  // on a later event does not hold back an iterator that is still on an earlier one.
  it("a slow listener on a later event does not hold back the iterator's earlier events", async () => {
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'noop', input: {} }] }, { text: 'done' }]),
      tools: [defineTool({ name: 'noop', execute: () => 'ok' })],
    })
    const response = await agent.send('go')
    const log: string[] = []
    response.on('result', async () => {
      log.push('L result start')
      await sleep(50)
      log.push('L result end')
    })
    for await (const event of response.stream()) {
      if (event.type === 'tool_result') log.push(`I ${event.id}`)
      if (event.type === 'result') log.push('I result')
    }
    // (The listener may start before the iterator resumes; but while it sleeps, the iterator
    // must get the events whose own listeners are done.)
    expect(log).toHaveLength(4)
    expect(log.indexOf('I c1')).toBeLessThan(log.indexOf('L result end'))
    expect(log.slice(-2)).toEqual(['L result end', 'I result'])
    await agent.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('Agent methods (SPEC §10)', () => {
  it("supportedModels() resolves [{ id: 'default', name: <model>, provider: <provider> }]", async () => {
    const plain = await createAgent({ model: 'gpt-4o-mini', apiKey: 'test-key' })
    expect(await plain.supportedModels()).toEqual([{ id: 'default', name: 'gpt-4o-mini', provider: 'openai' }])
    await plain.close()
    const compatible = await createAgent({ model: 'local-llm', apiKey: 'k', provider: 'openai-compatible', baseUrl: server.url + '/v1' })
    expect(await compatible.supportedModels()).toEqual([{ id: 'default', name: 'local-llm', provider: 'openai-compatible' }])
    await compatible.close()
  })

  it('setModel() applies from the next run (the model named in each request)', async () => {
    server.reply(
      rawStream([sse(openaiChunks('', [{ id: 'c1', name: 'switch', arguments: '{}' }]))]),
      rawStream([sse(openaiChunks('first run'))]),
      rawStream([sse(openaiChunks('second run'))]),
    )
    let agent!: Agent
    agent = await createAgent({
      model: 'model-a',
      apiKey: 'k',
      provider: 'openai-compatible',
      baseUrl: server.url + '/v1',
      tools: [
        defineTool({
          name: 'switch',
          execute: () => {
            agent.setModel('model-b')
            return 'switched'
          },
        }),
      ],
    })
    expect(await (await agent.send('one')).text()).toBe('first run')
    expect(await (await agent.send('two')).text()).toBe('second run')
    expect(server.requests.map((request) => request.body.model)).toEqual(['model-a', 'model-a', 'model-b'])
    await agent.close()
  })

  it('setMaxTurns() applies from the next run', async () => {
    let agent!: Agent
    const { model, requests } = recordingModel((request) =>
      request.turn < 3 ? { toolCalls: [{ id: `t${request.turn}`, name: 'limit', input: {} }] } : { text: 'three turns' },
    )
    agent = await createAgent({
      model,
      maxTurns: 10,
      tools: [
        defineTool({
          name: 'limit',
          execute: () => {
            agent.setMaxTurns(1)
            return 'limited'
          },
        }),
      ],
    })
    const first = await (await agent.send('one')).result()
    expect(first).toMatchObject({ stopReason: 'done', turnsCount: 3, result: 'three turns' })
    const second = await (await agent.send('two')).result()
    expect(second).toMatchObject({ stopReason: 'max_turns', turnsCount: 1 })
    expect(requests).toHaveLength(4)
    await agent.close()
  })

  it('setPermissionMode(PermissionMode.X) switches presets from the next run', async () => {
    let agent!: Agent
    let writes = 0
    let calls = 0
    agent = await createAgent({
      model: scriptedModel((request) =>
        request.turn === 1 ? { toolCalls: [{ id: `w${++calls}`, name: 'write_file', input: { file_path: 'a.txt' } }] } : { text: 'ok' },
      ),
      tools: [
        defineTool({
          name: 'write_file',
          kind: 'write',
          execute: () => {
            writes++
            // Switching during a run does not change this run.
            agent.setPermissionMode(PermissionMode.PLAN)
            return 'written'
          },
        }),
      ],
    })
    const first = await (await agent.send('one')).result()
    expect(first.toolCalls.map((call) => call.output)).toEqual(['written'])
    const second = await (await agent.send('two')).result()
    expect(second.toolCalls.map((call) => call.output)).toEqual([`Tool execution aborted: ${PLAN_DENIAL}`])
    expect(writes).toBe(1)
    agent.setPermissionMode(PermissionMode.YOLO)
    const third = await (await agent.send('three')).result()
    expect(third.toolCalls.map((call) => call.output)).toEqual(['written'])
    expect(writes).toBe(2)
    await agent.close()
  })

  it('getDefaultContext()/setDefaultContext(); tools receive environment, metadata, capabilities (filesystem merged in)', async () => {
    const seen: Array<Pick<ToolContext, 'environment' | 'metadata' | 'capabilities'>> = []
    const agent = await createAgent({
      model: scriptedModel((request) => (request.turn === 1 ? { toolCalls: [{ name: 'ctx', input: {} }] } : { text: 'ok' })),
      tools: [
        defineTool({
          name: 'ctx',
          execute: (_input, context) => {
            seen.push(clone({ environment: context.environment, metadata: context.metadata, capabilities: context.capabilities }))
            return 'ok'
          },
        }),
      ],
      filesystem: { roots: ['/workspace'], cwd: '/workspace' },
      advanced: { defaultContext: { environment: { APP_ENV: 'test' }, metadata: { tenant: 'acme' } } },
    })
    const merged = {
      environment: { APP_ENV: 'test' },
      metadata: { tenant: 'acme' },
      capabilities: { filesystem: { roots: ['/workspace'], cwd: '/workspace' } },
    }
    expect(agent.getDefaultContext()).toEqual(merged)
    await (await agent.send('one')).text()
    expect(seen[0]).toEqual(merged)

    const replaced = { environment: { APP_ENV: 'prod' }, metadata: { tenant: 'globex' } }
    agent.setDefaultContext(replaced)
    expect(agent.getDefaultContext()).toEqual(replaced)
    await (await agent.send('two')).text()
    expect(seen[1]).toMatchObject(replaced)
    await agent.close()
  })

  it('fork() gives a new agent with a copy of the conversation; its SessionStart has isResume: false', async () => {
    const starts: HookInput[] = []
    const ends: string[] = []
    const { model, requests } = recordingModel((request) => {
      const last = request.messages.at(-1)
      return { text: `re: ${last && last.role === 'user' ? String(last.content) : '?'}` }
    })
    const parent = await createAgent({
      model,
      advanced: {
        hooks: {
          SessionStart: [
            async (input) => {
              starts.push(input)
              return { action: 'continue' }
            },
          ],
          SessionEnd: [continueHook(ends, (input) => input.sessionId)],
        },
      },
    })
    await (await parent.send('first')).text()
    const child = await parent.fork()
    expect(child.sessionId).not.toBe(parent.sessionId)
    expect(child.messages).toEqual(parent.messages)
    expect(child.messages).toEqual([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 're: first' },
    ])
    expect(starts.map((input) => [input.sessionId, input.isResume])).toEqual([
      [parent.sessionId, false],
      [child.sessionId, false],
    ])
    expect(await (await child.send('second')).text()).toBe('re: second')
    expect(requests.at(-1)!.messages).toEqual([
      { role: 'user', content: 'first' },
      { role: 'assistant', content: 're: first' },
      { role: 'user', content: 'second' },
    ])
    expect(parent.messages).toHaveLength(2)
    expect(child.messages).toHaveLength(4)
    await child.close()
    await parent.close()
    expect(ends).toEqual([child.sessionId, parent.sessionId])
  })

  it('`await using` / [Symbol.asyncDispose] closes the agent, running SessionEnd once', async () => {
    const ends: string[] = []
    let captured: Agent | undefined
    {
      await using agent = await createAgent({
        model: scriptedModel([{ text: 'x' }]),
        advanced: { hooks: { SessionEnd: [continueHook(ends)] } },
      })
      expect(typeof agent[Symbol.asyncDispose]).toBe('function')
      captured = agent
      await (await agent.send('hi')).text()
      expect(agent.isClosed).toBe(false)
    }
    expect(captured!.isClosed).toBe(true)
    expect(ends).toEqual(['SessionEnd'])
    await captured![Symbol.asyncDispose]()
    await captured!.close()
    expect(ends).toEqual(['SessionEnd'])
  })
})

// ---------------------------------------------------------------------------------------------

/** Runs `advanced` (a JS source literal) through two agents in a fresh Node process and reports
 * the process warnings and any error. */
async function optionsInChild(advancedSource: string, topLevelSource = '{}') {
  const source = `
    const arh = require(process.env.ENTRY)
    const warnings = []
    process.on('warning', (warning) => warnings.push({ name: warning.name, code: warning.code, message: warning.message }))
    ;(async () => {
      const out = { created: 0, texts: [] }
      try {
        for (let i = 0; i < 2; i++) {
          const agent = await arh.createAgent({ model: arh.scriptedModel([{ text: 'ok' }]), ...(${topLevelSource}), advanced: ${advancedSource} })
          out.created++
          out.texts.push(await (await agent.send('hi')).text())
          await agent.close()
        }
      } catch (error) {
        out.error = { name: error && error.name, code: error && error.code, message: String(error && error.message) }
      }
      await new Promise((resolve) => setTimeout(resolve, 50))
      out.warnings = warnings
      console.log(JSON.stringify(out))
    })()
  `
  const child = await runScript(source, { timeoutMs: 20000 })
  expect(child.timedOut).toBe(false)
  return JSON.parse(child.stdout) as {
    created: number
    texts: string[]
    error?: { name: string; code: string; message: string }
    warnings: Array<{ name: string; code?: string; message: string }>
  }
}

/** Blade `advanced` keys this project accepts and ignores (SPEC §10), with Blade-shaped values. */
const IGNORED_BLADE_KEYS: Record<string, string> = {
  skills: `[{ name: 'first-skill', description: 'First inline skill', instructions: 'Follow the first inline instructions.' }]`,
  plugins: `[]`,
  sandbox: `{ enabled: false }`,
  middleware: `[]`,
  memoryManager: `{ async load() { return [] }, async save() {} }`,
  providerRegistry: `{}`,
  tokenBudget: `{ maxTotalTokens: 100000 }`,
  providerOptions: `{}`,
  thinkingEnabled: `false`,
  thinkingBudget: `1024`,
  observability: `{ enabled: false }`,
  outputFormat: `{ type: 'json_schema', json_schema: { name: 'answer', schema: { type: 'object' } } }`,
  toolSourcePolicy: `{}`,
  durableEventStore: `{}`,
  executionLease: `{}`,
  subagent: `{ name: 'helper' }`,
  permissions: `{ allow: ['Read'] }`,
  sessionRepository: `{}`,
  sessionEventStore: `{}`,
}
const literal = (entries: Record<string, string>) => `{ ${Object.entries(entries).map(([key, value]) => `${key}: ${value}`).join(', ')} }`
const unsupportedWarnings = (warnings: Array<{ code?: string; message: string }>) => warnings.filter((warning) => warning.code === 'ARH_UNSUPPORTED_OPTION')

describe('options (SPEC §10)', () => {
  it('Blade-only keys are accepted and ignored, with exactly one ARH_UNSUPPORTED_OPTION warning per key per process, naming it', async () => {
    const out = await optionsInChild(literal(IGNORED_BLADE_KEYS))
    expect(out.error).toBeUndefined()
    expect(out.created).toBe(2)
    expect(out.texts).toEqual(['ok', 'ok'])
    const warnings = unsupportedWarnings(out.warnings)
    for (const key of Object.keys(IGNORED_BLADE_KEYS)) {
      const naming = warnings.filter((warning) => new RegExp(`\\b${key}\\b`).test(warning.message))
      expect(naming, `warnings naming ${key}`).toHaveLength(1)
    }
    expect(warnings).toHaveLength(Object.keys(IGNORED_BLADE_KEYS).length)
  })

  it('builtinTools (built since the built-in tools) raises no warning', async () => {
    const out = await optionsInChild(`{ builtinTools: false }`)
    expect(out.error).toBeUndefined()
    expect(out.created).toBe(2)
    expect(unsupportedWarnings(out.warnings)).toEqual([])
  })

  it('webFetch (built since the WebFetch tool) raises no warning; a wrong one is a ConfigError naming the field', async () => {
    const out = await optionsInChild(`{ webFetch: { allowedHosts: ['*.example.com'], blockedHosts: ['bad.example.com'], allowPrivateNetwork: false } }`)
    expect(out.error).toBeUndefined()
    expect(out.created).toBe(2)
    expect(unsupportedWarnings(out.warnings)).toEqual([])
    const wrong = await optionsInChild(`{ webFetch: { enabled: false } }`)
    expect(wrong.error?.name).toBe('ConfigError')
    expect(wrong.error?.message).toContain('advanced.webFetch.enabled is not a known option')
  })

  it('mcpServers (built since MCP tools: SPEC 8.6) raises no warning', async () => {
    const out = await optionsInChild(`{ mcpServers: {} }`)
    expect(out.error).toBeUndefined()
    expect(out.created).toBe(2)
    expect(unsupportedWarnings(out.warnings)).toEqual([])
  })

  it('agents (built since sub-agents: SPEC 8.4) raise no warning', async () => {
    const out = await optionsInChild(`{ agents: { helper: { description: 'helps' } }, maxSubagentDepth: 2 }`)
    expect(out.error).toBeUndefined()
    expect(out.created).toBe(2)
    expect(unsupportedWarnings(out.warnings)).toEqual([])
  })

  it('storagePath and persistSession (built since durable sessions: SPEC 8.2) raise no warning', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arh-blade-'))
    const out = await optionsInChild(`{ storagePath: ${JSON.stringify(dir)}, persistSession: false }`)
    expect(out.error).toBeUndefined()
    expect(out.created).toBe(2)
    expect(unsupportedWarnings(out.warnings)).toEqual([])
  })

  it('keys built here (defaultContext, allowedTools, toolTimeoutMs, confirmationHandler, profile, filesystem, …) raise no warning', async () => {
    const out = await optionsInChild(
      `{ defaultContext: { environment: { A: 'b' } }, allowedTools: ['x'], disallowedTools: ['y'], toolTimeoutMs: 1000, maxContextTokens: 64000,
         confirmationHandler: { requestConfirmation: async () => ({ approved: true }) },
         confirmationHandlerFactory: () => ({ requestConfirmation: async () => ({ approved: true }) }),
         hookTimeoutMs: 1000, sessionEndHookTimeoutMs: 1000, permission: 'bypass-permissions', hooks: {},
         connection: { apiVersion: '2024-01-01', streamIdleTimeoutMs: 1000 } }`,
      `{ profile: 'server', filesystem: { roots: ['/workspace'], cwd: '/workspace' } }`,
    )
    expect(out.error).toBeUndefined()
    expect(out.created).toBe(2)
    expect(unsupportedWarnings(out.warnings)).toEqual([])
  })

  it("Blade's legacy advanced.permissionMode, permissionHandler and canUseTool are dropped silently: no warning, no error", async () => {
    const out = await optionsInChild(
      `{ permissionMode: 'yolo', permissionHandler: async () => ({ behavior: 'allow' }), canUseTool: async () => ({ behavior: 'allow' }) }`,
    )
    expect(out.error).toBeUndefined()
    expect(out.created).toBe(2)
    expect(out.warnings.filter((warning) => warning.code === 'ARH_UNSUPPORTED_OPTION' || /permissionMode|permissionHandler|canUseTool/.test(warning.message))).toEqual([])
  })

  it('legacy permission keys have no effect: plan still denies, the legacy handlers are never called', async () => {
    const legacyCalls: string[] = []
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ id: 'w', name: 'write_file', input: {} }] }, { text: 'ok' }]),
      tools: [defineTool({ name: 'write_file', kind: 'write', execute: () => 'written' })],
      advanced: {
        permission: 'plan',
        permissionMode: 'yolo',
        permissionHandler: async () => (legacyCalls.push('permissionHandler'), { behavior: 'allow' }),
        canUseTool: async () => (legacyCalls.push('canUseTool'), { behavior: 'allow' }),
      } as never,
    })
    expect(result.toolCalls[0].output).toBe(`Tool execution aborted: ${PLAN_DENIAL}`)
    expect(legacyCalls).toEqual([])
  })

  it('a key known to neither SDK (a typo) is a ConfigError naming it', async () => {
    const model = scriptedModel([{ text: 'x' }])
    const inAdvanced = createAgent({ model, advanced: { toolTimeoutMS: 5 } } as never)
    await expect(inAdvanced).rejects.toBeInstanceOf(ConfigError)
    await expect(inAdvanced).rejects.toThrow(/toolTimeoutMS/)
    const topLevel = createAgent({ model, systemPromt: 'be nice' } as never)
    await expect(topLevel).rejects.toBeInstanceOf(ConfigError)
    await expect(topLevel).rejects.toThrow(/systemPromt/)
  })

  it('allowedTools / disallowedTools filter what the model is offered; allowedTools: [] offers none', async () => {
    const tools = ['alpha', 'beta', 'gamma'].map((name) => defineTool({ name, execute: () => name }))
    const base: AgentOptions = { model: 'm', apiKey: 'k', provider: 'openai-compatible', baseUrl: server.url + '/v1', tools }
    const offered = async (advanced: AgentOptions['advanced']) => {
      server.requests.length = 0
      server.reply(rawStream([sse(openaiChunks('ok'))]))
      await prompt('hi', { ...base, advanced })
      expect(server.requests).toHaveLength(1)
      return ((server.requests[0].body.tools ?? []) as any[]).map((tool) => tool.function.name)
    }
    expect(await offered({})).toEqual(['alpha', 'beta', 'gamma'])
    expect(await offered({ allowedTools: ['alpha', 'gamma'] })).toEqual(['alpha', 'gamma'])
    expect(await offered({ disallowedTools: ['beta'] })).toEqual(['alpha', 'gamma'])
    expect(await offered({ allowedTools: ['alpha', 'beta'], disallowedTools: ['beta'] })).toEqual(['alpha'])
    expect(await offered({ allowedTools: [] })).toEqual([])
  })

  it('toolTimeoutMs: at the deadline the tool’s signal aborts and the call fails "Tool execution timeout after <n>ms"', async () => {
    let signal: AbortSignal | undefined
    const { model, requests } = recordingModel([{ toolCalls: [{ id: 'slow1', name: 'slow', input: {} }] }, { text: 'moved on' }])
    const agent = await createAgent({
      model,
      tools: [
        defineTool({
          name: 'slow',
          execute: (_input, context) => {
            signal = context.signal
            return untilAborted(context.signal)
          },
        }),
      ],
      advanced: { toolTimeoutMs: 50 },
    })
    const started = Date.now()
    const result = await (await agent.send('go')).result()
    expect(Date.now() - started).toBeGreaterThanOrEqual(45)
    expect(signal?.aborted).toBe(true)
    expect(result.toolCalls[0]).toMatchObject({ output: 'Tool execution failed: Tool execution timeout after 50ms', isError: true, status: 'error' })
    expect(toolMessages(requests[1])).toEqual({ slow1: 'Tool execution failed: Tool execution timeout after 50ms' })
    expect(result).toMatchObject({ stopReason: 'done', result: 'moved on' })
    await agent.close()
  })

  it.each([0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2147483648, '50'])('toolTimeoutMs %s is a ConfigError with the exact message', async (value) => {
    const creating = createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { toolTimeoutMs: value as never } })
    await expect(creating).rejects.toBeInstanceOf(ConfigError)
    await expect(creating).rejects.toMatchObject({ message: TIMEOUT_RANGE })
  })

  it('toolTimeoutMs 2147483647 is accepted', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { toolTimeoutMs: 2147483647 } })
    await agent.close()
  })

  it('a tool still running after its signal aborted fails new tool calls closed and makes close() reject, until it settles', async () => {
    let release!: () => void
    const released = new Promise<void>((resolve) => (release = resolve))
    let settled = false
    const quickRuns: string[] = []
    const { model } = recordingModel((request) => {
      const last = request.messages.at(-1)
      if (last?.role === 'user') return last.content === 'first' ? { toolCalls: [{ id: 'stuck', name: 'stubborn', input: {} }] } : { toolCalls: [{ id: 'q2', name: 'quick', input: {} }] }
      if (last?.role === 'tool' && last.tool_call_id === 'stuck') return { toolCalls: [{ id: 'q1', name: 'quick', input: {} }] }
      return { text: 'end' }
    })
    const agent = await createAgent({
      model,
      tools: [
        // Ignores its signal: keeps running after the deadline until released.
        defineTool({
          name: 'stubborn',
          execute: async () => {
            await released
            settled = true
            return 'late'
          },
        }),
        defineTool({ name: 'quick', execute: (_input, context) => (quickRuns.push(context.toolCallId), 'quick ok') }),
      ],
      advanced: { toolTimeoutMs: 50 },
    })
    const first = await (await agent.send('first')).result()
    expect(first.toolCalls.map((call) => [call.id, call.output, call.isError])).toEqual([
      ['stuck', 'Tool execution failed: Tool execution timeout after 50ms', true],
      ['q1', TOOL_CLEANUP, true],
    ])
    expect(quickRuns).toEqual([])
    await expect(agent.close()).rejects.toMatchObject({ message: `Session runtime ${agent.sessionId} still has a tool execution cleaning up` })
    expect(agent.isClosed).toBe(false)

    release()
    await until(() => settled)
    // Once it settled, tools start again (retrying while the settlement is still being observed).
    const second = await onceSettled(async () => {
      const result = await (await agent.send('second')).result()
      if (result.toolCalls[0]?.output === TOOL_CLEANUP) throw new Error('still cleaning up')
      return result
    })
    expect(second.toolCalls.map((call) => call.output)).toEqual(['quick ok'])
    expect(quickRuns).toEqual(['q2'])
    await onceSettled(() => agent.close())
    expect(agent.isClosed).toBe(true)
  })
})

// ---------------------------------------------------------------------------------------------

describe('confirmationHandler / confirmationHandlerFactory (SPEC §6)', () => {
  type Confirmation = { approved: boolean; reason?: string; scope?: 'once' | 'session' }
  type Details = {
    toolName: string
    args: JsonObject
    title: string
    message: string
    abortSignal: AbortSignal
    kind: string
    affectedFiles: string[]
  }

  function setup(decide: (details: Details) => Confirmation | Promise<Confirmation>, turns?: ScriptedTurn[], extra: NonNullable<AgentOptions['advanced']> = {}) {
    const asked: Details[] = []
    const ran: JsonObject[] = []
    const handler = {
      requestConfirmation: async (details: Details) => {
        asked.push(details)
        return decide(details)
      },
    }
    const recorded = recordingModel(turns ?? [{ toolCalls: [{ id: 'sh1', name: 'shell', input: { cmd: 'ls' } }] }, { text: 'after' }])
    const options: AgentOptions = {
      model: recorded.model,
      tools: [
        defineTool<{ cmd: string }>({
          name: 'shell',
          kind: 'execute',
          parameters: { type: 'object', properties: { cmd: { type: 'string' } } },
          execute: (input) => (ran.push(input), `ran ${input.cmd}`),
        }),
      ],
      advanced: { permission: () => 'ask', confirmationHandler: handler, ...extra },
    }
    return { asked, ran, options, requests: recorded.requests }
  }

  it("'ask' goes to requestConfirmation({ toolName, args, title, message, abortSignal, kind, affectedFiles }); approve runs the tool", async () => {
    const { asked, ran, options } = setup(() => ({ approved: true }))
    const result = await prompt('go', options)
    expect(asked).toHaveLength(1)
    expect(asked[0]).toMatchObject({ toolName: 'shell', args: { cmd: 'ls' }, kind: 'execute', affectedFiles: [] })
    expect(typeof asked[0].title).toBe('string')
    expect(typeof asked[0].message).toBe('string')
    expect(asked[0].abortSignal).toBeInstanceOf(AbortSignal)
    expect(ran).toEqual([{ cmd: 'ls' }])
    expect(result).toMatchObject({ result: 'after', stopReason: 'done', toolCalls: [{ output: 'ran ls', isError: false }] })
  })

  it("{ behavior: 'ask' } from the permission function also asks", async () => {
    const { asked, ran, options } = setup(() => ({ approved: true }))
    options.advanced!.permission = () => ({ behavior: 'ask', message: 'Run a shell command?' })
    await prompt('go', options)
    expect(asked).toHaveLength(1)
    expect(ran).toHaveLength(1)
  })

  it("reject ends the run after the turn: 'Tool execution aborted: User rejected execution: <reason>', stopReason 'interrupted'", async () => {
    const { ran, options, requests } = setup(() => ({ approved: false, reason: 'not today' }))
    const agent = await createAgent(options)
    const response = await agent.send('go')
    const events = await collect(response.stream())
    const text = 'Tool execution aborted: User rejected execution: not today'
    expect(ofType(events, 'tool_result')[0]).toMatchObject({ output: text, isError: true })
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: text })
    const result = await response.result()
    expect(result).toMatchObject({ stopReason: 'interrupted', result: text, content: text })
    expect(await response.text()).toBe(text)
    expect(ran).toEqual([])
    expect(requests).toHaveLength(1)
    await agent.close()
  })

  it("reject without a reason says 'User rejected'", async () => {
    const { options } = setup(() => ({ approved: false }))
    const result = await prompt('go', options)
    expect(result.toolCalls[0].output).toBe('Tool execution aborted: User rejected execution: User rejected')
    expect(result.stopReason).toBe('interrupted')
  })

  it("a throwing handler: 'Tool execution aborted: User confirmation failed: <message>'; the tool does not run", async () => {
    const { ran, options } = setup(() => {
      throw new Error('ui down')
    })
    const result = await prompt('go', options)
    expect(result.toolCalls[0]).toMatchObject({ output: 'Tool execution aborted: User confirmation failed: ui down', isError: true })
    expect(ran).toEqual([])
  })

  it('a handler that outlives hookTimeoutMs fails the call as "User confirmation failed: …"', async () => {
    const { ran, options } = setup((details) => untilAborted(details.abortSignal), undefined, { hookTimeoutMs: 50 })
    const result = await prompt('go', options)
    expect(result.toolCalls[0].output).toMatch(/^Tool execution aborted: User confirmation failed: \S/)
    expect(ran).toEqual([])
  })

  it("scope: 'session' approves the same tool and arguments for the rest of the session", async () => {
    const { asked, ran, options } = setup(
      () => ({ approved: true, scope: 'session' }),
      [
        { toolCalls: [{ id: 'a', name: 'shell', input: { cmd: 'ls' } }] },
        { toolCalls: [{ id: 'b', name: 'shell', input: { cmd: 'ls' } }] },
        { toolCalls: [{ id: 'c', name: 'shell', input: { cmd: 'rm' } }] },
        { text: 'first done' },
        { toolCalls: [{ id: 'd', name: 'shell', input: { cmd: 'ls' } }] },
        { text: 'second done' },
      ],
    )
    const agent = await createAgent(options)
    expect(await (await agent.send('one')).text()).toBe('first done')
    expect(await (await agent.send('two')).text()).toBe('second done')
    expect(asked.map((details) => details.args)).toEqual([{ cmd: 'ls' }, { cmd: 'rm' }])
    expect(ran).toEqual([{ cmd: 'ls' }, { cmd: 'ls' }, { cmd: 'rm' }, { cmd: 'ls' }])
    await agent.close()
  })

  it('confirmationHandlerFactory(sessionId) supplies the handler', async () => {
    const factoryCalls: string[] = []
    const { asked, ran, options } = setup(() => ({ approved: true }))
    const handler = options.advanced!.confirmationHandler!
    delete options.advanced!.confirmationHandler
    options.advanced!.confirmationHandlerFactory = (sessionId: string) => (factoryCalls.push(sessionId), handler)
    const agent = await createAgent(options)
    await (await agent.send('go')).text()
    expect(factoryCalls.length).toBeGreaterThanOrEqual(1)
    expect(new Set(factoryCalls)).toEqual(new Set([agent.sessionId]))
    expect(asked).toHaveLength(1)
    expect(ran).toHaveLength(1)
    await agent.close()
  })

  it("the 'default' preset asks only for non-readonly tools", async () => {
    const asked: string[] = []
    const result = await prompt('go', {
      model: scriptedModel([
        {
          toolCalls: [
            { id: 'r', name: 'look', input: {} },
            { id: 'x', name: 'shell', input: {} },
          ],
        },
        { text: 'ok' },
      ]),
      tools: [
        defineTool({ name: 'look', kind: 'readonly', execute: () => 'looked' }),
        defineTool({ name: 'shell', kind: 'execute', execute: () => 'ran' }),
      ],
      advanced: {
        permission: 'default',
        confirmationHandler: { requestConfirmation: async (details: Details) => (asked.push(details.toolName), { approved: true }) },
      },
    })
    expect(asked).toEqual(['shell'])
    expect(result.toolCalls.map((call) => call.output)).toEqual(['looked', 'ran'])
  })

  // SPEC §6 over Blade: Blade's composite turns 'allow' into an ask when a confirmation handler
  // exists (research §3.3); SPEC makes the permission function's 'allow' final.
  it("'allow' from the permission function runs the tool without asking", async () => {
    const { asked, ran, options } = setup(() => ({ approved: false }))
    options.advanced!.permission = () => 'allow'
    const result = await prompt('go', options)
    expect(asked).toEqual([])
    expect(ran).toHaveLength(1)
    expect(result.stopReason).toBe('done')
  })
})

// ---------------------------------------------------------------------------------------------

describe("Blade's texts", () => {
  it('send while the previous response is unsettled rejects SESSION_BUSY with Blade’s message; after it settles send works', async () => {
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const agent = await createAgent({
      model: scriptedModel(async () => {
        await gate
        return { text: 'answer' }
      }),
    })
    const first = await agent.send('one')
    const busy = agent.send('two')
    await expect(busy).rejects.toBeInstanceOf(SdkError)
    await expect(busy).rejects.toMatchObject({ code: 'SESSION_BUSY', message: BUSY })
    release()
    expect(await first.text()).toBe('answer')
    expect(await (await agent.send('three')).text()).toBe('answer')
    await agent.close()
    await expect(agent.send('four')).rejects.toMatchObject({ code: 'SESSION_CLOSED', message: 'Session is closed' })
  })

  it("plan mode denies modification tools with Blade's text and lets read-only tools run; the run goes on", async () => {
    const ran: string[] = []
    const result = await prompt('go', {
      model: scriptedModel([
        {
          toolCalls: [
            { id: 'w', name: 'Write', input: { file_path: 'a.txt' } },
            { id: 'b', name: 'Bash', input: { command: 'ls' } },
            { id: 'r', name: 'Read', input: { file_path: 'a.txt' } },
          ],
        },
        { text: 'planned' },
      ]),
      tools: [
        defineTool({ name: 'Write', kind: 'write', execute: () => (ran.push('Write'), 'wrote') }),
        defineTool({ name: 'Bash', kind: 'execute', execute: () => (ran.push('Bash'), 'ran') }),
        defineTool({ name: 'Read', kind: 'readonly', execute: () => (ran.push('Read'), 'read') }),
      ],
      advanced: { permission: 'plan' },
    })
    expect(result.toolCalls.map((call) => [call.output, call.isError])).toEqual([
      [`Tool execution aborted: ${PLAN_DENIAL}`, true],
      [`Tool execution aborted: ${PLAN_DENIAL}`, true],
      ['read', false],
    ])
    expect(ran).toEqual(['Read'])
    expect(result).toMatchObject({ stopReason: 'done', result: 'planned' })
  })

  it('an interrupting deny ends the run after the turn; content/result is the call’s text, result subtype success', async () => {
    const { model, requests } = recordingModel([{ toolCalls: [{ id: 'd1', name: 'drop_table', input: { table: 'users' } }] }, { text: 'never reached' }])
    const completed: HookInput[] = []
    const agent = await createAgent({
      model,
      tools: [defineTool({ name: 'drop_table', kind: 'execute', execute: () => 'dropped' })],
      advanced: {
        permission: () => ({ behavior: 'deny', message: 'Destructive SQL is not allowed', interrupt: true }),
        hooks: {
          TaskCompleted: [
            async (input) => {
              completed.push(input)
              return { action: 'continue' }
            },
          ],
        },
      },
    })
    const response = await agent.send('drop it')
    const events = await collect(response.stream())
    const text = 'Tool execution aborted: Destructive SQL is not allowed'
    expect(ofType(events, 'tool_result')[0]).toMatchObject({ output: text, isError: true })
    expect(events.at(-1)).toMatchObject({ type: 'result', subtype: 'success', content: text })
    expect(shape(events).slice(-2)).toEqual(['usage', 'result'])
    const result = await response.result()
    expect(result).toMatchObject({ stopReason: 'interrupted', result: text, content: text, turnsCount: 1 })
    expect(await response.text()).toBe(text)
    expect(requests).toHaveLength(1)
    // Blade: TaskCompleted runs with success: false when the loop exits on an interrupting deny.
    expect(completed).toHaveLength(1)
    expect(completed[0]).toMatchObject({ success: false })
    await agent.close()
  })
})

// ---------------------------------------------------------------------------------------------

describe('what must keep matching Blade (regressions)', () => {
  it('hook order around a run: SessionStart, UserPromptSubmit, PreToolUse, PermissionRequest, permission, execute, PostToolUse/PostToolUseFailure, TaskCompleted, SessionEnd once', async () => {
    const log: string[] = []
    const hook = continueHook(log)
    const agent = await createAgent({
      model: scriptedModel([
        { toolCalls: [{ id: 'ok1', name: 'works', input: {} }] },
        { toolCalls: [{ id: 'bad1', name: 'breaks', input: {} }] },
        { text: 'done' },
      ]),
      tools: [
        defineTool({ name: 'works', execute: () => (log.push('execute:works'), 'fine') }),
        defineTool({
          name: 'breaks',
          execute: () => {
            log.push('execute:breaks')
            throw new Error('kaput')
          },
        }),
      ],
      advanced: {
        hooks: {
          SessionStart: [hook],
          UserPromptSubmit: [hook],
          PreToolUse: [hook],
          PermissionRequest: [hook],
          PostToolUse: [hook],
          PostToolUseFailure: [hook],
          TaskCompleted: [hook],
          SessionEnd: [hook],
        },
        permission: (request) => (log.push(`permission:${request.toolName}`), 'allow'),
      },
    })
    expect(log).toEqual(['SessionStart'])
    const result = await (await agent.send('go')).result()
    expect(result.toolCalls.map((call) => call.output)).toEqual(['fine', 'Tool execution failed: kaput'])
    await agent.close()
    await agent.close()
    const expected = [
      'SessionStart',
      'UserPromptSubmit',
      'PreToolUse:works',
      'PermissionRequest:works',
      'permission:works',
      'execute:works',
      'PostToolUse:works',
      'PreToolUse:breaks',
      'PermissionRequest:breaks',
      'permission:breaks',
      'execute:breaks',
      'PostToolUseFailure:breaks',
      'TaskCompleted',
      'SessionEnd',
    ]
    expect(log).toEqual(expected)
    await agent[Symbol.asyncDispose]()
    expect(log).toEqual(expected)
  })

  it("permission texts: 'deny' → Denied by permission policy; a throw → Permission check failed: <message>", async () => {
    const result = await prompt('go', {
      model: scriptedModel([
        {
          toolCalls: [
            { id: 'a', name: 'guarded', input: { mode: 'deny' } },
            { id: 'b', name: 'guarded', input: { mode: 'message' } },
            { id: 'c', name: 'guarded', input: { mode: 'throw' } },
          ],
        },
        { text: 'ok' },
      ]),
      tools: [defineTool({ name: 'guarded', execute: () => 'ran' })],
      advanced: {
        permission: (request) => {
          if (request.input.mode === 'deny') return 'deny'
          if (request.input.mode === 'message') return { behavior: 'deny', message: 'Not on Fridays' }
          throw new Error('policy service unreachable')
        },
      },
    })
    expect(result.toolCalls.map((call) => call.output)).toEqual([
      'Tool execution aborted: Denied by permission policy',
      'Tool execution aborted: Not on Fridays',
      'Tool execution aborted: Permission check failed: policy service unreachable',
    ])
    expect(result.stopReason).toBe('done')
  })

  it('hook texts: PreToolUse skip/abort and a PostToolUse abort keep their Blade texts', async () => {
    const result = await prompt('go', {
      model: scriptedModel([
        {
          toolCalls: [
            { id: 's', name: 'skipped', input: {} },
            { id: 'a', name: 'aborted', input: {} },
            { id: 'p', name: 'postAborted', input: {} },
          ],
        },
        { text: 'ok' },
      ]),
      tools: ['skipped', 'aborted', 'postAborted'].map((name) => defineTool({ name, execute: () => 'ran' })),
      advanced: {
        hooks: {
          PreToolUse: [
            async (input) =>
              input.toolName === 'skipped' ? { action: 'skip' } : input.toolName === 'aborted' ? { action: 'abort' } : { action: 'continue' },
          ],
          PostToolUse: [async (input) => (input.toolName === 'postAborted' ? { action: 'abort' } : { action: 'continue' })],
        },
      },
    })
    expect(result.toolCalls.map((call) => call.output)).toEqual([
      'Tool "skipped" was skipped by hook',
      'Tool execution aborted: Tool "aborted" was aborted by hook',
      'Tool execution failed: Tool "postAborted" post-execution hook aborted',
    ])
  })
})
