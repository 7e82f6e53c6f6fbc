// A real HTTP server on 127.0.0.1 that plays a model provider: each request is recorded and
// answered by the next handler in the queue.
import { createServer, type IncomingMessage, type ServerResponse, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, beforeEach } from 'vitest'

export interface Recorded {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: any
}

export type Handler = (req: Recorded, res: ServerResponse) => void | Promise<void>

export interface ModelServer {
  url: string
  requests: Recorded[]
  /** Queues handlers; each request takes the next one (the last one repeats). */
  reply(...handlers: Handler[]): void
  close(): Promise<void>
}

/**
 * `server` listening on a free port of 127.0.0.1: its URL, and a `close` that also ends the
 * connections still open (a streaming answer or a keep-alive one would hold `server.close`).
 */
export async function listenLocal(server: Server): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<import('node:net').Socket>()
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    async close() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

export async function startServer(): Promise<ModelServer> {
  const requests: Recorded[] = []
  let queue: Handler[] = []
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const text = Buffer.concat(chunks).toString('utf8')
    let body: any = text
    try {
      body = JSON.parse(text)
    } catch {}
    const recorded = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body }
    requests.push(recorded)
    const handler = queue.length > 1 ? queue.shift()! : queue[0]
    if (!handler) {
      res.writeHead(500).end('no handler queued')
      return
    }
    try {
      await handler(recorded, res)
    } catch (error) {
      if (!res.headersSent) res.writeHead(500)
      res.end(String(error))
    }
  })
  const { url, close } = await listenLocal(server)
  return {
    url,
    requests,
    reply(...handlers) {
      queue = handlers
    },
    close,
  }
}

/** A server for the whole test file, its recorded requests cleared before each test. */
export function useServer(): ModelServer {
  let current: ModelServer
  beforeAll(async () => {
    current = await startServer()
  })
  afterAll(() => current.close())
  beforeEach(() => {
    current.requests.length = 0
  })
  return {
    get url() {
      return current.url
    },
    get requests() {
      return current.requests
    },
    reply: (...handlers) => current.reply(...handlers),
    close: () => current.close(),
  }
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Waits until `condition()` holds; fails the test after `timeoutMs` instead of hanging. */
export async function until(condition: () => boolean, timeoutMs = 2000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition still false after ${timeoutMs} ms: ${condition}`)
    await sleep(1)
  }
}

/**
 * Runs `attempt` until it is not refused because a released callback is still cleaning up (it
 * settles within a turn or two of its release); fails the test after `timeoutMs`.
 */
export async function onceSettled<T>(attempt: () => Promise<T>, timeoutMs = 2000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    try {
      return await attempt()
    } catch (error) {
      if (!/cleaning up/.test(String((error as Error)?.message)) || Date.now() > deadline) throw error
      await sleep(1)
    }
  }
}

/** A promise that rejects with the signal's reason once it aborts (a hook or tool that waits for its deadline). */
export function untilAborted(signal: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))
}

export function json(body: unknown, status = 200, headers: Record<string, string> = {}): Handler {
  return (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers })
    res.end(JSON.stringify(body))
  }
}

/** Writes the given byte pieces as one SSE body, pausing between pieces so they arrive apart. */
export function rawStream(pieces: (string | Buffer)[], pauseMs = 5): Handler {
  return async (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    for (const piece of pieces) {
      res.write(piece)
      await sleep(pauseMs)
    }
    res.end()
  }
}

/** `data: <json>\n\n` for each chunk, then `data: [DONE]`. */
export function sse(chunks: unknown[], done = true): string {
  return chunks.map((chunk) => `data: ${JSON.stringify(chunk)}\n\n`).join('') + (done ? 'data: [DONE]\n\n' : '')
}

/** Splits text into pieces of `size` bytes, cutting through JSON and UTF-8 characters alike. */
export function splitBytes(text: string, size: number): Buffer[] {
  const bytes = Buffer.from(text, 'utf8')
  const pieces: Buffer[] = []
  for (let i = 0; i < bytes.length; i += size) pieces.push(bytes.subarray(i, i + size))
  return pieces
}

/** OpenAI chat-completion stream chunks for a text answer and/or tool calls. */
export function openaiChunks(text: string, toolCalls: { id: string; name: string; arguments: string }[] = [], usage = { prompt_tokens: 11, completion_tokens: 7 }) {
  const chunks: unknown[] = [{ choices: [{ index: 0, delta: { role: 'assistant', content: '' } }] }]
  for (const char of Array.from(text)) chunks.push({ choices: [{ index: 0, delta: { content: char } }] })
  toolCalls.forEach((call, index) => {
    const half = Math.floor(call.arguments.length / 2)
    chunks.push({ choices: [{ index: 0, delta: { tool_calls: [{ index, id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments.slice(0, half) } }] } }] })
    chunks.push({ choices: [{ index: 0, delta: { tool_calls: [{ index, function: { arguments: call.arguments.slice(half) } }] } }] })
  })
  chunks.push({ choices: [{ index: 0, delta: {}, finish_reason: toolCalls.length ? 'tool_calls' : 'stop' }] })
  chunks.push({ choices: [], usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens } })
  return chunks
}

/** A non-streamed chat completion. */
export function completion(text: string | null, toolCalls: { id: string; name: string; arguments: string }[] = [], usage = { prompt_tokens: 5, completion_tokens: 3 }) {
  return {
    id: 'cmpl-1',
    object: 'chat.completion',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: text,
          ...(toolCalls.length ? { tool_calls: toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) } : {}),
        },
        finish_reason: toolCalls.length ? 'tool_calls' : 'stop',
      },
    ],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  }
}
