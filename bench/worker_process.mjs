// One worker process of bench/workers.mjs. It opens the PostgreSQL store (its first session's
// createAgent → send is the cold first claim), prints READY, waits for GO on stdin, then drives
// its share of the sessions concurrently: each is created, sent one message (its run claims the
// session, runs one scripted tool call with a queued PostToolUse notification, completes and
// releases it) and closed. Prints `DONE <json>` with its timings, then stays attached to the store
// (its deliverer sends the queued notifications) until stdin closes.
//
// Each worker's first session, and 16 more run together as a warm-up, queue notifications too.
// Environment: DB (postgres URL), RECEIVER (base URL of the notification receiver), WORKER (its
// index), WORKERS (how many), SESSIONS (total, shared by index).
// MODE=hang instead: one session (`advanced.leaseTtlMs` = LEASE_TTL_MS) whose tool never returns;
// prints SESSION <id>, then STARTED once the tool runs (the driver SIGKILLs it there).
import { createAgent, defineTool, scriptedModel } from '../index.mjs'

const env = process.env
const index = Number(env.WORKER)
const workers = Number(env.WORKERS)
const total = Number(env.SESSIONS)
const print = (tag, value) => process.stdout.write(`${tag} ${JSON.stringify(value ?? null)}\n`)

const lookup = defineTool({ name: 'lookup', kind: 'readonly', sideEffect: 'idempotent', execute: ({ q }) => `found ${q}` })
const options = () => ({
  model: scriptedModel((request) =>
    request.messages.some((message) => message.role === 'tool') ? { text: 'done' } : { toolCalls: [{ id: 'call_1', name: 'lookup', input: { q: 'x' } }] },
  ),
  tools: [lookup],
  advanced: {
    store: { postgres: env.DB },
    hooks: [{ id: 'audit', type: 'PostToolUse', webhook: { url: `${env.RECEIVER}/audit`, delivery: 'queue' } }],
  },
})

if (env.MODE === 'hang') {
  const hang = defineTool({ name: 'lookup', kind: 'readonly', sideEffect: 'idempotent', execute: () => (print('STARTED'), new Promise(() => {})) })
  const agent = await createAgent({ ...options(), tools: [hang], advanced: { ...options().advanced, leaseTtlMs: Number(env.LEASE_TTL_MS) } })
  print('SESSION', agent.sessionId)
  await agent.send('go')
  await new Promise(() => setInterval(() => {}, 1 << 30))
}

/** One session: created, sent a message (claimed), run to the end (released), closed. */
async function session() {
  const started = performance.now()
  const agent = await createAgent(options())
  const response = await agent.send('go')
  const claimed = performance.now()
  const result = await response.result()
  if (result.stopReason !== 'done' || result.toolCalls.length !== 1) throw new Error(`unexpected result ${JSON.stringify(result)}`)
  await agent.close()
  return { claimMs: claimed - started, totalMs: performance.now() - started }
}

// Cold: this process's first session opens the store (connections, the migration check). Then a
// warm-up, as a long-lived worker would have had: its pool's connections open.
const first = await session()
await Promise.all(Array.from({ length: 16 }, () => session()))
print('READY', { firstClaimMs: first.claimMs })

const go = new Promise((resolve) => {
  let input = ''
  process.stdin.setEncoding('utf8').on('data', (chunk) => {
    input += chunk
    if (input.includes('GO')) resolve()
  })
})
await go
const mine = Array.from({ length: total }, (_, n) => n).filter((n) => n % workers === index)
const started = performance.now()
const cpu = process.cpuUsage()
const sessions = await Promise.all(mine.map(() => session()))
const used = process.cpuUsage(cpu)
print('DONE', { sessions: sessions.length, ms: performance.now() - started, cpuMs: (used.user + used.system) / 1000, claimMs: sessions.map((s) => s.claimMs) })
// Stay attached (the deliverer sends what was queued) until the driver closes stdin.
process.stdin.on('end', () => process.exit(0))
