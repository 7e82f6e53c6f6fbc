// The OpenAI Chat Completions client against a real HTTP server on 127.0.0.1.
import { describe, expect, it } from 'vitest'
import { createAgent, defineTool, prompt, SdkError, type AgentOptions } from '../index.js'
import { completion, json, openaiChunks, rawStream, sleep, splitBytes, sse, useServer } from './helpers/server.js'

const server = useServer()

const readFile = defineTool<{ path: string }>({
  name: 'read_file',
  description: 'Reads a file',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  kind: 'readonly',
  execute: ({ path }) => `contents of ${path}`,
})

function options(extra: Partial<AgentOptions> = {}): AgentOptions {
  return { model: 'gpt-test', apiKey: 'sk-test', baseUrl: server.url + '/v1', ...extra }
}

describe('streaming (SSE)', () => {
  it('streams text, runs tool calls and sends their results back, with usage totals', async () => {
    server.reply(
      rawStream([sse(openaiChunks('', [{ id: 'call_1', name: 'read_file', arguments: '{"path":"a.txt"}' }]))]),
      rawStream([sse(openaiChunks('Done ✓'))]),
    )
    const agent = await createAgent(options({ systemPrompt: 'You are terse.', tools: [readFile], temperature: 0.2, maxOutputTokens: 256 }))
    const response = await agent.send('read a.txt')
    const deltas: string[] = []
    for await (const delta of response.textStream()) deltas.push(delta)
    expect(deltas.join('')).toBe('Done ✓')
    const result = await response.result()
    expect(result).toMatchObject({
      content: 'Done ✓',
      turns: 2,
      stopReason: 'done',
      usage: { inputTokens: 22, outputTokens: 14, totalTokens: 36 },
      toolCalls: [{ id: 'call_1', name: 'read_file', input: { path: 'a.txt' }, output: 'contents of a.txt', status: 'success' }],
    })

    expect(server.requests).toHaveLength(2)
    const [first, second] = server.requests
    expect(first.method).toBe('POST')
    expect(first.url).toBe('/v1/chat/completions')
    expect(first.headers.authorization).toBe('Bearer sk-test')
    expect(first.headers['content-type']).toBe('application/json')
    expect(first.body).toEqual({
      model: 'gpt-test',
      messages: [
        { role: 'system', content: 'You are terse.' },
        { role: 'user', content: 'read a.txt' },
      ],
      tools: [
        {
          type: 'function',
          function: {
            name: 'read_file',
            description: 'Reads a file',
            parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
          },
        },
      ],
      temperature: 0.2,
      max_completion_tokens: 256,
      stream: true,
      stream_options: { include_usage: true },
    })
    // `content: ""`, not null: servers that check for a string (llama.cpp's) refuse null.
    expect(second.body.messages.slice(2)).toEqual([
      { role: 'assistant', content: '', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"a.txt"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'contents of a.txt' },
    ])
    await agent.close()
  })

  it('assembles a stream delivered in 3-byte pieces, cut mid-JSON and mid-UTF-8 character', async () => {
    const body = sse(openaiChunks('héllo wörld — 你好 🙂', [{ id: 'c9', name: 'read_file', arguments: '{"path":"日本/ファイル.txt"}' }]))
    server.reply(rawStream(splitBytes(body, 3), 0), rawStream([sse(openaiChunks('ok'))]))
    const result = await prompt('go', options({ tools: [readFile] }))
    expect(result.toolCalls[0]).toMatchObject({ input: { path: '日本/ファイル.txt' }, output: 'contents of 日本/ファイル.txt' })
    expect(server.requests[1].body.messages[1]).toEqual({
      role: 'assistant',
      content: 'héllo wörld — 你好 🙂',
      tool_calls: [{ id: 'c9', type: 'function', function: { name: 'read_file', arguments: '{"path":"日本/ファイル.txt"}' } }],
    })
  })

  it('assembles several tool calls whose fragments interleave by index', async () => {
    const chunks = [
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'a', function: { name: 'read_file', arguments: '{"pa' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 1, id: 'b', function: { name: 'read_file', arguments: '{"path"' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: 'th":"1"}' } }] } }] },
      { choices: [{ index: 0, delta: { tool_calls: [{ index: 1, function: { arguments: ':"2"}' } }] } }] },
      { choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
    ]
    server.reply(rawStream([sse(chunks)]), rawStream([sse(openaiChunks('end'))]))
    const result = await prompt('go', options({ tools: [readFile] }))
    expect(result.toolCalls.map((call) => [call.id, call.output])).toEqual([
      ['a', 'contents of 1'],
      ['b', 'contents of 2'],
    ])
  })

  it('a stream that stops before it is complete is a MODEL_ERROR, and is not retried', async () => {
    server.reply(rawStream([sse([{ choices: [{ index: 0, delta: { content: 'partial' } }] }], false)]))
    await expect(prompt('go', options())).rejects.toMatchObject({ code: 'MODEL_ERROR', message: 'Model stream ended before the response was complete' })
    expect(server.requests).toHaveLength(1)
  })

  it('a malformed chunk is a MODEL_ERROR that quotes it', async () => {
    server.reply(rawStream(['data: {"choices": [oops\n\n']))
    const error = await prompt('go', options()).catch((e) => e)
    expect(error).toBeInstanceOf(SdkError)
    expect(error.code).toBe('MODEL_ERROR')
    expect(error.message).toMatch(/^Model stream is malformed: .* in \{"choices": \[oops$/)
  })

  it('an error object inside the stream is a MODEL_ERROR with its message', async () => {
    server.reply(rawStream([sse([{ error: { message: 'context length exceeded', type: 'invalid_request_error' } }], false)]))
    await expect(prompt('go', options())).rejects.toMatchObject({ code: 'MODEL_ERROR', message: 'Model stream reported an error: context length exceeded' })
  })
})

describe('non-streaming', () => {
  it('reads a chat completion and its tool calls when stream is off', async () => {
    server.reply(json(completion(null, [{ id: 'n1', name: 'read_file', arguments: '{"path":"b"}' }])), json(completion('finished')))
    const agent = await createAgent(options({ tools: [readFile], advanced: { connection: { stream: false } } }))
    const response = await agent.send('go')
    const result = await response.result()
    expect(result).toMatchObject({ content: 'finished', usage: { inputTokens: 10, outputTokens: 6, totalTokens: 16 } })
    expect(result.toolCalls[0].output).toBe('contents of b')
    expect(server.requests[0].body.stream).toBe(false)
    expect(server.requests[0].body.stream_options).toBeUndefined()
    const events: string[] = []
    for await (const event of response.stream()) events.push(event.type)
    expect(events).toEqual(['turn_start', 'tool_use', 'tool_result', 'turn_end', 'turn_start', 'content', 'turn_end', 'usage', 'result'])
    await agent.close()
  })
})

describe('toolChoice and the output limit', () => {
  it('toolChoice goes as tool_choice until the model has called a tool; a send may choose its own', async () => {
    server.reply(
      json(completion(null, [{ id: 'c1', name: 'read_file', arguments: '{"path":"a"}' }])),
      json(completion('read it')),
      json(completion('no tools then')),
    )
    const agent = await createAgent(options({ tools: [readFile], toolChoice: { name: 'read_file' }, advanced: { connection: { stream: false } } }))
    expect(await (await agent.send('read a')).text()).toBe('read it')
    expect(await (await agent.send('just talk', { toolChoice: 'none' })).text()).toBe('no tools then')
    expect(server.requests.map((request) => request.body.tool_choice)).toEqual([{ type: 'function', function: { name: 'read_file' } }, 'auto', 'none'])
    await expect(agent.send('x', { toolChoice: 'any' as never })).rejects.toMatchObject({
      code: 'INVALID_INPUT',
      message: "toolChoice must be 'auto', 'none', 'required' or { name: string } (got \"any\")",
    })
    await agent.close()
  })

  it('an answer cut by maxOutputTokens ends stopReason max_tokens; turn_end says finishReason length', async () => {
    const cut = openaiChunks('The weather in')
    ;(cut.at(-2) as { choices: [{ finish_reason: string }] }).choices[0].finish_reason = 'length'
    server.reply(rawStream([sse(cut)]))
    const agent = await createAgent(options({ maxOutputTokens: 3 }))
    const response = await agent.send('weather?')
    const result = await response.result()
    expect(result).toMatchObject({ content: 'The weather in', stopReason: 'max_tokens' })
    const ends = []
    for await (const event of response.stream()) if (event.type === 'turn_end' || event.type === 'result') ends.push(event)
    expect(ends).toMatchObject([
      { type: 'turn_end', turn: 1, finishReason: 'length' },
      { type: 'result', subtype: 'success', result: { stopReason: 'max_tokens' } },
    ])
    expect(server.requests[0]!.body.max_completion_tokens).toBe(3)
    await agent.close()
  })
})

describe('connection options', () => {
  it('sends organization, project and custom headers, and accepts baseURL', async () => {
    server.reply(rawStream([sse(openaiChunks('hi'))]))
    await prompt('go', {
      model: 'gpt-test',
      apiKey: 'sk-2',
      baseURL: server.url + '/v1/',
      advanced: { connection: { organization: 'org-1', projectId: 'proj-1', headers: { 'x-tenant': 'acme' } } },
    })
    const headers = server.requests[0].headers
    expect(server.requests[0].url).toBe('/v1/chat/completions')
    expect(headers['openai-organization']).toBe('org-1')
    expect(headers['openai-project']).toBe('proj-1')
    expect(headers['x-tenant']).toBe('acme')
    expect(headers.authorization).toBe('Bearer sk-2')
  })

  it('uses max_tokens and no API key for an openai-compatible server', async () => {
    server.reply(rawStream([sse(openaiChunks('hi'))]))
    await prompt('go', { model: 'llama', provider: 'openai-compatible', baseUrl: server.url, maxOutputTokens: 64 })
    expect(server.requests[0].url).toBe('/chat/completions')
    expect(server.requests[0].headers.authorization).toBeUndefined()
    expect(server.requests[0].body.max_tokens).toBe(64)
    expect(server.requests[0].body.max_completion_tokens).toBeUndefined()
  })

  it('speaks the same protocol to deepseek, with the key from DEEPSEEK_API_KEY and max_tokens', async () => {
    server.reply(rawStream([sse(openaiChunks('hi'))]))
    process.env.DEEPSEEK_API_KEY = 'sk-deepseek'
    try {
      expect((await prompt('go', { model: 'deepseek-chat', provider: 'deepseek', baseUrl: server.url, maxOutputTokens: 32 })).content).toBe('hi')
    } finally {
      delete process.env.DEEPSEEK_API_KEY
    }
    expect(server.requests[0]).toMatchObject({ method: 'POST', url: '/chat/completions' })
    expect(server.requests[0].headers.authorization).toBe('Bearer sk-deepseek')
    expect(server.requests[0].body).toMatchObject({ model: 'deepseek-chat', max_tokens: 32 })
    expect(server.requests[0].body.max_completion_tokens).toBeUndefined()
  })

  it('times out a request that takes longer than requestTimeoutMs', async () => {
    server.reply(async (_req, res) => {
      await sleep(2000)
      res.end()
    })
    const started = Date.now()
    const error = await prompt('go', options({ advanced: { connection: { requestTimeoutMs: 150, maxRetries: 0 } } })).catch((e) => e)
    expect(error).toMatchObject({ code: 'MODEL_ERROR', message: 'Model request timed out after 150ms' })
    expect(Date.now() - started).toBeLessThan(1500)
  })

  it('times out a stream that stalls after it started', async () => {
    server.reply(async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      res.write(sse([{ choices: [{ index: 0, delta: { content: 'slow' } }] }], false))
      await sleep(2000)
      res.end()
    })
    await expect(prompt('go', options({ advanced: { connection: { requestTimeoutMs: 200 } } }))).rejects.toMatchObject({
      code: 'MODEL_ERROR',
      message: 'Model request timed out after 200ms',
    })
  })
})

describe('errors and retries', () => {
  it('retries 429 and 5xx with backoff, honouring retry-after-ms, then succeeds', async () => {
    server.reply(
      json({ error: { message: 'Rate limit reached' } }, 429, { 'retry-after-ms': '20' }),
      json({ error: { message: 'overloaded' } }, 503, { 'retry-after-ms': '20' }),
      rawStream([sse(openaiChunks('third time'))]),
    )
    const result = await prompt('go', options())
    expect(result.content).toBe('third time')
    expect(server.requests).toHaveLength(3)
    expect(server.requests[2].body).toEqual(server.requests[0].body)
  })

  it('honours retry-after in seconds', async () => {
    // Longer than the 250 ms the runtime waits when the server names no time.
    server.reply(json({ error: { message: 'slow down' } }, 429, { 'retry-after': '0.6' }), rawStream([sse(openaiChunks('after the wait'))]))
    const started = Date.now()
    expect((await prompt('go', options())).content).toBe('after the wait')
    expect(Date.now() - started).toBeGreaterThanOrEqual(550)
    expect(server.requests).toHaveLength(2)
  })

  it('quotes at most the first 500 characters of an error body that is not JSON', async () => {
    const body = 'x'.repeat(499) + 'yz' + 'w'.repeat(1500)
    server.reply((_req, res) => void res.writeHead(401, { 'content-type': 'text/plain' }).end(body))
    const error = await prompt('go', options()).catch((e) => e)
    expect(error.message).toBe(`Model request failed with status 401 Unauthorized: ${'x'.repeat(499)}y…`)
  })

  it('does not retry a connection that was dropped', async () => {
    server.reply((_req, res) => void res.socket!.destroy())
    await expect(prompt('go', options())).rejects.toMatchObject({ code: 'MODEL_ERROR' })
    expect(server.requests).toHaveLength(1)
  })

  it('gives up after maxRetries with the last status and the body\'s error message', async () => {
    server.reply(json({ error: { message: 'Rate limit reached for gpt-test' } }, 429, { 'retry-after-ms': '5' }))
    const error = await prompt('go', options({ advanced: { connection: { maxRetries: 1 } } })).catch((e) => e)
    expect(error).toBeInstanceOf(SdkError)
    expect(error).toMatchObject({ code: 'MODEL_ERROR', status: 429, message: 'Model request failed with status 429 Too Many Requests: Rate limit reached for gpt-test' })
    expect(server.requests).toHaveLength(2)
  })

  it('does not retry other client errors, and quotes a non-JSON body', async () => {
    server.reply((_req, res) => {
      res.writeHead(401, { 'content-type': 'text/plain' })
      res.end('invalid api key')
    })
    await expect(prompt('go', options())).rejects.toMatchObject({ code: 'MODEL_ERROR', status: 401, message: 'Model request failed with status 401 Unauthorized: invalid api key' })
    expect(server.requests).toHaveLength(1)
  })

  it('a refused connection is a MODEL_ERROR naming the URL', async () => {
    const error = await prompt('go', { model: 'm', apiKey: 'k', baseUrl: 'http://127.0.0.1:9/v1' }).catch((e) => e)
    expect(error.code).toBe('MODEL_ERROR')
    expect(error.message).toMatch(/^Model request to http:\/\/127\.0\.0\.1:9\/v1\/chat\/completions failed: .*refused/i)
  })

  it('a failed run leaves the session usable', async () => {
    server.reply(json({ error: { message: 'bad gateway' } }, 400), rawStream([sse(openaiChunks('recovered'))]))
    const agent = await createAgent(options())
    await expect((await agent.send('one')).text()).rejects.toMatchObject({ status: 400 })
    expect(await (await agent.send('two')).text()).toBe('recovered')
    await agent.close()
  })
})
