// Model I/O safety (SPEC §11): secrets never come back, answers are bounded in time and size,
// an aborted stream stops costing CPU, and every string survives the stream.
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ConfigError, createAgent, prompt, SdkError, type AgentOptions, type LogEntry, type StreamEvent } from '../index.js'
import { runScript } from './helpers/child.js'
import { rawStream, sse, startServer, type ModelServer } from './helpers/server.js'

// Markers that must never come back: the key, a header value, user-info, a query value.
const KEY = 'sk-MARK-key-0001'
const HEADER = 'MARK-header-0002'
const USER = 'MARKuser3'
const PASSWORD = 'MARK-pass-0004'
const QUERY = 'MARK-query-0005'

let echo: ModelServer
let collector: ModelServer
beforeAll(async () => {
  // Answers every model request with the whole request (head and body) as its error message.
  echo = await startServer()
  echo.reply((request, res) => {
    const text = `${request.method} ${request.url}\n${JSON.stringify(request.headers)}\n${JSON.stringify(request.body)}`
    res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { message: text } }))
  })
  collector = await startServer()
  collector.reply((_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}'))
})
afterAll(async () => {
  await echo.close()
  await collector.close()
})

function secretOptions(provider: 'openai' | 'anthropic', logger?: (entry: LogEntry) => void): AgentOptions {
  const port = new URL(echo.url).port
  return {
    model: 'm',
    provider,
    apiKey: KEY,
    baseUrl: `http://${USER}:${PASSWORD}@127.0.0.1:${port}/v1?api-key=${QUERY}`,
    advanced: { connection: { headers: { 'x-gateway-token': HEADER }, maxRetries: 0 }, ...(logger ? { logger } : {}) },
  }
}

describe('secrets', () => {
  it.each(['openai', 'anthropic'] as const)('%s: an echoed key, header, user-info and query never reach the error, events, messages or logs', async (provider) => {
    const entries: LogEntry[] = []
    const agent = await createAgent(secretOptions(provider, (entry) => void entries.push(entry)))
    const response = await agent.send('hi')
    const events: StreamEvent[] = []
    for await (const event of response.stream()) events.push(event)
    const error = await response.text().catch((e) => e)
    // The server got every secret: they were sent, and hidden on the way back.
    const request = echo.requests.at(-1)!
    expect(JSON.stringify(request)).toContain(KEY)
    expect(JSON.stringify(request)).toContain(HEADER)
    expect(request.url).toContain(QUERY)

    expect(error).toBeInstanceOf(SdkError)
    expect(error.code).toBe('MODEL_ERROR')
    expect(error.status).toBe(401)
    // A base URL ending in /v1 gets /messages only (not /v1/v1/messages).
    const path = provider === 'openai' ? '/v1/chat/completions' : '/v1/messages'
    expect(error.message.startsWith(`Model request failed with status 401 Unauthorized: POST ${path}?api-key=***\n`)).toBe(true)
    expect(error.message).toContain('"x-gateway-token":"***"')
    for (const text of [error.message, JSON.stringify(error), JSON.stringify(events), JSON.stringify(agent.messages), JSON.stringify(entries)]) {
      expect(text).not.toContain('MARK')
    }
    expect(events.at(-1)).toMatchObject({ type: 'error', error: { code: 'MODEL_ERROR', message: error.message } })
    await agent.close()
  })

  it('a key given as a number is not quoted by the ConfigError', async () => {
    const error = await createAgent({ model: 'm', apiKey: 918273645 as unknown as string }).catch((e) => e)
    expect(error).toBeInstanceOf(ConfigError)
    expect(error.message).toBe('apiKey must be a string (got a number)')
  })

  it('the exported agent_run span carries the masked error, and a failed flush quotes no secret of the endpoint', async () => {
    const script = `
      const { createAgent, flushTelemetry } = require(process.env.ENTRY)
      const options = JSON.parse(process.env.OPTIONS)
      createAgent(options)
        .then((agent) => agent.send('hi').then((response) => response.text()).catch((error) => console.log(error.message)))
        .then(() => flushTelemetry())
        .then(() => console.log('flushed'), (error) => console.log(error.message))
    `
    const options = JSON.stringify(secretOptions('openai'))
    const exported = await runScript(script, { env: { OPTIONS: options, OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' } })
    expect(exported).toMatchObject({ code: 0, stderr: '' })
    expect(exported.stdout).toMatch(/^Model request failed with status 401 Unauthorized: POST \/v1\/chat\/completions\?api-key=\*\*\*\n/)
    expect(exported.stdout.endsWith('flushed\n')).toBe(true)
    const spans = JSON.stringify(collector.requests.map((request) => request.body))
    expect(spans).toContain('agent_run')
    expect(spans).toContain('Model request failed with status 401 Unauthorized')
    expect(spans + exported.stdout).not.toContain('MARK')

    // A collector that drops every connection, reached with a secret in its URL and headers.
    const down = createServer((socket) => socket.destroy())
    await new Promise<void>((resolve) => down.listen(0, '127.0.0.1', resolve))
    const { port } = down.address() as import('node:net').AddressInfo
    try {
      const failed = await runScript(script, {
        env: {
          OPTIONS: options,
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://otel:MARK-otel-pass@127.0.0.1:${port}/v1/traces?token=MARK-otel-token`,
          OTEL_EXPORTER_OTLP_HEADERS: 'x-otel-key=MARK-otel-header',
        },
      })
      expect(failed.code).toBe(0)
      expect(failed.stdout).toMatch(/\nspans could not be exported to http:\/\/127\.0\.0\.1:\d+\/v1\/traces: /)
      expect(failed.stdout + failed.stderr).not.toContain('MARK')
      // Refused outright: stderr names the variable, not the secrets.
      const refused = await runScript(script, { env: { OPTIONS: options, OTEL_EXPORTER_OTLP_ENDPOINT: `grpc://otel:MARK-x@collector:4317?key=MARK-y` } })
      expect(refused.stderr).toBe(
        'agent-runtime-hooks: OpenTelemetry export is off: OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL (got "grpc://collector:4317")\n',
      )
    } finally {
      await new Promise((resolve) => down.close(resolve))
    }
  })
})

// A model server in a child process, so that its CPU is not ours: /line streams one SSE line
// that never ends as fast as it can, /trickle one byte every 50 ms.
const FLOOD = `
  const http = require('node:http')
  const piece = Buffer.alloc(1 << 16, 'x')
  let sent = 0
  http.createServer((req, res) => {
    req.resume()
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    res.write('data: {"choices":[{"index":0,"delta":{"content":"')
    if (req.url.startsWith('/trickle')) {
      const timer = setInterval(() => res.write('x'), 50)
      res.on('close', () => clearInterval(timer))
      return
    }
    const pump = () => { while (res.write(piece)) sent += piece.length }
    res.on('drain', pump)
    pump()
  }).listen(0, '127.0.0.1', function () { console.log(this.address().port) })
`

let flood: ChildProcess
let floodUrl: string
beforeAll(async () => {
  flood = spawn(process.execPath, ['-e', FLOOD], { stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise<string>((resolve) => flood.stdout!.once('data', (data) => resolve(String(data).trim())))
  floodUrl = `http://127.0.0.1:${port}`
})
afterAll(() => void flood.kill())

function floodOptions(path: string, connection: NonNullable<NonNullable<AgentOptions['advanced']>['connection']>): AgentOptions {
  return { model: 'm', apiKey: 'k', baseUrl: `${floodUrl}/${path}`, advanced: { connection: { maxRetries: 0, ...connection } } }
}

async function failure(options: AgentOptions): Promise<{ error: any; elapsed: number }> {
  const started = Date.now()
  const error = await prompt('go', options).catch((e) => e)
  return { error, elapsed: Date.now() - started }
}

describe('bounded model I/O', () => {
  it('requestTimeoutMs fires while one line streams as fast as the server can send it', async () => {
    // A cap the line cannot reach in time (hundreds of MB/s arrive: RSS grows by what came).
    const rss = process.memoryUsage().rss
    const { error, elapsed } = await failure(floodOptions('line', { requestTimeoutMs: 500, maxResponseBytes: 2 ** 30 }))
    expect(error).toMatchObject({ code: 'MODEL_ERROR', message: 'Model request timed out after 500ms', status: 200 })
    expect(elapsed).toBeLessThan(1300)
    const grown = (process.memoryUsage().rss - rss) / 2 ** 20
    console.log(`one fast line: the 500 ms timeout fired after ${elapsed} ms (RSS +${grown.toFixed(0)} MiB)`)
  })

  it('requestTimeoutMs fires while bytes trickle', async () => {
    const { error, elapsed } = await failure(floodOptions('trickle', { requestTimeoutMs: 600 }))
    expect(error).toMatchObject({ code: 'MODEL_ERROR', message: 'Model request timed out after 600ms' })
    expect(elapsed).toBeLessThan(1400)
  })

  it('one line longer than maxResponseBytes (16 MiB by default) fails the run', async () => {
    const { error, elapsed } = await failure(floodOptions('line', {}))
    expect(error).toMatchObject({
      code: 'MODEL_ERROR',
      status: 200,
      message: 'Model answer is too large: an event-stream line is longer than 16777216 bytes (advanced.connection.maxResponseBytes)',
    })
    console.log(`one fast line: the 16 MiB cap fired after ${elapsed} ms`)
  })

  it('an aborted stream stops costing CPU at once, and memory stays bounded', async () => {
    const before = process.memoryUsage().rss
    const agent = await createAgent(floodOptions('line', { maxResponseBytes: 256 * 2 ** 20 }))
    const response = await agent.send('go')
    const settled = response.text().catch((e) => e)
    await new Promise((resolve) => setTimeout(resolve, 150))
    agent.abort(new Error('enough'))
    expect(await settled).toMatchObject({ message: 'enough' })
    // Let the abort land, then watch a second go by. A stream still being read would cost
    // most of a core in every such second and keep growing; on a loaded machine the first
    // second may still hold the abort's own clean-up, so a few seconds are looked at.
    await new Promise((resolve) => setTimeout(resolve, 100))
    let cpuMs = Infinity
    let grown = Infinity
    let rss = 0
    for (let second = 0; second < 4 && !(cpuMs < 150 && grown < 32); second++) {
      const cpu = process.cpuUsage()
      rss = process.memoryUsage().rss
      await new Promise((resolve) => setTimeout(resolve, 1000))
      const spent = process.cpuUsage(cpu)
      cpuMs = (spent.user + spent.system) / 1000
      grown = (process.memoryUsage().rss - rss) / 2 ** 20
      console.log(`second ${second + 1} after the abort: ${cpuMs.toFixed(1)} ms CPU; RSS ${((rss - before) / 2 ** 20).toFixed(0)} MiB over the start, then ${grown.toFixed(1)} MiB more`)
    }
    expect(cpuMs).toBeLessThan(150)
    expect(grown).toBeLessThan(32)
    expect(rss - before).toBeLessThan(600 * 2 ** 20)
    await agent.close()
  })
})

describe('answers that are not what was asked for, and strings', () => {
  let server: ModelServer
  beforeAll(async () => {
    server = await startServer()
  })
  afterAll(() => server.close())

  it('a 200 HTML page is a MODEL_ERROR with its status and an excerpt', async () => {
    server.reply((_req, res) => void res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>Please sign in</body></html>'))
    const error = await prompt('go', { model: 'm', apiKey: 'k', baseUrl: server.url }).catch((e) => e)
    expect(error).toMatchObject({
      code: 'MODEL_ERROR',
      status: 200,
      message: 'Model answer is not the event stream that was asked for (text/html): <html><body>Please sign in</body></html>',
    })
  })

  it('a surrogate pair split across two events arrives whole; a lone one becomes U+FFFD', async () => {
    const delta = (content: string) => `data: {"choices":[{"index":0,"delta":{"content":"${content}"}}]}\n\n`
    const end = sse([{ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }])
    server.reply(rawStream([delta('a\\ud83d'), delta('\\ude00'), delta('\\ud83d'), end]))
    const agent = await createAgent({ model: 'm', apiKey: 'k', baseUrl: server.url })
    const response = await agent.send('go')
    const deltas: string[] = []
    for await (const text of response.textStream()) deltas.push(text)
    expect(deltas).toEqual(['a', '😀', '\uFFFD'])
    expect(await response.text()).toBe('a😀\uFFFD')
    expect(agent.messages.at(-1)).toMatchObject({ role: 'assistant', content: 'a😀\uFFFD' })
    await agent.close()
  })
})

