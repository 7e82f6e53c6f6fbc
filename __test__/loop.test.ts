// The agent loop driven by scriptedModel: events, tool calls, results, limits and session state.
import { describe, expect, it } from 'vitest'
import { createAgent, defineTool, prompt, scriptedModel, SdkError, type ScriptRequest, type StreamEvent, type ToolContext } from '../index.js'

const echo = defineTool<{ text: string }>({
  name: 'echo',
  description: 'Echoes text',
  parameters: { type: 'object', properties: { text: { type: 'string' } } },
  execute: (input) => `echo:${input.text}`,
})

async function collect(stream: AsyncIterable<StreamEvent>) {
  const events: StreamEvent[] = []
  for await (const event of stream) events.push(event)
  return events
}

describe('a run', () => {
  it('streams turn_start, content, tool_use, tool_result, turn_end, usage and result in order', async () => {
    const agent = await createAgent({
      model: scriptedModel([
        { text: 'let me check', toolCalls: [{ id: 'c1', name: 'echo', input: { text: 'hi' } }], usage: { inputTokens: 10, outputTokens: 4 } },
        { text: 'done', usage: { inputTokens: 20, outputTokens: 2 } },
      ]),
      tools: [echo],
    })
    const response = await agent.send('go')
    const events = await collect(response.stream())
    const sessionId = agent.sessionId
    const usage = { inputTokens: 30, outputTokens: 6, totalTokens: 36, maxContextTokens: 128000 }
    expect(events).toEqual([
      { type: 'turn_start', turn: 1, sessionId },
      { type: 'content', delta: 'let me check', sessionId },
      { type: 'tool_use', id: 'c1', name: 'echo', input: { text: 'hi' }, sessionId },
      { type: 'tool_result', id: 'c1', name: 'echo', output: 'echo:hi', isError: false, status: 'success', sessionId },
      { type: 'turn_end', turn: 1, finishReason: 'tool_calls', sessionId },
      { type: 'turn_start', turn: 2, sessionId },
      { type: 'content', delta: 'done', sessionId },
      { type: 'turn_end', turn: 2, finishReason: 'stop', sessionId },
      { type: 'usage', usage, sessionId },
      {
        type: 'result',
        subtype: 'success',
        content: 'done',
        result: {
          result: 'done',
          toolCalls: [
            { id: 'c1', name: 'echo', input: { text: 'hi' }, output: 'echo:hi', duration: expect.any(Number), isError: false, status: 'success' },
          ],
          usage,
          duration: expect.any(Number),
          turnsCount: 2,
          content: 'done',
          turns: 2,
          stopReason: 'done',
        },
        sessionId,
      },
    ])
    expect(await response.text()).toBe('done')
    expect(response.isSettled).toBe(true)
    await agent.close()
  })

  it('replays the stream from the first event on every call, and textStream yields the deltas', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'hello' }]) })
    const response = await agent.send('hi')
    const first = await collect(response.stream())
    const second = await collect(response.stream())
    expect(second).toEqual(first)
    expect(second[0]).toBe(first[0])
    const deltas: string[] = []
    for await (const delta of response.textStream()) deltas.push(delta)
    expect(deltas).toEqual(['hello'])
    await agent.close()
  })

  it('result() first leaves every event for a later stream(), whose result is the same object', async () => {
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'echo', input: { text: 'a' } }] }, { text: 'done' }]),
      tools: [echo],
    })
    const response = await agent.send('go')
    const result = await response.result()
    expect(result.toolCalls.map((call) => call.output)).toEqual(['echo:a'])
    expect(await response.result()).toBe(result)
    const events = await collect(response.stream())
    expect(events.map((event) => event.type)).toEqual(['turn_start', 'tool_use', 'tool_result', 'turn_end', 'turn_start', 'content', 'turn_end', 'usage', 'result'])
    const last = events.at(-1)
    expect(last?.type === 'result' && last.result).toBe(result)
    await agent.close()
  })

  it('result() resolves only after on() listeners have seen every event, the result included', async () => {
    const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    // The run ends while a listener still works on an earlier event: its outcome is then
    // published and waiting, and result() must still wait for every listener.
    const slowEcho = defineTool<{ text: string }>({ name: 'echo', parameters: echo.parameters, execute: async (input) => (await pause(10), `echo:${input.text}`) })
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'echo', input: { text: 'a' } }] }, { text: 'done' }]),
      tools: [slowEcho],
    })
    const response = await agent.send('go')
    const seen: string[] = []
    response
      .on('tool_use', async (event) => {
        await pause(60)
        seen.push(`tool_use ${event.id}`)
      })
      .on('result', () => void seen.push('result'))
    expect((await response.result()).content).toBe('done')
    expect(seen).toEqual(['tool_use c1', 'result'])
    await agent.close()
  })

  it('gives stream() each tool event as it happens, even while a textStream() waits for text', async () => {
    let finish!: (value: string) => void
    const slow = defineTool({ name: 'slow', parameters: { type: 'object' }, execute: () => new Promise<string>((resolve) => (finish = resolve)) })
    const agent = await createAgent({ model: scriptedModel([{ toolCalls: [{ id: 's1', name: 'slow', input: {} }] }, { text: 'after' }]), tools: [slow] })
    const response = await agent.send('go')
    const deltas: string[] = []
    const reading = (async () => {
      for await (const delta of response.textStream()) deltas.push(delta)
    })()
    // The text reader is waiting while the tool runs; a stream() reader sees the call now.
    const events = response.stream()[Symbol.asyncIterator]()
    expect((await events.next()).value).toEqual({ type: 'turn_start', turn: 1, sessionId: agent.sessionId })
    expect((await events.next()).value).toEqual({ type: 'tool_use', id: 's1', name: 'slow', input: {}, sessionId: agent.sessionId })
    expect(deltas).toEqual([])
    finish('slow done')
    expect((await events.next()).value).toMatchObject({ type: 'tool_result', output: 'slow done' })
    await reading
    expect(deltas).toEqual(['after'])
    await agent.close()
  })

  it('keeps the conversation in agent.messages, in the OpenAI chat shape, without the system prompt', async () => {
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'a', name: 'echo', input: { text: 'x' } }] }, { text: 'ok' }, { text: 'second' }]),
      systemPrompt: 'be brief',
      tools: [echo],
    })
    await (await agent.send('one')).result()
    await (await agent.send([{ type: 'text', text: 'two' }])).result()
    expect(agent.messages).toEqual([
      { role: 'user', content: 'one' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function', function: { name: 'echo', arguments: '{"text":"x"}' } }] },
      { role: 'tool', tool_call_id: 'a', content: 'echo:x' },
      { role: 'assistant', content: 'ok' },
      { role: 'user', content: [{ type: 'text', text: 'two' }] },
      { role: 'assistant', content: 'second' },
    ])
    await agent.close()
  })

  it('gives the function form of scriptedModel what the model would be sent', async () => {
    const seen: ScriptRequest[] = []
    const agent = await createAgent({
      model: scriptedModel((request) => {
        seen.push(request)
        return request.turn === 1 ? { toolCalls: [{ id: 't', name: 'echo', input: { text: 'q' } }] } : { text: 'fin' }
      }),
      systemPrompt: 'sys',
      tools: [echo],
    })
    expect(await (await agent.send('ask')).text()).toBe('fin')
    expect(seen).toHaveLength(2)
    expect(seen[0]).toEqual({
      turn: 1,
      messages: [
        { role: 'system', content: 'sys' },
        { role: 'user', content: 'ask' },
      ],
      tools: [{ name: 'echo', description: 'Echoes text', parameters: { type: 'object', properties: { text: { type: 'string' } } } }],
    })
    expect(seen[1].messages.slice(2)).toEqual([
      { role: 'assistant', content: null, tool_calls: [{ id: 't', type: 'function', function: { name: 'echo', arguments: '{"text":"q"}' } }] },
      { role: 'tool', tool_call_id: 't', content: 'echo:q' },
    ])
    await agent.close()
  })

  it('a tool without parameters is sent to the model as taking an empty object', async () => {
    const seen: any[] = []
    await prompt('go', { model: scriptedModel((request) => (seen.push(request.tools), { text: 'ok' })), tools: [defineTool({ name: 'bare', execute: () => 'x' })] })
    expect(seen[0]).toEqual([{ name: 'bare', parameters: { type: 'object', properties: {} } }])
  })

  it('prompt() creates, sends and closes in one call', async () => {
    const result = await prompt('hi', { model: scriptedModel([{ text: 'one-shot' }]) })
    expect(result.content).toBe('one-shot')
    expect(result.turns).toBe(1)
  })
})

describe('scriptedModel', () => {
  it('plays its script from the first turn for every agent made with it', async () => {
    const model = scriptedModel([{ text: 'first turn' }])
    expect((await prompt('one', { model })).content).toBe('first turn')
    expect((await prompt('two', { model })).content).toBe('first turn')
  })
})

describe('prompt()', () => {
  it('closes its agent: SessionEnd runs once, after a run that succeeded and after one that failed', async () => {
    let ends = 0
    const advanced = { hooks: { SessionEnd: [() => (ends++, { action: 'continue' as const })] } }
    expect((await prompt('go', { model: scriptedModel([{ text: 'fine' }]), advanced })).content).toBe('fine')
    expect(ends).toBe(1)
    await expect(prompt('go', { model: scriptedModel([]), advanced })).rejects.toThrow('scriptedModel ran out of turns')
    expect(ends).toBe(2)
  })
})

describe('tool calls', () => {
  it('turns every kind of tool outcome into the text the model is sent', async () => {
    const boom = new Error('disk full')
    const tools = [
      defineTool({ name: 'str', execute: () => 'plain' }),
      defineTool({ name: 'bang', execute: () => '!{"message":"not a failure"}' }),
      defineTool({ name: 'empty', execute: () => '' }),
      defineTool({ name: 'obj', execute: async () => ({ b: 1, a: [true, null], c: 1.5 }) }),
      defineTool({ name: 'num', execute: () => 42 }),
      defineTool({ name: 'nul', execute: () => null }),
      defineTool({ name: 'void', execute: () => undefined }),
      defineTool({ name: 'ok', execute: () => ({ status: 'success' as const, model: { n: 1 } }) }),
      defineTool({ name: 'err', execute: () => ({ status: 'error' as const, error: { message: 'bad input' } }) }),
      defineTool({ name: 'throws', execute: () => { throw boom } }),
      defineTool({ name: 'rejects', execute: async () => Promise.reject(new TypeError('nope')) }),
      defineTool({ name: 'throwsString', execute: () => { throw 'just a string' } }),
    ]
    const calls = tools.map((tool, index) => ({ id: `c${index}`, name: tool.name, input: {} }))
    const result = await prompt('go', { model: scriptedModel([{ toolCalls: calls }, { text: 'end' }]), tools })
    expect(result.toolCalls.map((call) => [call.name, call.status, call.output])).toEqual([
      ['str', 'success', 'plain'],
      ['bang', 'success', '!{"message":"not a failure"}'],
      ['empty', 'success', ''],
      ['obj', 'success', '{"b":1,"a":[true,null],"c":1.5}'],
      ['num', 'success', '42'],
      ['nul', 'success', 'null'],
      ['void', 'success', ''],
      ['ok', 'success', '{"n":1}'],
      ['err', 'error', 'Tool execution failed: bad input'],
      ['throws', 'error', 'Tool execution failed: disk full'],
      ['rejects', 'error', 'Tool execution failed: nope'],
      ['throwsString', 'error', 'Tool execution failed: just a string'],
    ])
  })

  it('fails calls of unknown tools and calls whose arguments are not a JSON object, without running anything', async () => {
    let runs = 0
    const counted = defineTool({ name: 'counted', execute: () => { runs++; return 'ran' } })
    const result = await prompt('go', {
      model: scriptedModel([
        {
          toolCalls: [
            { id: 'u', name: 'missing', input: {} },
            { id: 'p', name: 'counted', arguments: '{"path": ' },
            { id: 'a', name: 'counted', arguments: '[1, 2]' },
          ],
        },
        { text: 'end' },
      ]),
      tools: [counted],
    })
    expect(result.toolCalls.map((call) => call.output)).toEqual([
      'Tool execution failed: Tool "missing" not found',
      'Tool execution failed: arguments are not valid JSON: EOF while parsing a value at line 1 column 9',
      'Tool execution failed: arguments must be a JSON object (got an array)',
    ])
    expect(result.toolCalls.every((call) => call.status === 'error')).toBe(true)
    expect(runs).toBe(0)
  })

  it('shows each call’s arguments parsed in tool_use and in its record, in the model’s key order, and {} when they are not a JSON object', async () => {
    const counted = defineTool({ name: 'counted', execute: () => 'ran' })
    const agent = await createAgent({
      model: scriptedModel([
        {
          toolCalls: [
            { id: 'u', name: 'missing', input: {} },
            { id: 'p', name: 'counted', arguments: '{"path": ' },
            { id: 'a', name: 'counted', arguments: '[1, 2]' },
            { id: 'w', name: 'counted', arguments: ' { "z" : 1.50, "a": "é\\u0041", "n": {"y": [true, null]} } ' },
          ],
        },
        { text: 'end' },
      ]),
      tools: [counted],
    })
    const response = await agent.send('go')
    const events = await collect(response.stream())
    const result = await response.result()
    await agent.close()
    const parsed = [{}, {}, {}, { z: 1.5, a: 'éA', n: { y: [true, null] } }]
    const used = events.filter((event) => event.type === 'tool_use').map((event) => (event as any).input)
    expect(used).toEqual(parsed)
    expect(result.toolCalls.map((call) => call.input)).toEqual(parsed)
    expect(Object.keys(used[3])).toEqual(['z', 'a', 'n'])
    expect(Object.keys(result.toolCalls[3].input)).toEqual(['z', 'a', 'n'])
  })

  it('runs the calls of one turn concurrently and returns their results in call order', async () => {
    const started: string[] = []
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    const slow = defineTool<{ name: string; ms: number }>({
      name: 'slow',
      parameters: { type: 'object', properties: { name: { type: 'string' }, ms: { type: 'number' } }, required: ['name', 'ms'] },
      execute: async ({ name, ms }) => {
        started.push(name)
        if (started.length === 3) release()
        await gate
        await new Promise((resolve) => setTimeout(resolve, ms))
        return name
      },
    })
    const result = await prompt('go', {
      model: scriptedModel([
        { toolCalls: [{ id: '1', name: 'slow', input: { name: 'a', ms: 30 } }, { id: '2', name: 'slow', input: { name: 'b', ms: 1 } }, { id: '3', name: 'slow', input: { name: 'c', ms: 15 } }] },
        { text: 'end' },
      ]),
      tools: [slow],
    })
    // All three were running before any finished: the gate opens only when the third starts.
    expect(started.sort()).toEqual(['a', 'b', 'c'])
    expect(result.toolCalls.map((call) => call.output)).toEqual(['a', 'b', 'c'])
  })

  it('gives each of many concurrent sessions the replies of its own async tools and hooks, whatever order they settle in', async () => {
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    const sessions = 8
    const settled: string[] = []
    const run = async (session: number) => {
      // Later sessions answer sooner: replies settle in the reverse of the order they were asked.
      const delay = (sessions - session) * 4
      const tag = defineTool<{ i: number }>({
        name: 'tag',
        parameters: { type: 'object', properties: { i: { type: 'number' } }, required: ['i'] },
        execute: async ({ i }) => (await sleep(delay), settled.push(`${session}:${i}`), `s${session} call ${i}`),
      })
      const seen: string[] = []
      const result = await prompt('go', {
        model: scriptedModel([...[0, 1, 2].map((i) => ({ toolCalls: [{ id: `c${i}`, name: 'tag', input: { i } }] })), { text: `s${session} done` }]),
        tools: [tag],
        advanced: {
          hooks: {
            PreToolUse: [async (input) => (await sleep(delay), { action: 'continue', modifiedInput: { i: (input.toolInput as { i: number }).i * 10 } })],
            PostToolUse: [async (input) => (await sleep(1), seen.push(String(input.toolOutput)), { action: 'continue' })],
          },
        },
      })
      return { session, text: result.content, outputs: result.toolCalls.map((call) => call.output), seen }
    }
    const results = await Promise.all(Array.from({ length: sessions }, (_, session) => run(session)))
    for (const { session, text, outputs, seen } of results) {
      const expected = [0, 10, 20].map((i) => `s${session} call ${i}`)
      expect(text).toBe(`s${session} done`)
      expect(outputs).toEqual(expected)
      expect(seen).toEqual(expected)
    }
    // The first calls really settled out of order: the last session's before the first's.
    expect(settled.indexOf(`${sessions - 1}:0`)).toBeLessThan(settled.indexOf('0:0'))
  })

  it('ignores an async hook that settles after its timeout failed the call; the next run of the agent is not affected', async () => {
    let late!: () => void
    const settledLate = new Promise<void>((resolve) => (late = resolve))
    let calls = 0
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'echo', input: { text: 'a' } }] }, { text: 'first' }, { toolCalls: [{ id: 'c2', name: 'echo', input: { text: 'b' } }] }, { text: 'second' }]),
      tools: [echo],
      advanced: {
        hookTimeoutMs: 50,
        hooks: {
          PreToolUse: [
            async () => {
              calls++
              if (calls > 1) return { action: 'continue' }
              // The first call answers 150 ms late, with a decision that would have aborted the run.
              await new Promise((resolve) => setTimeout(resolve, 150))
              setImmediate(late)
              return { action: 'abort', reason: 'too late to count' }
            },
          ],
        },
      },
    })
    const first = await (await agent.send('one')).result()
    expect(first.toolCalls[0].output).toBe('Tool execution failed: Hook PreToolUse exceeded 50ms')
    await settledLate
    const second = await (await agent.send('two')).result()
    expect(second.content).toBe('second')
    expect(second.toolCalls.map((call) => call.output), JSON.stringify(second.toolCalls)).toEqual(['echo:b'])
    await agent.close()
  })

  it('gives execute the tool call id, the session id, a live signal and its definition as this', async () => {
    let seen: any
    const tool = defineTool({
      name: 'ctx',
      marker: 'mine',
      execute(this: any, _input: unknown, context: ToolContext) {
        seen = { ...context, signalAborted: context.signal.aborted, isSignal: context.signal instanceof AbortSignal, marker: this.marker }
        return 'ok'
      },
    } as any)
    const agent = await createAgent({ model: scriptedModel([{ toolCalls: [{ id: 'call-9', name: 'ctx', input: {} }] }, { text: 'end' }]), tools: [tool] })
    await (await agent.send('go')).result()
    expect(seen).toMatchObject({ toolCallId: 'call-9', sessionId: agent.sessionId, signalAborted: false, isSignal: true, marker: 'mine' })
    await agent.close()
  })
})

describe('limits and session state', () => {
  it('stops at maxTurns with stopReason max_turns, after answering the last turn\'s calls', async () => {
    const again = { toolCalls: [{ name: 'echo', input: { text: 'again' } }] }
    const agent = await createAgent({ model: scriptedModel([again, again, again, again]), tools: [echo], maxTurns: 2 })
    const result = await (await agent.send('loop')).result()
    expect(result.stopReason).toBe('max_turns')
    expect(result.turns).toBe(2)
    expect(result.toolCalls).toHaveLength(2)
    expect(agent.messages.at(-1)).toMatchObject({ role: 'tool', content: 'echo:again' })
    const perSend = await (await agent.send('once more', { maxTurns: 1 })).result()
    expect(perSend).toMatchObject({ stopReason: 'max_turns', turns: 1 })
    await agent.close()
  })

  it('rejects a send while the previous response runs (SESSION_BUSY) and after close (SESSION_CLOSED)', async () => {
    let release!: () => void
    const wait = defineTool({ name: 'wait', execute: () => new Promise<string>((resolve) => (release = () => resolve('ok'))) })
    const agent = await createAgent({ model: scriptedModel([{ toolCalls: [{ name: 'wait', input: {} }] }, { text: 'end' }, { text: 'again' }]), tools: [wait] })
    const first = await agent.send('one')
    expect(first.isSettled).toBe(false)
    await expect(agent.send('two')).rejects.toMatchObject({
      name: 'SdkError',
      code: 'SESSION_BUSY',
      message: 'The previous Agent response is still active. Consume it before sending another message.',
    })
    while (!release) await new Promise((resolve) => setTimeout(resolve, 1))
    release()
    expect(await first.text()).toBe('end')
    expect(await (await agent.send('three')).text()).toBe('again')
    await agent.close()
    expect(agent.isClosed).toBe(true)
    const closed = await agent.send('four').catch((error) => error)
    expect(closed).toBeInstanceOf(SdkError)
    expect(closed).toMatchObject({ code: 'SESSION_CLOSED', message: 'Session is closed' })
  })

  it('ends the run with MODEL_ERROR when the script runs out, and stays usable', async () => {
    const agent = await createAgent({ model: scriptedModel([{ toolCalls: [{ name: 'echo', input: { text: 'a' } }] }]), tools: [echo] })
    const response = await agent.send('go')
    const error = await response.text().catch((e) => e)
    expect(error).toBeInstanceOf(SdkError)
    expect(error).toMatchObject({ code: 'MODEL_ERROR', message: 'scriptedModel ran out of turns: it has 1, and this is model call 2' })
    await expect(response.result()).rejects.toBe(error)
    const events = await collect(response.stream())
    expect(events.at(-1)).toEqual({ type: 'error', message: error.message, code: 'MODEL_ERROR', error, sessionId: agent.sessionId })
    await expect(async () => {
      for await (const _ of response.textStream()) {
      }
    }).rejects.toBe(error)
    expect(response.isSettled).toBe(true)
    await agent.close()
  })

  it('rejects the run with the very error the script function threw', async () => {
    const thrown = new RangeError('script broke')
    const agent = await createAgent({ model: scriptedModel(() => { throw thrown }) })
    await expect((await agent.send('go')).text()).rejects.toBe(thrown)
    await agent.close()
  })

  it('reports a script function that returns a bad turn as MODEL_ERROR naming the field', async () => {
    const agent = await createAgent({ model: scriptedModel(() => ({ toolCalls: [{ input: {} }] }) as any) })
    await expect((await agent.send('go')).text()).rejects.toMatchObject({
      code: 'MODEL_ERROR',
      message: 'scriptedModel function returned an invalid turn: toolCalls[0].name must be a non-empty string',
    })
    await agent.close()
  })

  it('rejects a message that is neither text nor parts', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'x' }]) })
    await expect(agent.send(42 as any)).rejects.toMatchObject({ code: 'INVALID_INPUT', message: 'message must be a string or an array of text and image_url parts (got 42)' })
    await expect(agent.send('x', { maxTurns: 0 })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: 'maxTurns must be a positive integer no greater than 2147483647 (got 0)' })
    await expect(agent.send('x', { maxTurns: '3' as any })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: 'maxTurns must be a positive integer no greater than 2147483647 (got "3")' })
    await expect(agent.send('x', { maxTurns: {} as any })).rejects.toMatchObject({ code: 'INVALID_INPUT', message: 'maxTurns must be a positive integer no greater than 2147483647 (got an object)' })
    await agent.close()
  })

  it('send resolves before the run has finished', async () => {
    let release!: () => void
    const model = scriptedModel(async () => {
      await new Promise<void>((resolve) => (release = resolve))
      return { text: 'late' }
    })
    const agent = await createAgent({ model })
    const response = await agent.send('go')
    expect(response.isSettled).toBe(false)
    while (!release) await new Promise((resolve) => setTimeout(resolve, 1))
    release()
    expect(await response.text()).toBe('late')
    await agent.close()
  })
})
