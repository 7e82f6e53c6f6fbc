// webhook_notifications: afterToolCall notifications to a receiver in a separate process.
// Figures: sustained notifications per second, the added latency per tool call (p99 over the
// runs, against the same runs without the webhook), and lost deliveries (sent − received).
import { fileURLToPath } from 'node:url'
import { createAgent, defineTool, scriptedModel } from '../index.mjs'
import { startProcess } from './peer_process.mjs'
import { median } from './stats.mjs'

const CALLS = Number(process.env.NOTIFY_CALLS ?? 2000)
const SESSIONS = Number(process.env.NOTIFY_SESSIONS ?? 20)
const REPEATS = Number(process.env.REPEATS ?? 5)

async function startReceiver() {
  const child = await startProcess('./receiver.mjs')
  return {
    url: `http://127.0.0.1:${child.port}/hooks`,
    stop: async () => Number(/received (\d+)/.exec(await child.stop())[1]),
  }
}

/** `SESSIONS` concurrent sessions share `CALLS` tool calls; µs per call and wall time. */
async function runSessions(url) {
  const perSession = Math.ceil(CALLS / SESSIONS)
  const turns = [...Array.from({ length: perSession }, (_, i) => ({ toolCalls: [{ name: 'noop', input: { i } }] })), { text: 'done' }]
  const hooks = url ? [{ id: 'notify', type: 'afterToolCall', webhook: { url } }] : []
  const started = performance.now()
  const counts = await Promise.all(
    Array.from({ length: SESSIONS }, async () => {
      const agent = await createAgent({ model: scriptedModel(turns), tools: [defineTool({ name: 'noop', execute: () => 'ok' })], maxTurns: perSession + 1, advanced: { hooks } })
      const result = await (await agent.send('go')).result()
      await agent.close()
      return result.toolCalls.length
    }),
  )
  const wallMs = performance.now() - started
  const calls = counts.reduce((a, b) => a + b, 0)
  return { calls, wallMs, usPerCall: (wallMs * 1000) / calls }
}

function p99(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.99) - 1)]
}

export async function webhookNotifications() {
  const receiver = await startReceiver()
  await runSessions(receiver.url) // warm-up (its deliveries are counted too)
  let sent = Math.ceil(CALLS / SESSIONS) * SESSIONS
  const rates = []
  const added = []
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    const plain = await runSessions(undefined)
    const notified = await runSessions(receiver.url)
    sent += notified.calls
    rates.push(notified.calls / (notified.wallMs / 1000))
    added.push(notified.usPerCall - plain.usPerCall)
  }
  const received = await receiver.stop()
  return {
    unit: 'notifications per second (median)',
    ours: Math.round(median(rates)),
    sessions: SESSIONS,
    toolCallsPerRun: CALLS,
    addedLatencyUsPerToolCall: { median: Number(median(added).toFixed(1)), p99: Number(p99(added).toFixed(1)) },
    sent,
    received,
    lost: sent - received,
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(JSON.stringify(await webhookNotifications(), null, 2))
