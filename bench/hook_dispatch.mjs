// hook_dispatch: what one PreToolUse event costs with 0, 1, 3 and 10 JS callbacks.
//
// A scripted model issues one tool call per turn for TURNS turns; the only thing that differs
// between configurations is the number of PreToolUse callbacks. Configurations are interleaved
// (A B C D A B C D …) and the median of REPEATS runs is taken. The cost of an event is the
// per-call time minus the per-call time with no callbacks.
import { createAgent, defineTool, scriptedModel } from '../index.mjs'

const TURNS = Number(process.env.TURNS ?? 300)
const REPEATS = Number(process.env.REPEATS ?? 7)
const COUNTS = [0, 1, 3, 10]

const tool = defineTool({ name: 'noop', execute: () => 'ok' })
const turns = [...Array.from({ length: TURNS }, (_, i) => ({ toolCalls: [{ id: `c${i}`, name: 'noop', input: { i } }] })), { text: 'done' }]

let callbackCalls = 0
const callback = () => {
  callbackCalls++
  return { action: 'continue' }
}

async function runOnce(callbacks) {
  const agent = await createAgent({
    model: scriptedModel(turns),
    tools: [tool],
    maxTurns: TURNS + 1,
    advanced: callbacks ? { hooks: { PreToolUse: Array(callbacks).fill(callback) } } : {},
  })
  const started = process.hrtime.bigint()
  const result = await (await agent.send('go')).result()
  const elapsed = Number(process.hrtime.bigint() - started) / 1000
  await agent.close()
  if (result.toolCalls.length !== TURNS) throw new Error(`expected ${TURNS} tool calls, got ${result.toolCalls.length}`)
  return elapsed / TURNS
}

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

export async function hookDispatch() {
  for (const count of COUNTS) await runOnce(count) // warm-up
  const samples = Object.fromEntries(COUNTS.map((count) => [count, []]))
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const count of COUNTS) samples[count].push(await runOnce(count))
  }
  callbackCalls = 0
  await runOnce(0)
  const crossingsWithoutCallbacks = callbackCalls
  const perCall = Object.fromEntries(COUNTS.map((count) => [count, median(samples[count])]))
  const perEvent = Object.fromEntries(COUNTS.map((count) => [count, perCall[count] - perCall[0]]))
  return { unit: 'µs per PreToolUse event (median, minus the 0-callback loop)', turns: TURNS, repeats: REPEATS, perCallUs: perCall, perEventUs: perEvent, callbacksInvokedWithNone: crossingsWithoutCallbacks }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const result = await hookDispatch()
  console.log(JSON.stringify(result, null, 2))
}
