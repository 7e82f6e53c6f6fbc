// Queued webhooks (SPEC §8.3, `delivery: 'queue'`), written from the contract: a notification is
// written to the store's outbox and delivered at least once by any process attached to the store,
// each attempt carrying one `Idempotency-Key`; retries back off; `maxAttempts` gives a row up; a
// critical row given up fails its run while it runs; result controls cannot be queued;
// `drainOutbox` tries every row once now. Receivers are real HTTP servers on 127.0.0.1; the store
// is a SQLite file in a temp dir (the PostgreSQL outbox runs the same conformance suite in
// tests/store.rs). The kill tests SIGKILL a child process mid-delivery and after the row was
// committed, then deliver from this process.
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ConfigError, createAgent, CriticalHookDeliveryError, defineTool, drainOutbox, scriptedModel, type AgentHook, type AgentOptions } from '../index.js'
import { childEnv, runScript } from './helpers/child.js'
import { child, childKilledAt, childProgram, effects } from './helpers/durable.js'
import { startServer, until, type ModelServer, type Recorded } from './helpers/server.js'

let receiver: ModelServer
const routes: Record<string, (req: Recorded, res: ServerResponse) => void> = {}
beforeAll(async () => {
  receiver = await startServer()
  receiver.reply((req, res) => {
    const route = routes[req.url]
    if (route) return route(req, res)
    res.writeHead(204).end()
  })
})
afterAll(() => receiver.close())

const dirs: string[] = []
let dir = ''
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'arh-outbox-'))
  dirs.push(dir)
  receiver.requests.length = 0
  for (const key of Object.keys(routes)) delete routes[key]
})
afterAll(() => {
  for (const path of dirs) rmSync(path, { recursive: true, force: true })
})
const store = () => ({ sqlite: join(dir, 'sessions.db') })
const at = (path: string) => receiver.requests.filter((req) => req.url === path)
const status = (code: number) => (_: Recorded, res: ServerResponse) => void res.writeHead(code).end()

/** One tool call (`lookup`), then a final answer. */
const model = () =>
  scriptedModel((request) =>
    request.messages.some((message) => message.role === 'tool') ? { text: 'done' } : { toolCalls: [{ id: 'call_1', name: 'lookup', input: { q: 'x' } }] },
  )
const lookup = (wait = 0) =>
  defineTool({
    name: 'lookup',
    kind: 'readonly',
    execute: async (_input, { signal }) => {
      await new Promise((done, fail) => {
        const timer = setTimeout(done, wait)
        signal.addEventListener('abort', () => (clearTimeout(timer), fail(signal.reason)), { once: true })
      })
      return 'found'
    },
  })
const queuedHook = (path: string, extra: Record<string, unknown> = {}, type: AgentHook['type'] = 'PostToolUse'): AgentHook => ({
  id: `audit${path.replace(/\//g, '-')}`,
  type,
  webhook: { url: `${receiver.url}${path}`, delivery: 'queue', ...extra },
})
const options = (hooks: AgentHook[], tool = lookup(), extra: Partial<NonNullable<AgentOptions['advanced']>> = {}): AgentOptions => ({
  model: model(),
  tools: [tool],
  advanced: { store: store(), hooks, ...extra },
})
async function runOnce(opts: AgentOptions) {
  const agent = await createAgent(opts)
  try {
    return await (await agent.send('go')).result()
  } finally {
    await agent.close()
  }
}
/** Drains until nothing is queued, waiting a moment between drains (a row this process's own
 * deliverer holds is not drained, and leaves the queue once its attempt is reported). */
async function settled(limit = 100) {
  for (let n = 0; n < limit; n++) {
    if ((await drainOutbox({ store: store() })).remaining === 0) return
    await new Promise((done) => setTimeout(done, 20))
  }
  throw new Error('the outbox did not empty')
}
async function drainUntilEmpty(limit = 40) {
  const drains = []
  for (let n = 0; n < limit; n++) {
    const drained = await drainOutbox({ store: store() })
    drains.push(drained)
    if (drained.remaining === 0) break
    // A row the process's own deliverer holds at that moment is not tried by the drain: give its
    // attempt time to end (a loaded machine drained twelve times within one attempt).
    if (drained.delivered + drained.failed === 0) await new Promise((done) => setTimeout(done, 250))
  }
  return drains
}

describe('configuration', () => {
  it('a result control cannot be queued, maxAttempts needs queue, and must be a positive integer: ConfigError naming the field', async () => {
    const control = { id: 'gate', type: 'PreToolUse' as const, webhook: { url: `${receiver.url}/gate`, delivery: 'queue' as const, responseHandling: 'toolCall' as const } }
    const refused = await createAgent(options([control])).catch((error) => error)
    expect(refused).toBeInstanceOf(ConfigError)
    expect(refused.message).toContain("delivery 'queue' is only for notifications")
    const attempts = await createAgent(options([{ id: 'a', type: 'PostToolUse', webhook: { url: `${receiver.url}/a`, maxAttempts: 3 } }])).catch((error) => error)
    expect(attempts).toBeInstanceOf(ConfigError)
    expect(attempts.message).toBe(`advanced.hooks[0] (hook "a").webhook.maxAttempts is only for delivery: 'queue'`)
    for (const bad of [0, -1, 1.5, '3', null]) {
      const error = await createAgent(options([queuedHook('/b', { maxAttempts: bad })])).catch((error) => error)
      expect(error, String(bad)).toBeInstanceOf(ConfigError)
      expect(error.message).toMatch(/^advanced\.hooks\[0\] \(hook "audit-b"\)\.webhook\.maxAttempts must be a positive integer no greater than 10000/)
    }
    const unknown = await createAgent(options([{ id: 'c', type: 'PostToolUse', webhook: { url: `${receiver.url}/c`, delivery: 'later' as any } }])).catch((error) => error)
    expect(unknown.message).toBe(`advanced.hooks[0] (hook "c").webhook.delivery must be 'fetch' or 'queue' (got "later")`)
  })
})

describe('delivery', () => {
  it('the run does not wait for a queued notification; it arrives once with an Idempotency-Key, the payload a fetch would send', async () => {
    let answer: (() => void) | undefined
    routes['/slow'] = (_req, res) => {
      answer = () => res.writeHead(200).end()
    }
    const started = Date.now()
    const result = await runOnce(options([queuedHook('/slow')]))
    expect(result.content).toBe('done')
    expect(Date.now() - started).toBeLessThan(2000)
    await until(() => at('/slow').length === 1)
    answer?.()
    await until(() => at('/slow').length === 1)
    const [request] = at('/slow')
    expect(request.method).toBe('POST')
    expect(request.headers['content-type']).toBe('application/json')
    expect(request.headers['idempotency-key']).toMatch(/^[0-9a-f]{64}$/)
    expect(request.body).toMatchObject({ event: 'PostToolUse', toolName: 'lookup', toolCallId: 'call_1', hookId: 'audit-slow', hookType: 'PostToolUse' })
    // Delivered (its report may take a moment): nothing stays queued, nothing is sent again.
    await settled()
    expect(await drainOutbox({ store: store() })).toEqual({ delivered: 0, failed: 0, remaining: 0 })
    expect(at('/slow')).toHaveLength(1)
  })

  it('a receiver answering 500 five times then 200 gets it on the sixth attempt; every attempt has the same key and body', async () => {
    let calls = 0
    routes['/flaky'] = (_req, res) => void res.writeHead(++calls <= 5 ? 500 : 200).end()
    await runOnce(options([queuedHook('/flaky')]))
    const drains = await drainUntilEmpty()
    expect(drains.at(-1)?.remaining).toBe(0)
    const attempts = at('/flaky')
    expect(attempts).toHaveLength(6)
    expect(new Set(attempts.map((req) => req.headers['idempotency-key'])).size).toBe(1)
    expect(new Set(attempts.map((req) => JSON.stringify(req.body))).size).toBe(1)
    const total = drains.reduce((sum, drained) => ({ delivered: sum.delivered + drained.delivered, failed: sum.failed + drained.failed }), { delivered: 0, failed: 0 })
    // The process's own deliverer may have made some of the attempts; drains made the rest.
    expect(total.delivered + total.failed).toBeLessThanOrEqual(6)
    expect(await drainOutbox({ store: store() })).toEqual({ delivered: 0, failed: 0, remaining: 0 })
  })

  it('after maxAttempts failures the row is given up: no longer queued, never sent again', async () => {
    routes['/down'] = status(503)
    await runOnce(options([queuedHook('/down', { maxAttempts: 2 })]))
    await drainUntilEmpty()
    expect(at('/down')).toHaveLength(2)
    expect(await drainOutbox({ store: store() })).toEqual({ delivered: 0, failed: 0, remaining: 0 })
    await new Promise((done) => setTimeout(done, 1200))
    expect(at('/down')).toHaveLength(2)
  })

  it('a receiver answering with a redirect has not received it: the redirect is not followed, the attempt failed and is retried', async () => {
    routes['/moved'] = (_req, res) => void res.writeHead(307, { location: `${receiver.url}/elsewhere` }).end()
    routes['/elsewhere'] = status(200)
    await runOnce(options([queuedHook('/moved', { maxAttempts: 2 })]))
    const drains = await drainUntilEmpty()
    expect(at('/moved')).toHaveLength(2)
    expect(at('/elsewhere')).toEqual([])
    expect(drains.at(-1)?.remaining).toBe(0)
  })

  it('a retry waits its backoff (1 s after the first failure) unless drained', async () => {
    let calls = 0
    routes['/later'] = (_req, res) => void res.writeHead(++calls === 1 ? 500 : 200).end()
    await runOnce(options([queuedHook('/later')]))
    await until(() => at('/later').length === 1)
    const failedAt = Date.now()
    await until(() => at('/later').length === 2, 5000)
    const waited = Date.now() - failedAt
    expect(waited).toBeGreaterThanOrEqual(900)
    expect(waited).toBeLessThan(3000)
  })

  it('a critical queued notification given up after its last attempt fails the run still going in this process', async () => {
    routes['/critical'] = status(500)
    const hook = queuedHook('/critical', { maxAttempts: 1, fallback: 'none' }, 'PreToolUse')
    const agent = await createAgent(options([hook], lookup(3000)))
    const started = Date.now()
    const error = await (await agent.send('go')).result().catch((error) => error)
    expect(error).toBeInstanceOf(CriticalHookDeliveryError)
    expect(error.hookId).toBe('audit-critical')
    expect(Date.now() - started).toBeLessThan(2500)
    await agent.close()
    expect(at('/critical')).toHaveLength(1)
  })

  it('header templates resolve from the environment when sent; the store keeps the template, never the value', async () => {
    process.env.OUTBOX_TOKEN = 'sk-outbox-5f1e-never-stored'
    try {
      await runOnce(options([queuedHook('/auth', { headers: { Authorization: 'Bearer ${OUTBOX_TOKEN}' }, allowedEnvVars: ['OUTBOX_TOKEN'] })]))
      await until(() => at('/auth').length === 1)
      expect(at('/auth')[0].headers.authorization).toBe('Bearer sk-outbox-5f1e-never-stored')
      const files = readdirSync(dir).filter((name) => name.startsWith('sessions.db'))
      const text = files.map((name) => readFileSync(join(dir, name)).toString('latin1')).join('')
      expect(text).toContain('Bearer ${OUTBOX_TOKEN}')
      expect(text).not.toContain('sk-outbox-5f1e-never-stored')
    } finally {
      delete process.env.OUTBOX_TOKEN
    }
  })

  it('with the in-memory store, queued notifications are delivered by this process', async () => {
    const result = await runOnce({ model: model(), tools: [lookup()], advanced: { hooks: [queuedHook('/memory')] } })
    expect(result.content).toBe('done')
    await until(() => at('/memory').length === 1)
    expect(at('/memory')[0].headers['idempotency-key']).toMatch(/^[0-9a-f]{64}$/)
  })
})

// ---------------------------------------------------------------------------------------------
// A worker killed with queued notifications in its store: nothing is lost. On the SQLite file, and
// on PostgreSQL (a database of this file's own, dropped afterwards) when a server answers.
const admin = new URL(process.env.ARH_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
const database = `arh_outbox_${process.pid}_${Date.now()}`
const psql = (sql: string) => execFileSync('psql', [admin.toString(), '-v', 'ON_ERROR_STOP=1', '-qAtc', sql], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 })
let postgres: string | undefined
try {
  psql(`CREATE DATABASE ${database}`)
  const target = new URL(admin.toString())
  target.pathname = `/${database}`
  postgres = target.toString()
} catch (error) {
  console.warn(`skipping the PostgreSQL outbox tests (outbox.test.ts): no PostgreSQL server at ${admin.host} (${String((error as Error).message).split('\n')[0]})`)
}
afterAll(() => {
  if (postgres) psql(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
})

const entry = resolve(__dirname, '..', 'index.js')
type Backend = { name: string; env: () => Record<string, string>; store: () => { sqlite: string } | { postgres: string } }
const backends: Backend[] = [
  { name: 'SQLite', env: () => ({ DB: store().sqlite }), store },
  ...(postgres ? [{ name: 'PostgreSQL', env: () => ({ PG: postgres! }), store: () => ({ postgres: postgres! }) }] : []),
]

function worker(backend: Backend, env: Record<string, string>) {
  const body = `const agent = await createAgent(options); emit('SESSION', agent.sessionId); const r = await (await agent.send('go')).result(); emit('DONE', r.content); await forever()`
  const proc = spawn(process.execPath, ['-e', childProgram(body)], {
    env: childEnv({ ...env, ...backend.env(), ENTRY: entry, EFFECTS: join(dir, 'effects.jsonl'), CALLS: JSON.stringify([{ id: 'call_read', name: 'Read', input: { file: 'a.txt' } }]) }),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  proc.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  const exited = new Promise<void>((done) => proc.on('close', () => done()))
  return { proc, exited, printed: (tag: string) => stdout.split('\n').some((line) => line.startsWith(tag)) }
}

/** Drains `backend`'s store until nothing is queued. */
async function settledIn(backend: Backend, limit = 200) {
  for (let n = 0; n < limit; n++) {
    if ((await drainOutbox({ store: backend.store() })).remaining === 0) return
    await new Promise((done) => setTimeout(done, 20))
  }
  throw new Error('the outbox did not empty')
}

describe.each(backends)('a worker killed with queued notifications ($name)', (backend) => {
  it('killed mid-delivery: after its claim expires, another process delivers it; both attempts carry one key', async () => {
    const path = `/held-${backend.name}`
    let inFlight = false
    routes[path] = () => {
      inFlight = true // never answered: the worker dies waiting
    }
    const child = worker(backend, { HOOKS: JSON.stringify([queuedHook(path, { timeout: 0.5 })]) })
    await until(() => inFlight, 8000)
    child.proc.kill('SIGKILL')
    await child.exited
    routes[path] = status(200)
    // The dead worker's claim lasts the webhook's timeout (0.5 s) plus the claim margin (5 s):
    // until then nobody takes the row.
    expect(await drainOutbox({ store: backend.store() })).toEqual({ delivered: 0, failed: 0, remaining: 1 })
    await new Promise((done) => setTimeout(done, 5700))
    // This process's deliverer (attached when drainOutbox opened the store) or a drain sends it.
    await settledIn(backend)
    const attempts = at(path)
    expect(attempts).toHaveLength(2)
    expect(attempts[0].headers['idempotency-key']).toBe(attempts[1].headers['idempotency-key'])
    expect(attempts[0].body).toEqual(attempts[1].body)
  }, 20000)

  it('killed after the row was committed and before it was delivered: another process delivers it', async () => {
    const path = `/later-${backend.name}`
    routes[path] = status(503)
    // A short timeout: if the worker dies mid-attempt (it retries while it lives), its claim
    // lasts 0.5 s + 5 s rather than the default 30 s + 5 s.
    const child = worker(backend, { HOOKS: JSON.stringify([queuedHook(path, { timeout: 0.5 })]) })
    await until(() => child.printed('DONE'), 8000)
    child.proc.kill('SIGKILL')
    await child.exited
    routes[path] = status(200)
    await settledIn(backend, 500)
    // The dead worker may or may not have tried it (503) before it died; another process
    // delivered it (the outbox is empty), with the one key.
    const attempts = at(path)
    expect(attempts.length).toBeGreaterThanOrEqual(1)
    expect(attempts.at(-1)?.body).toMatchObject({ event: 'PostToolUse', toolCallId: 'call_read' })
    expect(new Set(attempts.map((req) => req.headers['idempotency-key'])).size).toBe(1)
  }, 20000)

  it('a run recovered after its worker was killed queues its tool call again under the same key: the first body is the one sent', async () => {
    const path = `/pre-${backend.name}`
    routes[path] = status(200)
    const ledger = join(dir, 'effects.jsonl')
    const env = {
      ...backend.env(),
      EFFECTS: ledger,
      CALLS: JSON.stringify([{ id: 'call_write', name: 'Write', input: { file_path: 'a.txt', content: 'x' } }]),
      // A lease a loaded machine keeps renewed (renewals every ~0.7 s); the killed worker's claim
      // still expires before the second process starts.
      LEASE_TTL_MS: '2000',
      // Idempotent: after the crash it goes through the whole pipeline again, PreToolUse included.
      SIDE_EFFECT: 'idempotent',
      // A short timeout: a row the killed worker held mid-attempt is claimed again 0.5 s + 5 s later.
      HOOKS: JSON.stringify([queuedHook(path, { timeout: 0.5 }, 'PreToolUse')]),
    }
    const allow = `options.advanced.permission = 'bypass-permissions';`
    const first = await childKilledAt(`${allow} await pause()`, { ...env, HANG_IN_TOOL: '1' }, 'STARTED')
    expect(first.killedAtMarker).toBe(true)
    const second = await child(`${allow} const agent = await open(); await go(agent); await agent.close()`, { ...env, SESSION: first.one('SESSION') })
    expect(second.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done' })
    await settledIn(backend, 600)
    // The tool ran in both processes, each run firing PreToolUse with its own operationId …
    expect(effects(ledger).map((entry) => entry.name)).toEqual(['Write', 'Write'])
    // … and the receiver got one body under the call's one key, the first run's.
    const sent = at(path)
    expect(sent.length).toBeGreaterThanOrEqual(1)
    expect(new Set(sent.map((req) => req.headers['idempotency-key'])).size).toBe(1)
    expect(new Set(sent.map((req) => JSON.stringify(req.body))).size).toBe(1)
    expect(sent[0].body).toMatchObject({ event: 'PreToolUse', toolCallId: 'call_write' })
  }, 30000)

  it('nothing keeps Node alive: a process whose agent ran (claims, a queued notification) and closed exits on its own', async () => {
    const path = `/exit-${backend.name}`
    routes[path] = status(200)
    const hooks = [queuedHook(path)]
    const storeJson = JSON.stringify(backend.store())
    const started = Date.now()
    const run = await runScript(
      `const { createAgent, defineTool, scriptedModel } = require(process.env.ENTRY)
       ;(async () => {
         const lookup = defineTool({ name: 'lookup', kind: 'readonly', execute: () => 'found' })
         const model = scriptedModel((r) => r.messages.some((m) => m.role === 'tool') ? { text: 'done' } : { toolCalls: [{ id: 'c1', name: 'lookup', input: {} }] })
         const agent = await createAgent({ model, tools: [lookup], advanced: { store: ${storeJson}, leaseTtlMs: 60000, hooks: ${JSON.stringify(hooks)} } })
         console.log((await (await agent.send('go')).result()).content)
         await agent.close()
       })()`,
      { timeoutMs: 10000 },
    )
    expect(run.timedOut, run.stderr).toBe(false)
    expect(run.code, run.stderr).toBe(0)
    expect(run.stdout.trim()).toBe('done')
    expect(Date.now() - started).toBeLessThan(5000)
  }, 15000)
})
