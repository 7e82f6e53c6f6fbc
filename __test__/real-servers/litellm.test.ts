// LiteLLM's proxy (litellm[proxy] from PyPI, set up by scripts/real-servers/setup.py) in front
// of its own `mock_response` / `mock_tool_calls` models and of llama.cpp: our OpenAI-compatible
// client on its /v1/chat/completions route and our Anthropic client on its /v1/messages route,
// streamed and not. A recording proxy between us and LiteLLM shows what we sent and what it
// answered. Skips (saying why) when the setup did not make LiteLLM available.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAgent, type AgentOptions, type PromptResult, type SendOptions, type StreamEvent } from '../../index.js'
import { LLAMA_MODEL, collect, weatherTool, freePort, litellmSetup, llamaSetup, recordingProxy, sseData, startLlama, startServer, type RecordingProxy, type RunningServer } from './servers.js'

const litellm = litellmSetup()
const llama = llamaSetup()
if ('reason' in litellm) console.warn(`[real-servers] litellm.test.ts skipped: ${litellm.reason}`)
else if ('reason' in llama) console.warn(`[real-servers] litellm.test.ts: the tests through LiteLLM to llama.cpp are skipped: ${llama.reason}`)

type Options = AgentOptions
type Send = SendOptions

const MOCK_TEXT = "Hello from LiteLLM's mock."
const MASTER_KEY = 'sk-arh-' + randomBytes(24).toString('hex')

let server: RunningServer | undefined
let llamaServer: RunningServer | undefined
let proxy: RecordingProxy
/** Between LiteLLM and llama.cpp: what LiteLLM forwarded. */
let upstream: RecordingProxy | undefined
let scratch: string

const { tool: getWeather, calls: weatherCalls } = weatherTool()

function options(extra: Partial<Options>): Options {
  return { model: 'mock-text', apiKey: MASTER_KEY, temperature: 0, advanced: { connection: { maxRetries: 0 } }, ...extra }
}
const openai = (extra: Partial<Options> = {}) => options({ provider: 'openai-compatible', baseUrl: proxy.url + '/v1', ...extra })
const anthropic = (extra: Partial<Options> = {}) => options({ provider: 'anthropic', baseUrl: proxy.url, ...extra })
const unstreamed = { advanced: { connection: { stream: false, maxRetries: 0 } } }

async function run(agentOptions: Options, message: string): Promise<{ result: PromptResult; events: StreamEvent[]; deltas: string[] }> {
  const agent = await createAgent(agentOptions)
  try {
    return await collect(await agent.send(message))
  } finally {
    await agent.close()
  }
}

/** `finishReason` of each `turn_end` event. */
function finishReasons(events: StreamEvent[]): string[] {
  return events.flatMap((event) => (event.type === 'turn_end' ? [event.finishReason] : []))
}

function modelCalls() {
  return proxy.exchanges.filter((exchange) => exchange.method === 'POST')
}

describe.skipIf('reason' in litellm)("LiteLLM's proxy", () => {
  beforeAll(async () => {
    weatherCalls.length = 0
    scratch = mkdtempSync(join(tmpdir(), 'arh-litellm-'))
    // A mock that is not answered by its mock (a route that ignores mock_response) goes to a
    // closed local port, never to a provider on the internet.
    const nowhere = 'http://127.0.0.1:9/v1'
    const models: object[] = [
      { model_name: 'mock-text', litellm_params: { model: 'openai/mock-text', api_key: 'unused', api_base: nowhere, mock_response: MOCK_TEXT } },
      {
        model_name: 'mock-tool',
        litellm_params: {
          model: 'openai/mock-tool',
          api_key: 'unused',
          api_base: nowhere,
          mock_tool_calls: [{ id: 'call_mock_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
        },
      },
    ]
    if (!('reason' in llama)) {
      llamaServer = await startLlama(llama)
      upstream = await recordingProxy(llamaServer.url)
      models.push({ model_name: LLAMA_MODEL, litellm_params: { model: `openai/${LLAMA_MODEL}`, api_base: upstream.url + '/v1', api_key: 'none' } })
    }
    // JSON is YAML. use_chat_completions_url_for_anthropic_messages: on /v1/messages LiteLLM
    // otherwise sends an openai/ model's requests to the Responses API (/v1/responses), which
    // llama-cpp-python does not have (404).
    const config = join(scratch, 'litellm.yaml')
    const settings = { model_list: models, general_settings: { master_key: MASTER_KEY }, litellm_settings: { use_chat_completions_url_for_anthropic_messages: true } }
    writeFileSync(config, JSON.stringify(settings, null, 2))
    const port = await freePort()
    const { bin } = litellm as { bin: string }
    server = await startServer(bin, ['--config', config, '--host', '127.0.0.1', '--port', String(port)], {
      url: `http://127.0.0.1:${port}`,
      readyPath: '/health/liveliness',
      timeoutMs: 240_000,
      // Its model price list from the package, not fetched.
      env: { LITELLM_LOCAL_MODEL_COST_MAP: 'True' },
    })
    proxy = await recordingProxy(server.url)
  }, 330_000)

  afterAll(async () => {
    await proxy?.close()
    await server?.stop()
    await upstream?.close()
    await llamaServer?.stop()
    if (scratch) rmSync(scratch, { recursive: true, force: true })
  }, 30_000)

  describe('mock_response on /v1/chat/completions (provider openai-compatible)', () => {
    it('streamed: the text arrives in deltas, with the usage LiteLLM reported in its last chunk', async () => {
      const before = modelCalls().length
      const { result, events, deltas } = await run(openai(), 'Say hello')
      const [call] = modelCalls().slice(before)
      expect(call.url).toBe('/v1/chat/completions')
      expect(call.headers.authorization).toBe(`Bearer ${MASTER_KEY}`)
      expect(call.body).toMatchObject({ model: 'mock-text', stream: true, messages: [{ role: 'user', content: 'Say hello' }] })
      expect(call.responseHeaders!['content-type']).toMatch(/^text\/event-stream/)
      // LiteLLM's mock streams its text three characters at a time.
      expect(deltas.join('')).toBe(MOCK_TEXT)
      expect(deltas.length).toBeGreaterThan(1)
      const reported = sseData(call.response).find((chunk) => chunk.usage)?.usage
      expect(reported.prompt_tokens).toBeGreaterThan(0)
      expect(result).toMatchObject({
        content: MOCK_TEXT,
        stopReason: 'done',
        turns: 1,
        usage: { inputTokens: reported.prompt_tokens, outputTokens: reported.completion_tokens, totalTokens: reported.prompt_tokens + reported.completion_tokens },
      })
      expect(finishReasons(events)).toEqual(['stop'])
    })

    it('unstreamed: one JSON completion, its usage as reported', async () => {
      const before = modelCalls().length
      const { result, events } = await run(openai(unstreamed), 'Say hello')
      const [call] = modelCalls().slice(before)
      expect(call.body.stream).toBe(false)
      const reported = JSON.parse(call.response)
      expect(reported.choices[0].message.content).toBe(MOCK_TEXT)
      expect(result).toMatchObject({
        content: MOCK_TEXT,
        stopReason: 'done',
        usage: { inputTokens: reported.usage.prompt_tokens, outputTokens: reported.usage.completion_tokens },
      })
      expect(finishReasons(events)).toEqual(['stop'])
    })

    it('mock_tool_calls: the tool runs with the mocked arguments and its result goes back; the mock calls again until maxTurns', async () => {
      weatherCalls.length = 0
      const before = modelCalls().length
      const { result, events } = await run(openai({ ...unstreamed, model: 'mock-tool', tools: [getWeather], maxTurns: 2 }), 'Weather in Paris?')
      const calls = modelCalls().slice(before)
      expect(calls).toHaveLength(2)
      expect(weatherCalls).toEqual([{ city: 'Paris' }, { city: 'Paris' }])
      expect(result.stopReason).toBe('max_turns')
      expect(result.toolCalls.map((call) => [call.id, call.name, call.input, call.output])).toEqual([
        ['call_mock_1', 'get_weather', { city: 'Paris' }, 'Sunny, 21 degrees in Paris'],
        ['call_mock_1', 'get_weather', { city: 'Paris' }, 'Sunny, 21 degrees in Paris'],
      ])
      expect(calls[0].body.tools).toEqual([
        {
          type: 'function',
          function: {
            name: 'get_weather',
            description: 'Gets the current weather for a city',
            parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
          },
        },
      ])
      // LiteLLM's mock answers text and the call together, with finish_reason "stop".
      expect(JSON.parse(calls[0].response).choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: 'This is a mock request' } })
      expect(calls[1].body.messages.slice(1)).toEqual([
        {
          role: 'assistant',
          content: 'This is a mock request',
          tool_calls: [{ id: 'call_mock_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
        },
        { role: 'tool', tool_call_id: 'call_mock_1', content: 'Sunny, 21 degrees in Paris' },
      ])
      // Its finish_reason says "stop", but each turn ended in a tool call, and that is what we report.
      expect(finishReasons(events)).toEqual(['tool_calls', 'tool_calls'])
    })
  })

  describe('mock_response on /v1/messages (provider anthropic)', () => {
    it('asked to stream, LiteLLM answers one JSON message: we read it as the answer', async () => {
      const before = modelCalls().length
      const { result, events, deltas } = await run(anthropic(), 'Say hello')
      const [call] = modelCalls().slice(before)
      expect(call.url).toBe('/v1/messages')
      expect(call.headers['x-api-key']).toBe(MASTER_KEY)
      expect(call.body).toMatchObject({ model: 'mock-text', stream: true, messages: [{ role: 'user', content: [{ type: 'text', text: 'Say hello' }] }] })
      expect(call.responseHeaders!['content-type']).toBe('application/json')
      const reported = JSON.parse(call.response)
      expect(reported).toMatchObject({ type: 'message', stop_reason: 'end_turn', content: [{ type: 'text', text: MOCK_TEXT }] })
      expect(deltas.join('')).toBe(MOCK_TEXT)
      expect(result).toMatchObject({
        content: MOCK_TEXT,
        stopReason: 'done',
        usage: { inputTokens: reported.usage.input_tokens, outputTokens: reported.usage.output_tokens },
      })
      expect(finishReasons(events)).toEqual(['stop'])
    })

    it('unstreamed: the same message', async () => {
      const before = modelCalls().length
      const { result, events } = await run(anthropic(unstreamed), 'Say hello')
      const [call] = modelCalls().slice(before)
      expect(call.body.stream).toBeFalsy()
      const reported = JSON.parse(call.response)
      expect(result).toMatchObject({ content: MOCK_TEXT, usage: { inputTokens: reported.usage.input_tokens, outputTokens: reported.usage.output_tokens } })
      expect(finishReasons(events)).toEqual(['stop'])
    })
  })

  describe.skipIf('reason' in llama)('LiteLLM in front of llama.cpp (model openai/smollm2 with api_base)', () => {
    // llama-cpp-python shows the model tools only when a tool_choice names one or says 'auto', and
    // SmolLM2 then calls again whenever it may (see llama-cpp.test.ts): a forced run of one turn,
    // then a run with toolChoice 'none' that sends the result back and ends with text.
    it.each([
      ['unstreamed', unstreamed],
      ['streamed', {}],
    ])('a tool round trip through /v1/chat/completions (%s): the forced call runs, its result reaches llama.cpp, the text ends the run', async (_label, extra) => {
      weatherCalls.length = 0
      const agent = await createAgent(openai({ ...extra, model: LLAMA_MODEL, tools: [getWeather], maxTurns: 1, maxOutputTokens: 40 }))
      try {
        let ours = modelCalls().length
        let theirs = upstream!.exchanges.length
        const first = await (await agent.send('What is the weather in Paris?', { toolChoice: { name: 'get_weather' } })).result()
        expect(modelCalls()[ours].body.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } })
        const forwarded = upstream!.exchanges.slice(theirs)
        expect(forwarded).toHaveLength(1)
        expect(forwarded[0].body.tool_choice).toEqual({ type: 'function', function: { name: 'get_weather' } })
        expect(weatherCalls).toEqual([{ city: 'Paris' }])
        expect(first.toolCalls).toMatchObject([{ name: 'get_weather', input: { city: 'Paris' }, output: 'Sunny, 21 degrees in Paris', status: 'success' }])
        expect(first.stopReason).toBe('max_turns')

        ours = modelCalls().length
        theirs = upstream!.exchanges.length
        const second = await (await agent.send('Thanks. Tell me in one sentence.', { toolChoice: 'none' })).result()
        const sent = modelCalls()[ours].body
        expect(sent.tool_choice).toBe('none')
        expect(sent.messages.slice(1, 3)).toMatchObject([
          { role: 'assistant', tool_calls: [{ id: first.toolCalls[0].id, function: { name: 'get_weather' } }] },
          { role: 'tool', tool_call_id: first.toolCalls[0].id, content: 'Sunny, 21 degrees in Paris' },
        ])
        const reached = upstream!.exchanges.slice(theirs)
        expect(reached).toHaveLength(1)
        expect(reached[0].body.messages).toContainEqual(expect.objectContaining({ role: 'tool', content: 'Sunny, 21 degrees in Paris' }))
        expect(second.content.length).toBeGreaterThan(0)
        expect(['done', 'max_tokens']).toContain(second.stopReason)
        expect(weatherCalls).toHaveLength(1)
      } finally {
        await agent.close()
      }
    }, 240_000)

    it('our Anthropic client through /v1/messages, streamed: LiteLLM translates llama.cpp into Anthropic events', async () => {
      const before = modelCalls().length
      const theirs = upstream!.exchanges.length
      const { result, deltas } = await run(anthropic({ model: LLAMA_MODEL, maxOutputTokens: 16 }), 'Say hello')
      const [call] = modelCalls().slice(before)
      expect(upstream!.exchanges.slice(theirs).map((exchange) => exchange.url)).toEqual(['/v1/chat/completions'])
      expect(call.responseHeaders!['content-type']).toMatch(/^text\/event-stream/)
      const reported = sseData(call.response)
      const text = reported
        .filter((event) => event.type === 'content_block_delta' && event.delta?.type === 'text_delta')
        .map((event) => event.delta.text)
        .join('')
      expect(text.length).toBeGreaterThan(0)
      expect(deltas.join('')).toBe(text)
      expect(result.content).toBe(text)
      const outputTokens = reported.filter((event) => event.type === 'message_delta').at(-1)?.usage?.output_tokens
      expect(result.usage.outputTokens).toBe(outputTokens)
      expect(result.usage.outputTokens).toBeGreaterThan(0)
    }, 240_000)
  })
})
