// Worker processes for the many-workers tests (SPEC §8.3): every worker is one shared program
// (WORKER_PRELUDE) plus a few lines of its own (`body`), run in its own Node process against the
// package (`process.env.ENTRY`) and one PostgreSQL database. A worker reports what it saw as
// lines `<TAG> <json>` on stdout; the test drives it with files (READY / GO) and signals
// (SIGKILL, SIGSTOP, SIGCONT). Written from the contract, not the implementation.
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { childEnv } from './child.js'
import { parseTagged } from './durable.js'

const entry = resolve(__dirname, '..', '..', 'index.js')

/**
 * What every worker has. Environment it reads:
 * - PG: the PostgreSQL URL (`advanced.store: { postgres: PG }`); EFFECTS: the file the tool
 *   appends one line to each time its `execute` is entered;
 * - SESSION: the id `open()` resumes; PROMPT: what `race()` sends;
 * - LEASE_TTL_MS: `advanced.leaseTtlMs` (absent: the option is not given, default 30000);
 * - PERMISSION: `advanced.permission` (absent: not given, every tool runs; `default`: the
 *   `write` tool asks, and with no confirmation handler the call pauses);
 * - SIDE_EFFECT: the tool's `sideEffect` (default non_idempotent);
 * - HOLD: a file the tool waits for after recording its effect (bounded by HOLD_MAX_MS, default
 *   12000); without it the tool returns at once;
 * - READY / GO: `ready()` creates READY; `go()` waits for GO and returns the number in it (the
 *   test's clock at the moment it wrote it: a kill or a stop).
 *
 * The model (scripted) asks for one `Work` call per user prompt, id `call_<prompt>`, input
 * `{ who: <prompt> }`, and once it has been shown the result answers
 * `answer <prompt>: <id>=<output>`. Every model call prints MODEL with what the model was sent.
 */
export const WORKER_PRELUDE = String.raw`
const { createAgent, resumeAgent, defineTool, scriptedModel } = require(process.env.ENTRY)
const fs = require('node:fs')
const env = process.env
const emit = (tag, value) => process.stdout.write(tag + (value === undefined ? '' : ' ' + JSON.stringify(value)) + '\n')
const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)))
const forever = () => new Promise(() => setInterval(() => {}, 1 << 30))
const afterLastUser = (messages) => messages.slice(messages.map((m) => m.role).lastIndexOf('user') + 1)
emit('PID', process.pid)

const model = scriptedModel(({ messages }) => {
  const users = messages.filter((m) => m.role === 'user')
  const prompt = users.length ? String(users[users.length - 1].content) : ''
  emit('MODEL', { at: Date.now(), prompt, messages })
  const results = afterLastUser(messages).filter((m) => m.role === 'tool')
  if (results.length === 0) return { toolCalls: [{ id: 'call_' + prompt, name: 'Work', input: { who: prompt } }] }
  return { text: 'answer ' + prompt + ': ' + results.map((m) => m.tool_call_id + '=' + m.content).join(' | ') }
})
const work = defineTool({
  name: 'Work',
  kind: 'write',
  sideEffect: env.SIDE_EFFECT || 'non_idempotent',
  // A careless integrator's tool: it ignores its abort signal.
  execute: async (input) => {
    fs.appendFileSync(env.EFFECTS, JSON.stringify({ who: input.who, pid: process.pid, at: Date.now() }) + '\n')
    emit('STARTED', input.who)
    if (env.HOLD) {
      const deadline = Date.now() + Number(env.HOLD_MAX_MS || 12000)
      while (!fs.existsSync(env.HOLD) && Date.now() < deadline) await sleep(5)
    }
    emit('FINISHED', input.who)
    return 'done ' + input.who
  },
})
const options = {
  model,
  tools: [work],
  advanced: {
    store: { postgres: env.PG },
    ...(env.LEASE_TTL_MS ? { leaseTtlMs: Number(env.LEASE_TTL_MS) } : {}),
    ...(env.PERMISSION ? { permission: env.PERMISSION } : {}),
  },
}
const failure = (e) => ({ name: e && e.constructor && e.constructor.name, code: e && e.code, message: String(e && e.message) })
/** { ok: true, value } or { ok: false, name, code, message } */
const outcome = (promise) => Promise.resolve().then(() => promise).then((value) => ({ ok: true, value }), (e) => ({ ok: false, ...failure(e) }))
const summary = (r) => ({ stopReason: r.stopReason, result: r.result, pendingApprovals: r.pendingApprovals, toolCalls: r.toolCalls.map((c) => ({ id: c.id, output: c.output, isError: c.isError })) })
/** A run's outcome as printed: { ok: true, ...summary } or the failure. */
const settled = async (response) => {
  const r = await outcome(response.result())
  return r.ok ? { ok: true, ...summary(r.value) } : r
}
function ready() { if (env.READY) fs.writeFileSync(env.READY, String(process.pid)); emit('READY') }
async function go() {
  const deadline = Date.now() + 15000
  while (!fs.existsSync(env.GO)) {
    if (Date.now() > deadline) throw new Error('GO never came')
    await sleep(1)
  }
  return Number(fs.readFileSync(env.GO, 'utf8'))
}
/** resumeAgent(SESSION): emits PENDING and MESSAGES. */
async function open(extra = {}) {
  const agent = await resumeAgent({ ...options, ...extra, sessionId: env.SESSION })
  emit('PENDING', agent.pendingApprovals)
  emit('MESSAGES', agent.messages)
  return agent
}
/** Opens SESSION, says READY, waits for GO, sends PROMPT: emits SEND (when it settled), then RESULT when it was accepted. */
async function race() {
  const agent = await open()
  ready()
  await go()
  const sent = await outcome(agent.send(env.PROMPT))
  emit('SEND', sent.ok ? { ok: true, at: Date.now() } : { ...sent, at: Date.now() })
  if (sent.ok) emit('RESULT', await settled(sent.value))
  await agent.close()
}
`

/** The whole worker program: the prelude, then `body` inside an async main. */
export function workerProgram(body: string): string {
  return `${WORKER_PRELUDE}
;(async () => {
${body}
})().then(() => emit('END'), (e) => { emit('FAILED', failure(e)); process.exitCode = 1 })
`
}

export interface Line {
  tag: string
  value: any
}

export interface Worker {
  readonly name: string
  readonly proc: ChildProcess
  /** Every `<TAG> <json>` line so far, in order. */
  readonly lines: Line[]
  /** The values of lines tagged `tag` so far, in order. */
  all(tag: string): any[]
  /** The value of the last line tagged `tag` (fails, with the worker's output, when there is none). */
  one(tag: string): any
  /** Resolves with the first line tagged `tag` (fails after `timeoutMs`, or when the worker exits first). */
  waitFor(tag: string, timeoutMs?: number): Promise<any>
  /** Resolves when the process has exited (≤ its lifetime bound). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
  readonly stdout: () => string
  readonly stderr: () => string
  signal(signal: NodeJS.Signals): void
  /** What it printed, for failure messages. */
  describe(): string
}

const live = new Set<Worker>()


/** Spawns a worker running `body`; it is SIGKILLed after `lifetimeMs` (default 14 s) whatever happens. */
export function startWorker(name: string, body: string, env: Record<string, string | undefined>, lifetimeMs = 14000): Worker {
  const proc = spawn(process.execPath, ['-e', workerProgram(body)], { env: childEnv({ ...env, ENTRY: entry }), stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  let pending = ''
  const lines: Line[] = []
  const waiters: { tag: string; resolve: (value: any) => void }[] = []
  let exitInfo: { code: number | null; signal: NodeJS.Signals | null } | undefined
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    proc.on('close', (code, signal) => {
      exitInfo = { code, signal }
      clearTimeout(bound)
      live.delete(worker)
      done(exitInfo)
    })
  })
  const bound = setTimeout(() => {
    try {
      proc.kill('SIGKILL')
    } catch {}
  }, lifetimeMs)
  proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk
    pending += chunk
    const parts = pending.split('\n')
    pending = parts.pop()!
    for (const text of parts) {
      const line = parseTagged(text)
      if (!line) continue
      lines.push(line)
      for (const waiter of waiters.filter((w) => w.tag === line.tag)) {
        waiters.splice(waiters.indexOf(waiter), 1)
        waiter.resolve(line.value)
      }
    }
  })
  proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const all = (tag: string) => lines.filter((line) => line.tag === tag).map((line) => line.value)
  const describe = () => `worker ${name} (pid ${proc.pid}${exitInfo ? `, exited ${JSON.stringify(exitInfo)}` : ''})\n--- stdout:\n${stdout}\n--- stderr:\n${stderr}`
  const worker: Worker = {
    name,
    proc,
    lines,
    all,
    one(tag) {
      const values = all(tag)
      if (values.length === 0) throw new Error(`${name} printed no ${tag} line\n${describe()}`)
      return values.at(-1)
    },
    waitFor(tag, timeoutMs = 10000) {
      const seen = lines.find((line) => line.tag === tag)
      if (seen) return Promise.resolve(seen.value)
      return new Promise((resolveValue, reject) => {
        const timer = setTimeout(() => reject(new Error(`${name}: no ${tag} line within ${timeoutMs} ms\n${describe()}`)), timeoutMs)
        const waiter = {
          tag,
          resolve: (value: any) => {
            clearTimeout(timer)
            resolveValue(value)
          },
        }
        waiters.push(waiter)
        void exited.then(() =>
          setTimeout(() => {
            if (!waiters.includes(waiter)) return
            waiters.splice(waiters.indexOf(waiter), 1)
            clearTimeout(timer)
            reject(new Error(`${name} exited before printing ${tag}\n${describe()}`))
          }, 20),
        )
      })
    },
    exited,
    stdout: () => stdout,
    stderr: () => stderr,
    signal(signal) {
      if (exitInfo === undefined) proc.kill(signal)
    },
    describe,
  }
  live.add(worker)
  return worker
}

/** SIGKILLs every worker still running (each was started here, by its own pid): for afterEach. */
export async function killLiveWorkers(): Promise<void> {
  const running = [...live]
  for (const worker of running) {
    worker.signal('SIGKILL')
  }
  await Promise.all(running.map((worker) => worker.exited))
}

/** Runs `body` in a worker to its end and checks that it got there (printed END, no FAILED). */
export async function runWorker(name: string, body: string, env: Record<string, string | undefined>, lifetimeMs = 12000): Promise<Worker> {
  const worker = startWorker(name, body, env, lifetimeMs)
  await worker.exited
  ended(worker)
  return worker
}

/** Throws, with the worker's output, unless it printed END and no FAILED. */
export function ended(worker: Worker): Worker {
  if (worker.all('FAILED').length > 0 || worker.all('END').length !== 1) throw new Error(`${worker.name} did not run to its end\n${worker.describe()}`)
  return worker
}

/** The effects file as records (one per `execute` entered), `[]` when the tool never ran. */
export function effects(path: string): { who: string; pid: number; at: number }[] {
  if (!existsSync(path)) return []
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line))
}

/** Creates `path` with `content` atomically (a worker polling for it never reads it half written). */
export function publish(path: string, content = ''): void {
  writeFileSync(`${path}.tmp`, content)
  renameSync(`${path}.tmp`, path)
}
