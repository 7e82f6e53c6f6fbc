// workers: many worker processes on one PostgreSQL database (issue 14, SPEC §8.3).
//
// - sessions_per_second (1, 2 and 4 worker processes): SESSIONS sessions shared by the workers,
//   all at once; each session is created, sent one message (its run claims the session's lease),
//   runs one scripted tool call with a queued PostToolUse notification, completes (releasing the
//   lease) and is closed. Sessions per second from GO (every worker has opened the store) to the
//   last worker's DONE, median of REPEATS runs, the worker counts interleaved.
// - first_claim_ms: a fresh worker process's first createAgent → send resolved (connecting,
//   the migration check and the claim), median over every worker started; idle_claim_ms: the
//   same in a process whose store is open, one session at a time (Blade's "first claim" starts a
//   worker on a store already initialized), median of 9; claim_ms: the same for the measured
//   sessions, all at once (so it includes waiting for a connection), median.
// - recovery: a worker (leaseTtlMs LEASE_TTL_MS) is SIGKILLed while its tool runs; once its lease
//   has expired, this process (its store open) resumeAgent's the session and resumes it:
//   recover_and_reclaim_ms is resumeAgent → resume() resolved (the session read, the dead run's
//   turn rebuilt, the lease claimed); rto_ms is SIGKILL → the recovered run's result, the TTL
//   wait included. Median of RECOVERIES.
// - notifications: every queued PostToolUse notification of the runs is delivered by the workers'
//   deliverers to a receiver on 127.0.0.1; delivered per second from GO to the last arrival (the
//   4-worker runs), and lost = queued − distinct Idempotency-Keys received.
// Everything is measured twice: over plain TCP (`sslmode=disable`, as Blade's figures were taken:
// node-postgres connects without TLS by default) and over TLS (`sslmode=prefer`, our default).
// Blade's published baseline (its PostgreSQL runtime store, 100 sessions, PostgreSQL 16, macOS):
// 106.48 sessions/s, first claim 13 ms, recover and reclaim 14.67 ms, 0 lost. Quoted, not run
// here. Needs a PostgreSQL server at ARH_BENCH_POSTGRES_URL (default
// postgres://postgres@127.0.0.1:5432/postgres) and psql; without one it is skipped with a line.
import { execFileSync, spawn } from 'node:child_process'
import { createServer } from 'node:http'
import { fileURLToPath } from 'node:url'
import { createAgent, defineTool, resumeAgent, scriptedModel } from '../index.mjs'
import { median } from './stats.mjs'

const SESSIONS = Number(process.env.WORKER_SESSIONS ?? 100)
const REPEATS = Number(process.env.WORKER_REPEATS ?? 3)
const RECOVERIES = Number(process.env.WORKER_RECOVERIES ?? 3)
const LEASE_TTL_MS = 1000
export const BLADE = { sessionsPerSecond: 106.48, firstClaimMs: 13, recoverAndReclaimMs: 14.67, lost: 0 }
const here = fileURLToPath(new URL('.', import.meta.url))

const admin = new URL(process.env.ARH_BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
const psql = (sql) => execFileSync('psql', [admin.toString(), '-v', 'ON_ERROR_STOP=1', '-qAtc', sql], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 15_000 }).toString()

/** Counts queued notifications by the first segment of their path (one per round), each
 * Idempotency-Key once, with the time it first arrived. */
function receiver() {
  const rounds = new Map()
  const server = createServer((req, res) => {
    const round = req.url.split('/')[1]
    const key = req.headers['idempotency-key']
    req.resume().on('end', () => {
      if (!rounds.has(round)) rounds.set(round, new Map())
      const keys = rounds.get(round)
      if (!keys.has(key)) keys.set(key, performance.now())
      res.writeHead(204).end()
    })
  })
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${server.address().port}`,
        keys: (round) => rounds.get(round) ?? new Map(),
        close: () => new Promise((done) => server.close(done)),
      }),
    ),
  )
}

function startWorker(env) {
  const child = spawn(process.execPath, [`${here}worker_process.mjs`], { env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'inherit'] })
  const lines = []
  const waiters = []
  let buffer = ''
  child.stdout.setEncoding('utf8').on('data', (chunk) => {
    buffer += chunk
    let end
    while ((end = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, end)
      buffer = buffer.slice(end + 1)
      const space = line.indexOf(' ')
      const entry = { tag: line.slice(0, space), value: JSON.parse(line.slice(space + 1)), at: performance.now() }
      lines.push(entry)
      for (const waiter of [...waiters]) waiter()
    }
  })
  const exited = new Promise((resolve) => child.on('close', resolve))
  const line = (tag, timeoutMs = 60_000) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`worker did not print ${tag} within ${timeoutMs} ms`)), timeoutMs)
      const check = () => {
        const found = lines.find((entry) => entry.tag === tag)
        if (found) {
          clearTimeout(timer)
          waiters.splice(waiters.indexOf(check), 1)
          resolve(found)
        }
      }
      waiters.push(check)
      check()
      exited.then(() => {
        if (!lines.some((entry) => entry.tag === tag)) reject(new Error(`worker exited before printing ${tag}`))
      })
    })
  return { child, line, exited }
}

async function until(condition, timeoutMs) {
  const deadline = performance.now() + timeoutMs
  while (!condition() && performance.now() < deadline) await new Promise((done) => setTimeout(done, 5))
  return condition()
}

let rounds = 0
async function round(db, sink, workers) {
  const name = `round${++rounds}`
  const started = Array.from({ length: workers }, (_, index) =>
    startWorker({ DB: db, RECEIVER: `${sink.url}/${name}`, WORKER: String(index), WORKERS: String(workers), SESSIONS: String(SESSIONS) }),
  )
  const ready = await Promise.all(started.map((worker) => worker.line('READY')))
  const go = performance.now()
  for (const worker of started) worker.child.stdin.write('GO\n')
  const done = await Promise.all(started.map((worker) => worker.line('DONE')))
  const wallMs = Math.max(...done.map((entry) => entry.at)) - go
  // Every session queued one notification, and each worker's cold and warm-up sessions 17 more.
  const expected = SESSIONS + 17 * workers
  await until(() => sink.keys(name).size >= expected, 30_000)
  const arrivals = [...sink.keys(name).values()]
  const received = sink.keys(name).size
  for (const worker of started) worker.child.stdin.end()
  await Promise.all(started.map((worker) => worker.exited))
  if (process.env.WORKER_VERBOSE) console.error(`${workers} workers: ${wallMs.toFixed(0)} ms wall, worker CPU ${done.map((entry) => entry.value.cpuMs.toFixed(0)).join(' + ')} ms`)
  return {
    sessionsPerSecond: SESSIONS / (wallMs / 1000),
    firstClaimMs: ready.map((entry) => entry.value.firstClaimMs),
    claimMs: done.flatMap((entry) => entry.value.claimMs),
    notificationsPerSecond: received / ((Math.max(...arrivals) - go) / 1000),
    queued: expected,
    received,
    lost: expected - received,
  }
}

const hang = defineTool({ name: 'lookup', kind: 'readonly', sideEffect: 'idempotent', execute: ({ q }) => `found ${q}` })
const recoveryOptions = (db, sink) => ({
  model: scriptedModel((request) =>
    request.messages.some((message) => message.role === 'tool') ? { text: 'done' } : { toolCalls: [{ id: 'call_1', name: 'lookup', input: { q: 'x' } }] },
  ),
  tools: [hang],
  advanced: { store: { postgres: db }, hooks: [{ id: 'audit', type: 'PostToolUse', webhook: { url: `${sink.url}/recovery/audit`, delivery: 'queue' } }] },
})

async function recovery(db, sink) {
  const worker = startWorker({ DB: db, RECEIVER: `${sink.url}/recovery`, MODE: 'hang', LEASE_TTL_MS: String(LEASE_TTL_MS), WORKER: '0', WORKERS: '1', SESSIONS: '1' })
  const sessionId = (await worker.line('SESSION')).value
  await worker.line('STARTED')
  const killed = performance.now()
  worker.child.kill('SIGKILL')
  await worker.exited
  // The dead worker's lease expires at most LEASE_TTL_MS after its last renewal.
  await new Promise((done) => setTimeout(done, LEASE_TTL_MS + 20))
  const t0 = performance.now()
  const agent = await resumeAgent({ ...recoveryOptions(db, sink), sessionId })
  const response = await agent.resume()
  const reclaimed = performance.now()
  const result = await response.result()
  const finished = performance.now()
  if (result.stopReason !== 'done') throw new Error(`the recovered run ended ${result.stopReason}`)
  await agent.close()
  return { recoverAndReclaimMs: reclaimed - t0, rtoMs: finished - killed }
}

/** Every figure for one connection URL. */
async function measure(db, sink) {
  // This process keeps the store open (an idle agent holds its pool), as a recovering server would.
  const warm = await createAgent(recoveryOptions(db, sink))
  await (await warm.send('warm up')).result()
  // A claim on its own, the store open (Blade's "first claim" starts a worker on a store already
  // initialized): createAgent → send resolved.
  const idleClaims = []
  for (let n = 0; n < 9; n++) {
    const started = performance.now()
    const agent = await createAgent(recoveryOptions(db, sink))
    const response = await agent.send('go')
    idleClaims.push(performance.now() - started)
    await response.result()
    await agent.close()
  }
  const counts = [1, 2, 4]
  const samples = Object.fromEntries(counts.map((count) => [count, []]))
  for (let repeat = 0; repeat < REPEATS; repeat++) for (const count of counts) samples[count].push(await round(db, sink, count))
  const recoveries = []
  for (let n = 0; n < RECOVERIES; n++) recoveries.push(await recovery(db, sink))
  await warm.close()
  const rounds = Object.values(samples).flat()
  const perSecond = Object.fromEntries(counts.map((count) => [count, Number(median(samples[count].map((s) => s.sessionsPerSecond)).toFixed(1))]))
  return {
    sessionsPerSecond: perSecond,
    ratioToBlade: Object.fromEntries(counts.map((count) => [count, Number((perSecond[count] / BLADE.sessionsPerSecond).toFixed(2))])),
    firstClaimMs: Number(median(rounds.flatMap((s) => s.firstClaimMs)).toFixed(1)),
    idleClaimMs: Number(median(idleClaims).toFixed(2)),
    claimMs: Number(median(rounds.flatMap((s) => s.claimMs)).toFixed(1)),
    recoverAndReclaimMs: Number(median(recoveries.map((r) => r.recoverAndReclaimMs)).toFixed(1)),
    rtoMs: Number(median(recoveries.map((r) => r.rtoMs)).toFixed(0)),
    notificationsPerSecond: Number(median(samples[4].map((s) => s.notificationsPerSecond)).toFixed(0)),
    notificationsQueued: rounds.reduce((sum, s) => sum + s.queued, 0),
    notificationsLost: rounds.reduce((sum, s) => sum + s.lost, 0),
  }
}

export async function workers() {
  const database = `arh_bench_${process.pid}_${Date.now()}`
  try {
    psql(`CREATE DATABASE ${database}`)
  } catch (error) {
    const reason = String(error?.message ?? error).split('\n')[0]
    console.log(`\nworkers: skipped, no PostgreSQL server or psql at ${admin.host} (${reason})`)
    return { skipped: `no PostgreSQL server at ${admin.host}` }
  }
  const url = (sslmode) => {
    const target = new URL(admin.toString())
    target.pathname = `/${database}`
    target.searchParams.set('sslmode', sslmode)
    return target.toString()
  }
  const sink = await receiver()
  try {
    // Plain TCP, as Blade's figures were taken (node-postgres connects without TLS by default),
    // then TLS (`sslmode=prefer`, our default, when the server offers it).
    const plain = await measure(url('disable'), sink)
    const tls = await measure(url('prefer'), sink)
    return { sessions: SESSIONS, repeats: REPEATS, recoveries: RECOVERIES, leaseTtlMs: LEASE_TTL_MS, plain, tls, blade: BLADE }
  } finally {
    await sink.close()
    psql(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(JSON.stringify(await workers(), null, 2))
