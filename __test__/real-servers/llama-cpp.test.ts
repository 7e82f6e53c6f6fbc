// llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`, set up by
// scripts/real-servers/setup.py) with SmolLM2-135M-Instruct, in its documented function-calling
// chat format `chatml-function-calling`, seed fixed and temperature 0. A recording proxy
// between us and the server shows what we sent and what it answered. Skips (saying why) when
// the setup did not make the server and its model file available.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAgent, createSession, type AgentOptions, type PromptResult, type SendOptions, type SessionStreamEvent, type StreamEvent } from '../../index.js'
import { LLAMA_MODEL, collect, weatherTool, llamaSetup, recordingProxy, sseData, startLlama, type Exchange, type RecordingProxy, type RunningServer } from './servers.js'

const setup = llamaSetup()
if ('reason' in setup) console.warn(`[real-servers] llama-cpp.test.ts skipped: ${setup.reason}`)

type Options = AgentOptions
type Send = SendOptions

let server: RunningServer | undefined
let proxy: RecordingProxy

const { tool: getWeather, calls: weatherCalls } = weatherTool()
const TOOL_WIRE = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Gets the current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}

function options(extra: Partial<Options> = {}): Options {
  return {
    model: LLAMA_MODEL,
    provider: 'openai-compatible',
    baseUrl: proxy.url + '/v1',
    temperature: 0,
    maxOutputTokens: 48,
    // A 5xx from this server is an error it will give again: no retries.
    advanced: { connection: { maxRetries: 0 } },
    ...extra,
  }
}
const unstreamed = { advanced: { connection: { stream: false, maxRetries: 0 } } }

interface Run {
  result: PromptResult
  events: StreamEvent[]
  deltas: string[]
  calls: Exchange[]
}

function modelCalls(from: number): Exchange[] {
  return proxy.exchanges.slice(from).filter((exchange) => exchange.url === '/v1/chat/completions')
}


async function run(agentOptions: Options, message: string, send?: Send): Promise<Run> {
  const before = proxy.exchanges.length
  const agent = await createAgent(agentOptions)
  try {
    return { ...(await collect(await agent.send(message, send))), calls: modelCalls(before) }
  } finally {
    await agent.close()
  }
}

/** The text a streamed answer carried. */
function streamedText(call: Exchange): string {
  return sseData(call.response)
    .map((chunk) => chunk.choices?.[0]?.delta?.content ?? '')
    .join('')
}

/** `finishReason` of each `turn_end` event. */
function finishReasons(events: StreamEvent[]): string[] {
  return events.flatMap((event) => (event.type === 'turn_end' ? [event.finishReason] : []))
}

/** The tool call a streamed answer carried: its id, name and arguments as the deltas spelled them. */
function streamedToolCall(call: Exchange) {
  const deltas = sseData(call.response).flatMap((chunk) => chunk.choices?.[0]?.delta?.tool_calls ?? [])
  return {
    deltas,
    id: deltas.find((delta: any) => delta.id)?.id as string,
    names: deltas.map((delta: any) => delta.function?.name),
    arguments: deltas.map((delta: any) => delta.function?.arguments ?? '').join(''),
  }
}

describe.skipIf('reason' in setup)('llama.cpp (llama-cpp-python server, SmolLM2-135M)', () => {
  beforeAll(async () => {
    server = await startLlama(setup as { python: string; gguf: string })
    proxy = await recordingProxy(server.url)
  }, 120_000)

  afterAll(async () => {
    await proxy?.close()
    await server?.stop()
  }, 30_000)

  // What this server does with tools, read in llama_cpp/llama_chat_format.py (0.3.36): without a
  // tool_choice it shows the model no tools; with { type: 'function' } it forces that call, and
  // when streaming repeats the name in every delta; with 'auto' it lets the model choose, but
  // cannot stream a call it chose (the stream ends empty); 'required' it refuses. Its prompt
  // template drops `tool` messages, so SmolLM2 never sees a result and calls again whenever it
  // may. So the streamed round trip is a forced run of one turn, then a run that sends the result
  // back with toolChoice 'none' and ends with the model's text; unstreamed, the run's second
  // request carries the result under 'auto' and the model calls again until maxTurns.

  it("streamed tool round trip: a forced call whose deltas each repeat the name runs once; its result goes back with toolChoice 'none' and the text ends the run", async () => {
    weatherCalls.length = 0
    const agent = await createAgent(options({ tools: [getWeather], maxTurns: 1 }))
    try {
      let before = proxy.exchanges.length
      const first = await collect(await agent.send('What is the weather in Paris?', { toolChoice: { name: 'get_weather' } }))
      const [call] = modelCalls(before)
      expect(call.body).toMatchObject({ stream: true, tools: [TOOL_WIRE], tool_choice: { type: 'function', function: { name: 'get_weather' } } })
      const sent = streamedToolCall(call)
      // What the server does: every delta carries the whole name again.
      expect(sent.deltas.length).toBeGreaterThan(1)
      expect(sent.names.every((name) => name === 'get_weather')).toBe(true)
      const input = JSON.parse(sent.arguments)
      expect(input).toEqual({ city: 'Paris' })
      expect(weatherCalls).toEqual([input])
      expect(first.result.toolCalls).toMatchObject([{ id: sent.id, name: 'get_weather', input, output: 'Sunny, 21 degrees in Paris', status: 'success' }])
      expect(first.result.stopReason).toBe('max_turns')
      expect(finishReasons(first.events)).toEqual(['tool_calls'])

      before = proxy.exchanges.length
      const second = await collect(await agent.send('Thanks. Tell me in one sentence.', { toolChoice: 'none' }))
      const calls = modelCalls(before)
      expect(calls).toHaveLength(1)
      expect(calls[0].body.tool_choice).toBe('none')
      const [, assistant, tool, user] = calls[0].body.messages
      expect(assistant).toMatchObject({ role: 'assistant', tool_calls: [{ id: sent.id, type: 'function', function: { name: 'get_weather', arguments: sent.arguments } }] })
      expect(assistant.content ?? '').toBe('')
      expect(tool).toEqual({ role: 'tool', tool_call_id: sent.id, content: 'Sunny, 21 degrees in Paris' })
      expect(user).toEqual({ role: 'user', content: 'Thanks. Tell me in one sentence.' })
      expect(calls[0].status).toBe(200)
      const text = streamedText(calls[0])
      expect(text.length).toBeGreaterThan(0)
      expect(second.deltas.join('')).toBe(text)
      expect(second.result).toMatchObject({ content: text, toolCalls: [] })
      expect(['done', 'max_tokens']).toContain(second.result.stopReason)
      expect(weatherCalls).toHaveLength(1)
    } finally {
      await agent.close()
    }
  }, 180_000)

  it("unstreamed tool round trip: the forced call's turn goes back without content null and the server accepts it; the model calls again until maxTurns", async () => {
    weatherCalls.length = 0
    const { result, events, calls } = await run(options({ ...unstreamed, tools: [getWeather], toolChoice: { name: 'get_weather' }, maxTurns: 2 }), 'What is the weather in Paris?')
    expect(calls).toHaveLength(2)
    const [first, second] = calls
    expect(first.body).toMatchObject({ stream: false, tool_choice: { type: 'function', function: { name: 'get_weather' } } })
    const answer = JSON.parse(first.response)
    // The server's own answer has content null beside its tool call.
    expect(answer.choices[0]).toMatchObject({ finish_reason: 'tool_calls', message: { content: null } })
    const sent = answer.choices[0].message.tool_calls[0]
    const input = JSON.parse(sent.function.arguments)
    expect(input).toEqual({ city: 'Paris' })
    const assistant = second.body.messages[1]
    expect(assistant).toMatchObject({ role: 'assistant', tool_calls: [{ id: sent.id, type: 'function', function: { name: 'get_weather', arguments: sent.function.arguments } }] })
    expect(assistant.content ?? '').toBe('')
    expect(second.body.messages[2]).toEqual({ role: 'tool', tool_call_id: sent.id, content: 'Sunny, 21 degrees in Paris' })
    // After the forced call the run goes back to auto.
    expect(second.body.tool_choice).toBe('auto')
    expect(second.status).toBe(200)
    const again = JSON.parse(second.response).choices[0].message.tool_calls[0]
    expect(weatherCalls).toEqual([input, JSON.parse(again.function.arguments)])
    expect(result.toolCalls.map((call) => call.id)).toEqual([sent.id, again.id])
    expect(result.stopReason).toBe('max_turns')
    expect(finishReasons(events)).toEqual(['tool_calls', 'tool_calls'])
  }, 180_000)

  it("streamed, the server cannot stream a call the model chose under 'auto': the run fails at once with a MODEL_ERROR", async () => {
    const agent = await createAgent(options({ tools: [getWeather], toolChoice: { name: 'get_weather' }, maxTurns: 2 }))
    try {
      const before = proxy.exchanges.length
      const response = await agent.send('What is the weather in Paris?')
      await expect(response.result()).rejects.toMatchObject({ code: 'MODEL_ERROR' })
      const calls = modelCalls(before)
      expect(calls).toHaveLength(2)
      expect(calls[1].body).toMatchObject({ stream: true, tool_choice: 'auto' })
      expect(calls[1].status).toBe(200)
      expect(sseData(calls[1].response)).toEqual([])
    } finally {
      await agent.close()
    }
  }, 180_000)

  it('usage: the run reports the tokens the server counted', async () => {
    const { result, calls } = await run(options(unstreamed), 'Say hello.')
    expect(calls).toHaveLength(1)
    const reported = JSON.parse(calls[0].response).usage
    expect(reported.prompt_tokens).toBeGreaterThan(0)
    expect(reported.completion_tokens).toBeGreaterThan(0)
    expect(result.usage).toMatchObject({
      inputTokens: reported.prompt_tokens,
      outputTokens: reported.completion_tokens,
      totalTokens: reported.prompt_tokens + reported.completion_tokens,
    })
    expect(result.content).toBe(JSON.parse(calls[0].response).choices[0].message.content)
  }, 120_000)

  it('abort while the text streams: the run settles at once with the reason, the request is cancelled, the next send works', async () => {
    const agent = await createAgent(options({ maxOutputTokens: 120 }))
    try {
      for (const how of ['agent.abort()', 'AbortSignal'] as const) {
        const before = proxy.exchanges.length
        const controller = new AbortController()
        const response = await agent.send('Write a long story about a dragon who learns to sail.', { signal: controller.signal })
        const reason = new Error(`stopped by ${how}`)
        let abortedAt = 0
        let deltas = 0
        await (async () => {
          for await (const _delta of response.textStream()) {
            if (++deltas === 3) {
              abortedAt = Date.now()
              if (how === 'agent.abort()') agent.abort(reason)
              else controller.abort(reason)
            }
          }
        })().catch(() => {})
        expect(deltas).toBeGreaterThanOrEqual(3)
        await expect(response.text()).rejects.toBe(reason)
        expect(Date.now() - abortedAt).toBeLessThan(1000)
        expect(response.isSettled).toBe(true)
        const [call] = modelCalls(before)
        await call.done
        expect(call.clientClosedEarly).toBe(true)
        // The server had not finished: no finish_reason came.
        expect(sseData(call.response).some((chunk) => chunk.choices?.[0]?.finish_reason)).toBe(false)
      }
      const before = proxy.exchanges.length
      const next = await (await agent.send('Say hello.')).result()
      expect(next.content.length).toBeGreaterThan(0)
      expect(modelCalls(before)[0].status).toBe(200)
    } finally {
      await agent.close()
    }
  }, 120_000)

  it("toolChoice { name } on send makes the model call the tool in that run only; the next run is the model's choice", async () => {
    weatherCalls.length = 0
    const agent = await createAgent(options({ ...unstreamed, tools: [getWeather], maxTurns: 1 }))
    try {
      let before = proxy.exchanges.length
      const forced = await (await agent.send('What is the weather in Rome?', { toolChoice: { name: 'get_weather' } })).result()
      expect(modelCalls(before)[0].body.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } })
      expect(forced.toolCalls).toMatchObject([{ name: 'get_weather', input: { city: 'Rome' }, status: 'success' }])
      expect(weatherCalls).toEqual([{ city: 'Rome' }])
      before = proxy.exchanges.length
      await (await agent.send('Thanks.')).result()
      // Unset, it is the server's default ("auto" in OpenAI's API), whether sent or not.
      expect(modelCalls(before)[0].body.tool_choice ?? 'auto').toBe('auto')
    } finally {
      await agent.close()
    }
  }, 180_000)

  it("toolChoice 'required' is sent as OpenAI spells it (llama-cpp-python's chatml-function-calling refuses it)", async () => {
    const agent = await createAgent(options({ ...unstreamed, tools: [getWeather], toolChoice: 'required' }))
    try {
      const before = proxy.exchanges.length
      const outcome = await (await agent.send('Hello there!')).result().catch((error: unknown) => error)
      const [call] = proxy.exchanges.slice(before)
      expect(call.body.tool_choice).toBe('required')
      expect(call.status).toBe(500)
      expect(outcome).toMatchObject({ code: 'MODEL_ERROR', status: 500 })
    } finally {
      await agent.close()
    }
  }, 120_000)

  it.each([
    ['streamed', {}],
    ['unstreamed', unstreamed],
  ])('maxOutputTokens 3 (%s): the answer is cut, the run ends with stopReason max_tokens', async (_label, extra) => {
    const { result, events, calls } = await run(options({ ...extra, maxOutputTokens: 3 }), 'Tell me about the moon.')
    expect(calls).toHaveLength(1)
    expect(calls[0].body.max_tokens).toBe(3)
    const wire = calls[0].body.stream ? sseData(calls[0].response).map((chunk) => chunk.choices?.[0]?.finish_reason).filter(Boolean) : [JSON.parse(calls[0].response).choices[0].finish_reason]
    expect(wire).toEqual(['length'])
    expect(result.stopReason).toBe('max_tokens')
    expect(result.content.length).toBeGreaterThan(0)
    expect(finishReasons(events)).toEqual(['length'])
    const last = events.at(-1)!
    expect(last.type).toBe('result')
    expect((last as Extract<StreamEvent, { type: 'result' }>).result.stopReason).toBe('max_tokens')
  }, 120_000)

  it("Blade's session API against the real server: createSession with a provider object streams an answer; a 'next' input sent meanwhile is the next turn's user message", async () => {
    const before = proxy.exchanges.length
    const session = await createSession({
      provider: { type: 'openai-compatible', apiKey: 'unused', baseUrl: proxy.url + '/v1', maxRetries: 0 },
      model: LLAMA_MODEL,
      temperature: 0,
      maxOutputTokens: 24,
    })
    try {
      const started = await session.send('Say hello.')
      expect(started.status).toBe('started')
      const steered = await session.send('Now say goodbye.', { priority: 'next' })
      expect(steered).toMatchObject({ status: 'steered', priority: 'next' })
      const events: SessionStreamEvent[] = []
      for await (const event of session.stream()) events.push(event)
      const types = events.map((event) => event.type).filter((type) => type !== 'content')
      expect(types).toEqual(['turn_start', 'input_applied', 'turn_end', 'turn_start', 'turn_end', 'usage', 'result'])
      const calls = modelCalls(before)
      expect(calls).toHaveLength(2)
      const users = (calls[1].body.messages as { role: string; content: string }[]).filter((message) => message.role === 'user').map((message) => message.content)
      expect(users).toEqual(['Say hello.', 'Now say goodbye.'])
      expect(calls.every((call) => call.status === 200)).toBe(true)
    } finally {
      await session.close()
    }
  }, 180_000)
})
