// The Anthropic Messages client against a real HTTP server on 127.0.0.1.
import { describe, expect, it } from 'vitest'
import { createAgent, defineTool, prompt, type AgentOptions } from '../index.js'
import { json, rawStream, splitBytes, useServer } from './helpers/server.js'

const server = useServer()

const weather = defineTool<{ city: string }>({
  name: 'weather',
  description: 'Current weather',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  execute: ({ city }) => ({ city, sky: 'clear' }),
})

function event(type: string, data: object) {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
}

function anthropicStream(text: string, toolUse?: { id: string; name: string; input: string }) {
  let body = event('message_start', { message: { id: 'msg_1', role: 'assistant', content: [], usage: { input_tokens: 12, output_tokens: 1 } } })
  body += event('ping', {})
  let index = 0
  if (text) {
    body += event('content_block_start', { index, content_block: { type: 'text', text: '' } })
    for (const piece of [text.slice(0, 3), text.slice(3)]) body += event('content_block_delta', { index, delta: { type: 'text_delta', text: piece } })
    body += event('content_block_stop', { index })
    index++
  }
  if (toolUse) {
    body += event('content_block_start', { index, content_block: { type: 'tool_use', id: toolUse.id, name: toolUse.name, input: {} } })
    const half = Math.floor(toolUse.input.length / 2)
    body += event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: toolUse.input.slice(0, half) } })
    body += event('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: toolUse.input.slice(half) } })
    body += event('content_block_stop', { index })
  }
  body += event('message_delta', { delta: { stop_reason: toolUse ? 'tool_use' : 'end_turn' }, usage: { output_tokens: 9 } })
  body += event('message_stop', {})
  return body
}

function options(extra: Partial<AgentOptions> = {}): AgentOptions {
  return { model: 'claude-test', provider: 'anthropic', apiKey: 'ak-test', baseUrl: server.url, ...extra }
}

describe('anthropic messages', () => {
  it('streams text and tool_use blocks and sends tool_result blocks back', async () => {
    server.reply(
      rawStream([anthropicStream('Checking', { id: 'toolu_1', name: 'weather', input: '{"city":"Oslo"}' })]),
      rawStream([anthropicStream('It is clear in Oslo.')]),
    )
    const agent = await createAgent(options({ systemPrompt: 'Be helpful.', tools: [weather] }))
    const response = await agent.send('weather in Oslo?')
    const result = await response.result()
    expect(result).toMatchObject({
      content: 'It is clear in Oslo.',
      usage: { inputTokens: 24, outputTokens: 18, totalTokens: 42 },
      toolCalls: [{ id: 'toolu_1', name: 'weather', input: { city: 'Oslo' }, output: '{"city":"Oslo","sky":"clear"}', status: 'success' }],
    })
    const [first, second] = server.requests
    expect(first.url).toBe('/v1/messages')
    expect(first.headers['x-api-key']).toBe('ak-test')
    expect(first.headers['anthropic-version']).toBe('2023-06-01')
    expect(first.headers.authorization).toBeUndefined()
    expect(first.body).toEqual({
      model: 'claude-test',
      max_tokens: 4096,
      system: 'Be helpful.',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'weather in Oslo?' }] }],
      tools: [{ name: 'weather', description: 'Current weather', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
      stream: true,
    })
    expect(second.body.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'weather in Oslo?' }] },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'Checking' },
          { type: 'tool_use', id: 'toolu_1', name: 'weather', input: { city: 'Oslo' } },
        ],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: '{"city":"Oslo","sky":"clear"}' }] },
    ])
    // agent.messages keeps the OpenAI chat shape whatever the provider.
    expect(agent.messages[1]).toEqual({
      role: 'assistant',
      content: 'Checking',
      tool_calls: [{ id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }],
    })
    await agent.close()
  })

  it('survives a stream cut into 2-byte pieces through multi-byte characters', async () => {
    server.reply(rawStream(splitBytes(anthropicStream('Grüße aus 東京 🌸'), 2), 0))
    const result = await prompt('hi', options())
    expect(result.content).toBe('Grüße aus 東京 🌸')
  })

  it('reads a non-streamed message', async () => {
    server.reply(
      json({ id: 'm', type: 'message', role: 'assistant', content: [{ type: 'tool_use', id: 'tu', name: 'weather', input: { city: 'Rome' } }], usage: { input_tokens: 3, output_tokens: 4 } }),
      json({ id: 'm2', type: 'message', role: 'assistant', content: [{ type: 'text', text: 'Sunny.' }], usage: { input_tokens: 5, output_tokens: 6 } }),
    )
    const result = await prompt('hi', options({ tools: [weather], maxOutputTokens: 100, advanced: { connection: { stream: false } } }))
    expect(result).toMatchObject({ content: 'Sunny.', usage: { inputTokens: 8, outputTokens: 10, totalTokens: 18 } })
    expect(result.toolCalls[0].input).toEqual({ city: 'Rome' })
    expect(server.requests[0].body).toMatchObject({ max_tokens: 100, stream: false })
  })

  it('turns an error answer into a MODEL_ERROR with the status and message', async () => {
    server.reply(json({ type: 'error', error: { type: 'authentication_error', message: 'invalid x-api-key' } }, 401))
    await expect(prompt('hi', options())).rejects.toMatchObject({
      code: 'MODEL_ERROR',
      status: 401,
      message: 'Model request failed with status 401 Unauthorized: invalid x-api-key',
    })
  })

  it('retries an overloaded (529) answer', async () => {
    server.reply(json({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }, 529, { 'retry-after-ms': '10' }), rawStream([anthropicStream('ok now')]))
    expect((await prompt('hi', options())).content).toBe('ok now')
    expect(server.requests).toHaveLength(2)
  })

  it('an error event in the stream is a MODEL_ERROR', async () => {
    server.reply(rawStream([event('message_start', { message: { usage: { input_tokens: 1 } } }) + event('error', { error: { type: 'overloaded_error', message: 'Overloaded' } })]))
    await expect(prompt('hi', options())).rejects.toMatchObject({ code: 'MODEL_ERROR', message: 'Model stream reported an error: Overloaded' })
  })

  it('marks a failed call\'s tool_result with is_error, while agent.messages keeps the OpenAI shape', async () => {
    server.reply(rawStream([anthropicStream('', { id: 'toolu_x', name: 'broken', input: '{}' })]), rawStream([anthropicStream('sorry')]))
    const agent = await createAgent(options({ tools: [defineTool({ name: 'broken', execute: () => { throw new Error('no disk') } })] }))
    await (await agent.send('go')).result()
    expect(server.requests[1].body.messages[2]).toEqual({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'toolu_x', content: 'Tool execution failed: no disk', is_error: true }],
    })
    expect(agent.messages[2]).toEqual({ role: 'tool', tool_call_id: 'toolu_x', content: 'Tool execution failed: no disk' })
    await agent.close()
  })

  it('a stream that ends without message_stop is a MODEL_ERROR', async () => {
    server.reply(rawStream([anthropicStream('cut short').replace(event('message_stop', {}), '')]))
    await expect(prompt('hi', options())).rejects.toMatchObject({ code: 'MODEL_ERROR', message: 'Model stream ended before the response was complete' })
    expect(server.requests).toHaveLength(1)
  })

  it('sends temperature, maxOutputTokens and the connection headers', async () => {
    server.reply(rawStream([anthropicStream('warm')]))
    await prompt('hi', options({ temperature: 0.3, maxOutputTokens: 77, advanced: { connection: { headers: { 'x-tenant': 'acme' } } } }))
    expect(server.requests[0].body).toMatchObject({ temperature: 0.3, max_tokens: 77 })
    expect(server.requests[0].headers['x-tenant']).toBe('acme')
  })

  it('takes the key from ANTHROPIC_API_KEY', async () => {
    server.reply(rawStream([anthropicStream('env key')]))
    process.env.ANTHROPIC_API_KEY = 'ak-env'
    try {
      await prompt('hi', { model: 'claude-test', provider: 'anthropic', baseUrl: server.url })
    } finally {
      delete process.env.ANTHROPIC_API_KEY
    }
    expect(server.requests[0].headers['x-api-key']).toBe('ak-env')
  })
})
