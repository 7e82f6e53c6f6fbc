// Compaction (SPEC §8.5), written from the contract: when the next model call would pass the
// threshold, PreCompact fires (and may skip it), the older messages — never a tool call without
// its result, the last `keepRecentTurns` turns kept verbatim — become one summary written by
// `summarize(messages)` or by the model, PostCompact reports it, and a failure fires
// CompactFailure while the run goes on uncompacted. The count is the model's reported prompt
// tokens plus an estimate for what was added since.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  ConfigError,
  createAgent,
  resumeAgent,
  defineTool,
  scriptedModel,
  type AgentHook,
  type HookEventPayload,
  type JsonObject,
  type Message,
  type ScriptRequest,
  type StreamEvent,
} from '../index.js'
import { openaiChunks, rawStream, sse, useServer } from './helpers/server.js'

const server = useServer()

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a key up',
  parameters: { type: 'object', properties: { key: { type: 'string' } }, required: ['key'] },
  execute: ({ key }: { key: string }) => `value of ${key} `.repeat(10),
})

type Seen = { tools: number; messages: Message[] }

/** A model that asks for `lookup` `calls` times, then answers; it records what it was sent. */
function model(calls: number, options: { inputTokens?: number; summary?: string } = {}) {
  const seen: Seen[] = []
  let asked = 0
  const script = scriptedModel((request: ScriptRequest) => {
    const messages = structuredClone(request.messages) as Message[]
    seen.push({ tools: request.tools.length, messages })
    const usage = { inputTokens: options.inputTokens ?? 0, outputTokens: 1 }
    if (request.tools.length === 0) return { text: options.summary ?? 'the model summary', usage }
    if (asked < calls) {
      asked += 1
      return { toolCalls: [{ id: `call-${asked}`, name: 'lookup', input: { key: `k${asked}` } }], usage }
    }
    return { text: 'done', usage }
  })
  return { script, seen }
}

type Fired = { type: string; payload: Record<string, unknown> }
function recorder(preCompact?: () => unknown) {
  const fired: Fired[] = []
  const keep = (type: string) => (event: HookEventPayload) => {
    const { abortSignal: _signal, mock: _mock, ...rest } = event as any
    fired.push({ type, payload: structuredClone(rest) })
    return type === 'PreCompact' ? (preCompact?.() as any) : undefined
  }
  const hooks: AgentHook[] = [
    { id: 'pre', type: 'beforeCompact', handler: keep('PreCompact') },
    { id: 'post', type: 'afterCompact', handler: keep('PostCompact') },
    { id: 'failed', type: 'onCompactError', handler: keep('CompactFailure') },
  ]
  return { fired, hooks }
}

const roles = (messages: Message[]) => messages.map((message) => message.role)
const SUMMARY_PREFIX = 'Summary of the conversation so far:\n'

describe('compaction', () => {
  it('replaces the older messages with summarize()’s summary, keeping the last two turns, between PreCompact and PostCompact', async () => {
    const { script, seen } = model(3)
    const { fired, hooks } = recorder()
    const given: JsonObject[][] = []
    const agent = await createAgent({
      model: script,
      systemPrompt: 'be brief',
      tools: [lookup],
      advanced: {
        hooks,
        compaction: {
          thresholdTokens: 60,
          summarize: (messages) => {
            given.push(structuredClone(messages))
            return 'they looked up k1'
          },
        },
      },
    })
    const result = await (await agent.send('look things up')).result()
    expect(result.content).toBe('done')
    // Call 1: [user]. Call 2: [user, a1, t1]. Call 3 would be [user, a1, t1, a2, t2] — past the
    // threshold, but only two turns exist, so nothing is older than what is kept.
    // Call 4 would be 7 messages: the prompt and turn 1 become the summary.
    const last = seen[seen.length - 1]!.messages
    expect(roles(last)).toEqual(['system', 'user', 'assistant', 'tool', 'assistant', 'tool'])
    expect(last[1]).toEqual({ role: 'user', content: `${SUMMARY_PREFIX}they looked up k1` })
    expect((last[3] as any).tool_call_id).toBe('call-2')
    expect((last[5] as any).tool_call_id).toBe('call-3')
    // summarize got exactly the older messages: the prompt and the first call with its result.
    expect(given).toHaveLength(1)
    expect(given[0]!.map((message) => message.role)).toEqual(['user', 'assistant', 'tool'])
    expect(given[0]![0]).toEqual({ role: 'user', content: 'look things up' })
    expect((given[0]![2] as any).tool_call_id).toBe('call-1')
    // The events, in order, with the contract's fields.
    expect(fired.map((event) => event.type)).toEqual(['PreCompact', 'PostCompact'])
    const [pre, post] = fired.map((event) => event.payload)
    expect(pre).toMatchObject({ event: 'PreCompact', sessionId: agent.sessionId, messageCount: 7, stepIndex: 3 })
    expect(typeof pre!.operationId).toBe('string')
    expect(pre!.tokenCount).toBeGreaterThanOrEqual(60)
    expect(post).toMatchObject({
      event: 'PostCompact',
      sessionId: agent.sessionId,
      operationId: pre!.operationId,
      messagesBefore: 7,
      messagesAfter: 5,
      summary: 'they looked up k1',
      stepIndex: 3,
    })
    expect(post!.groupId).toMatch(/^[0-9a-f-]{36}$/)
    // The session keeps the compacted conversation.
    expect(roles(agent.messages)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant'])
    await agent.close()
  })

  it('without summarize the model writes the summary in a call without tools, and its text is not streamed', async () => {
    const { script, seen } = model(3, { summary: 'written by the model' })
    const agent = await createAgent({ model: script, tools: [lookup], advanced: { compaction: { thresholdTokens: 60 } } })
    const events: StreamEvent[] = []
    for await (const event of (await agent.send('look things up')).stream()) events.push(event)
    const summaryCall = seen.find((call) => call.tools === 0)!
    expect(summaryCall).toBeDefined()
    expect(roles(summaryCall.messages)).toEqual(['user', 'assistant', 'tool', 'user'])
    expect((summaryCall.messages[3] as any).content).toMatch(/^Summarize the conversation so far/)
    const last = seen[seen.length - 1]!
    expect(last.tools).toBe(1)
    expect(last.messages[0]).toEqual({ role: 'user', content: `${SUMMARY_PREFIX}written by the model` })
    const deltas = events.filter((event) => event.type === 'content').map((event: any) => event.delta)
    expect(deltas).toEqual(['done'])
    // The summary call's usage counts: five model calls of one output token each.
    const usage = events.find((event) => event.type === 'usage') as any
    expect(usage.usage.outputTokens).toBe(5)
    await agent.close()
  })

  it('a PreCompact hook returning abort skips that compaction', async () => {
    const { script, seen } = model(3)
    const { fired, hooks } = recorder(() => ({ action: 'abort' }))
    let summarized = 0
    const agent = await createAgent({
      model: script,
      tools: [lookup],
      advanced: { hooks, compaction: { thresholdTokens: 60, summarize: () => `s${++summarized}` } },
    })
    expect((await (await agent.send('look things up')).result()).content).toBe('done')
    expect(summarized).toBe(0)
    expect(roles(seen[seen.length - 1]!.messages)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant', 'tool'])
    expect(fired.map((event) => event.type)).toEqual(['PreCompact'])
    await agent.close()
  })

  it('a failed summary fires CompactFailure and the run goes on uncompacted', async () => {
    const { script, seen } = model(3)
    const { fired, hooks } = recorder()
    const agent = await createAgent({
      model: script,
      tools: [lookup],
      advanced: {
        hooks,
        compaction: {
          thresholdTokens: 60,
          summarize: () => {
            throw new Error('summarizer down')
          },
        },
      },
    })
    expect((await (await agent.send('look things up')).result()).content).toBe('done')
    expect(roles(seen[seen.length - 1]!.messages)).toHaveLength(7)
    expect(fired.map((event) => event.type)).toEqual(['PreCompact', 'CompactFailure'])
    expect(fired[1]!.payload).toMatchObject({ event: 'CompactFailure', error: 'summarize failed: summarizer down', stepIndex: 3 })
    expect(fired[1]!.payload.tokenCount).toBe(fired[0]!.payload.tokenCount)
    await agent.close()
  })

  it('a summary that is not text is a failure naming what came back', async () => {
    const { script } = model(3)
    const { fired, hooks } = recorder()
    const agent = await createAgent({
      model: script,
      tools: [lookup],
      advanced: { hooks, compaction: { thresholdTokens: 60, summarize: () => 42 as unknown as string } },
    })
    expect((await (await agent.send('look things up')).result()).content).toBe('done')
    expect(fired[1]!.payload.error).toBe('summarize returned 42; it must return the summary as a non-empty string')
    await agent.close()
  })

  it('counts the model’s reported prompt tokens plus an estimate of what was added since', async () => {
    // Reported 5000 prompt tokens: every later call is past a threshold of 5000, though its
    // text alone is a few dozen tokens; the third is the first with a turn older than the kept one.
    const { script } = model(3, { inputTokens: 5000 })
    const { fired, hooks } = recorder()
    const agent = await createAgent({
      model: script,
      tools: [lookup],
      advanced: { hooks, compaction: { thresholdTokens: 5000, keepRecentTurns: 1, summarize: () => 'short' } },
    })
    await (await agent.send('look things up')).result()
    const pre = fired.filter((event) => event.type === 'PreCompact').map((event) => event.payload)
    expect(pre[0]).toMatchObject({ messageCount: 5, stepIndex: 2 })
    expect(pre[0]!.tokenCount as number).toBeGreaterThan(5000)
    expect(pre[0]!.tokenCount as number).toBeLessThan(5100)
    await agent.close()
    // Without reports, the same conversation stays far below the threshold.
    const quiet = model(3)
    const watched = recorder()
    const other = await createAgent({
      model: quiet.script,
      tools: [lookup],
      advanced: { hooks: watched.hooks, compaction: { thresholdTokens: 5000, keepRecentTurns: 1, summarize: () => 'short' } },
    })
    await (await other.send('look things up')).result()
    expect(watched.fired).toEqual([])
    await other.close()
  })

  it('keepRecentTurns: 0 summarizes every answered turn', async () => {
    const { script, seen } = model(2)
    const agent = await createAgent({
      model: script,
      tools: [lookup],
      advanced: { compaction: { thresholdTokens: 40, keepRecentTurns: 0, summarize: () => 'all of it' } },
    })
    await (await agent.send('look things up')).result()
    const last = seen[seen.length - 1]!.messages
    expect(last).toEqual([{ role: 'user', content: `${SUMMARY_PREFIX}all of it` }])
    await agent.close()
  })

  it('bad compaction options are ConfigErrors naming the field', async () => {
    const cases: Array<[unknown, string]> = [
      [{ thresholdTokens: 0 }, 'advanced.compaction.thresholdTokens'],
      [{ keepRecentTurns: -1 }, 'advanced.compaction.keepRecentTurns'],
      [{ summarize: 'yes' }, 'advanced.compaction.summarize'],
      [{ treshold: 5 }, 'advanced.compaction.treshold'],
      ['on', 'advanced.compaction'],
    ]
    for (const [compaction, field] of cases) {
      const failed = await createAgent({ model: model(0).script, advanced: { compaction: compaction as any } }).then(
        () => null,
        (error: unknown) => error,
      )
      expect(failed).toBeInstanceOf(ConfigError)
      expect((failed as Error).message).toContain(field)
    }
  })

  it('over HTTP: the server’s reported prompt tokens trigger it, and the model writes the summary in a request without tools', async () => {
    const call = (id: string) => rawStream([sse(openaiChunks('', [{ id, name: 'lookup', arguments: `{"key":"${id}"}` }], { prompt_tokens: 900, completion_tokens: 3 }))])
    server.reply(call('a'), call('b'), rawStream([sse(openaiChunks('the summary', [], { prompt_tokens: 50, completion_tokens: 4 }))]), rawStream([sse(openaiChunks('done'))]))
    const { fired, hooks } = recorder()
    const agent = await createAgent({
      model: 'gpt-test',
      apiKey: 'sk-test',
      baseUrl: server.url + '/v1',
      tools: [lookup],
      advanced: { hooks, maxContextTokens: 1000, compaction: { keepRecentTurns: 1 } },
    })
    expect((await (await agent.send('look things up')).result()).content).toBe('done')
    const bodies = server.requests.map((request) => request.body)
    expect(bodies).toHaveLength(4)
    // The third request writes the summary: no tools, the older messages and the instruction.
    expect(bodies[2].tools).toBeUndefined()
    expect(bodies[2].messages.map((message: any) => message.role)).toEqual(['user', 'assistant', 'tool', 'user'])
    expect(bodies[2].messages[3].content).toMatch(/^Summarize the conversation so far/)
    // The fourth goes on from the summary and the kept turn.
    expect(bodies[3].messages.map((message: any) => message.role)).toEqual(['user', 'assistant', 'tool'])
    expect(bodies[3].messages[0].content).toBe(`${SUMMARY_PREFIX}the summary`)
    expect(bodies[3].messages[1].tool_calls[0].id).toBe('b')
    // Threshold: 80% of maxContextTokens; 900 reported plus the estimate of turn b passes it.
    expect(fired.map((event) => event.type)).toEqual(['PreCompact', 'PostCompact'])
    expect(fired[0]!.payload.tokenCount as number).toBeGreaterThan(900)
    await agent.close()
  })

  it('with a SQLite store, the compacted conversation is what a resumed session continues from', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'arh-compaction-'))
    try {
      const store = { sqlite: join(dir, 'sessions.db') }
      const { script } = model(3)
      const agent = await createAgent({ model: script, tools: [lookup], advanced: { store, compaction: { thresholdTokens: 60, summarize: () => 'kept short' } } })
      await (await agent.send('look things up')).result()
      const sessionId = agent.sessionId
      await agent.close()
      const later = await resumeAgent({ model: scriptedModel([{ text: 'again' }]), tools: [lookup], advanced: { store }, sessionId })
      expect(later.messages[0]).toEqual({ role: 'user', content: `${SUMMARY_PREFIX}kept short` })
      expect(roles(later.messages)).toEqual(['user', 'assistant', 'tool', 'assistant', 'tool', 'assistant'])
      await later.close()
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
