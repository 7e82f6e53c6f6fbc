// Starts the real model servers that scripts/real-servers/setup.py installed, and a recording
// proxy in front of them that shows what we sent and what they answered.
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { defineTool, type AgentResponse, type PromptResult, type StreamEvent } from '../../index.js'
import { listenLocal } from '../helpers/server.js'

export const CACHE = process.env.ARH_REAL_SERVERS_CACHE || join(__dirname, '..', '..', '.cache', 'real-servers')
const STATUS = join(CACHE, 'status.json')

export interface Part {
  ok: boolean
  reason?: string
  python?: string
  gguf?: string
  bin?: string
}
export interface SetupStatus {
  llama: Part
  litellm: Part
}

/** What the setup left, or why there is nothing to run: `{ reason }`. */
export function setupStatus(): SetupStatus | { reason: string } {
  if (!existsSync(STATUS)) return { reason: `${STATUS} is missing: run \`python3 scripts/real-servers/setup.py\` (npm test does)` }
  try {
    return JSON.parse(readFileSync(STATUS, 'utf8')) as SetupStatus
  } catch (error) {
    return { reason: `${STATUS} is unreadable: ${error}` }
  }
}

/** The setup's llama part, or why it cannot run. */
export function llamaSetup(): { python: string; gguf: string } | { reason: string } {
  const status = setupStatus()
  if ('reason' in status) return { reason: status.reason }
  const llama = status.llama
  if (!llama?.ok) return { reason: `llama-cpp-python setup failed: ${llama?.reason ?? 'no record'}` }
  if (!existsSync(llama.python!)) return { reason: `${llama.python} is missing (run the setup again)` }
  if (!existsSync(llama.gguf!)) return { reason: `model file ${llama.gguf} is missing (run the setup again)` }
  return { python: llama.python!, gguf: llama.gguf! }
}

export function litellmSetup(): { bin: string } | { reason: string } {
  const status = setupStatus()
  if ('reason' in status) return { reason: status.reason }
  const litellm = status.litellm
  if (!litellm?.ok) return { reason: `litellm setup failed: ${litellm?.reason ?? 'no record'}` }
  if (!existsSync(litellm.bin!)) return { reason: `${litellm.bin} is missing (run the setup again)` }
  return { bin: litellm.bin! }
}

export async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

export interface RunningServer {
  url: string
  /** What it printed (its last 20000 characters). */
  output(): string
  stop(): Promise<void>
}

/**
 * Starts `command` in its own process group and waits until GET `readyUrl` answers 200; rejects
 * with the server's output when it exits or is not ready after `timeoutMs`.
 */
export async function startServer(
  command: string,
  args: string[],
  { url, readyPath, timeoutMs, env }: { url: string; readyPath: string; timeoutMs: number; env?: Record<string, string> },
): Promise<RunningServer> {
  let output = ''
  const child: ChildProcess = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: true, env: { ...process.env, ...env } })
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-20000)
  }
  child.stdout!.on('data', collect)
  child.stderr!.on('data', collect)
  let exited: string | undefined
  const gone = new Promise<void>((resolve) => {
    child.on('exit', (code, signal) => {
      exited = `exited (${signal ?? code})`
      resolve()
    })
    child.on('error', (error) => {
      exited = `could not start: ${error.message}`
      resolve()
    })
  })
  const stop = async () => {
    if (exited) return
    try {
      process.kill(-child.pid!, 'SIGTERM')
    } catch {}
    const killer = setTimeout(() => {
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {}
    }, 5000)
    await gone
    clearTimeout(killer)
  }
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (exited) throw new Error(`${command} ${exited} before it was ready:\n${output.slice(-3000)}`)
    if (Date.now() > deadline) {
      await stop()
      throw new Error(`${command} was not ready after ${timeoutMs} ms:\n${output.slice(-3000)}`)
    }
    const status = await fetch(url + readyPath, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.status,
      () => 0,
    )
    if (status === 200) break
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  return { url, output: () => output, stop }
}

export interface Exchange {
  method: string
  url: string
  headers: IncomingHttpHeaders
  /** The request body, parsed when it is JSON. */
  body: any
  status?: number
  responseHeaders?: IncomingHttpHeaders
  /** The response as it arrived (SSE text or JSON text). */
  response: string
  /** The client closed the connection before the response ended. */
  clientClosedEarly: boolean
  done: Promise<void>
}

export interface RecordingProxy {
  url: string
  exchanges: Exchange[]
  close(): Promise<void>
}

/** Forwards every request to `target`, passing the response through as it streams. */
export async function recordingProxy(target: string): Promise<RecordingProxy> {
  const exchanges: Exchange[] = []
  const upstream = new URL(target)
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const raw = Buffer.concat(chunks)
    let body: any = raw.toString('utf8')
    try {
      body = JSON.parse(body)
    } catch {}
    let finished!: () => void
    const exchange: Exchange = {
      method: req.method ?? '',
      url: req.url ?? '',
      headers: req.headers,
      body,
      response: '',
      clientClosedEarly: false,
      done: new Promise<void>((resolve) => (finished = resolve)),
    }
    exchanges.push(exchange)
    const forward = request(
      // A connection of its own per request: a server that dropped a kept-alive one after a
      // failed stream would otherwise fail the next request with "socket hang up".
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host }, agent: false },
      (answer) => {
        exchange.status = answer.statusCode
        exchange.responseHeaders = answer.headers
        res.writeHead(answer.statusCode ?? 502, answer.headers)
        answer.on('data', (chunk: Buffer) => {
          exchange.response += chunk.toString('utf8')
          res.write(chunk)
        })
        answer.on('end', () => {
          res.end()
          finished()
        })
        answer.on('error', () => {
          res.destroy()
          finished()
        })
      },
    )
    forward.on('error', (error) => {
      if (!res.headersSent) res.writeHead(502)
      res.end(String(error))
      finished()
    })
    res.on('close', () => {
      if (!res.writableFinished) {
        exchange.clientClosedEarly = true
        forward.destroy()
        finished()
      }
    })
    forward.end(raw)
  })
  return { ...(await listenLocal(server)), exchanges }
}

/** The `data:` payloads of an SSE text, parsed (`[DONE]` left out). */
export function sseData(text: string): any[] {
  return text
    .split(/\r?\n/)
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(5).trim())
    .filter((data) => data && data !== '[DONE]')
    .map((data) => JSON.parse(data))
}

export const LLAMA_MODEL = 'smollm2'

/**
 * llama-cpp-python's OpenAI-compatible server with SmolLM2-135M, on a free port. Its documented
 * function-calling chat format for models without their own is `chatml-function-calling`
 * (SmolLM2 speaks ChatML); the seed is fixed, and the tests ask for temperature 0.
 */
export async function startLlama(setup: { python: string; gguf: string }): Promise<RunningServer> {
  const port = await freePort()
  // prettier-ignore
  const args = [
    '-m', 'llama_cpp.server', '--model', setup.gguf, '--model_alias', LLAMA_MODEL,
    '--host', '127.0.0.1', '--port', String(port),
    '--chat_format', 'chatml-function-calling', '--seed', '42', '--n_ctx', '4096',
    // One thread: with the other test files (or a build) busy on the 2 cores, llama.cpp's two
    // OpenMP threads wait on each other and generate 4-6x slower than one.
    '--n_threads', '1', '--n_threads_batch', '1', '--verbose', 'False',
  ]
  return startServer(setup.python, args, { url: `http://127.0.0.1:${port}`, readyPath: '/v1/models', timeoutMs: 90_000 })
}

/** A response's text deltas, result and every event, in that order. */
export async function collect(response: AgentResponse): Promise<{ result: PromptResult; events: StreamEvent[]; deltas: string[] }> {
  const deltas: string[] = []
  for await (const delta of response.textStream()) deltas.push(delta)
  const result = await response.result()
  const events: StreamEvent[] = []
  for await (const event of response.stream()) events.push(event)
  return { result, events, deltas }
}

/** The `get_weather` tool both files offer, and the inputs it ran with. */
export function weatherTool() {
  const calls: Array<{ city: string }> = []
  const tool = defineTool<{ city: string }>({
    name: 'get_weather',
    description: 'Gets the current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    execute: (input) => {
      calls.push(input)
      return `Sunny, 21 degrees in ${input.city}`
    },
  })
  return { tool, calls }
}
