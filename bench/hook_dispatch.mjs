// hook_dispatch: what one PreToolUse event costs with 0, 1, 3 and 10 JS callbacks.
//
// A scripted model issues one tool call per turn for TURNS turns; the only thing that differs
// between configurations is the number of PreToolUse callbacks. Configurations are interleaved
// (A B C D A B C D …) and the median of REPEATS runs is taken. The cost of an event is the
// per-call time minus the per-call time with no callbacks.
import { createAgent, defineTool, scriptedModel } from '../index.mjs'
import { fileURLToPath } from 'node:url'
import { interleaved } from './stats.mjs'

const TURNS = Number(process.env.TURNS ?? 2000)
const REPEATS = Number(process.env.REPEATS ?? 9)
const COUNTS = [0, 1, 3, 10]
// Ten hook objects whose matcher never matches the tool: filtered in Rust, never called.
const NO_MATCH = 'no-match'
const CONFIGS = [...COUNTS, NO_MATCH]

const tool = defineTool({ name: 'noop', execute: () => 'ok' })
const turns = [...Array.from({ length: TURNS }, (_, i) => ({ toolCalls: [{ id: `c${i}`, name: 'noop', input: { i } }] })), { text: 'done' }]

let callbackCalls = 0
/** Callbacks invoked over every run of the hook objects whose matcher does not match. */
let noMatchCalls = 0
const callback = () => {
  callbackCalls++
  return { action: 'continue' }
}

function hooksFor(config) {
  if (config === NO_MATCH) return { hooks: Array.from({ length: 10 }, (_, i) => ({ id: `h${i}`, type: 'beforeToolCall', matcher: '^never$', handler: callback })) }
  return config ? { hooks: { PreToolUse: Array(config).fill(callback) } } : {}
}

async function runOnce(config) {
  const agent = await createAgent({
    model: scriptedModel(turns),
    tools: [tool],
    maxTurns: TURNS + 1,
    advanced: hooksFor(config),
  })
  callbackCalls = 0
  const started = process.hrtime.bigint()
  const result = await (await agent.send('go')).result()
  const elapsed = Number(process.hrtime.bigint() - started) / 1000
  await agent.close()
  if (result.toolCalls.length !== TURNS) throw new Error(`expected ${TURNS} tool calls, got ${result.toolCalls.length}`)
  // Every registered callback ran once per call; a matcher that does not match runs none.
  const expected = (config === NO_MATCH ? 0 : config) * TURNS
  if (config === NO_MATCH) noMatchCalls += callbackCalls
  if (callbackCalls !== expected) throw new Error(`${config}: expected ${expected} callback calls, got ${callbackCalls}`)
  return elapsed / TURNS
}


export async function hookDispatch() {
  for (const config of CONFIGS) await runOnce(config) // warm-up
  noMatchCalls = 0
  const perCall = await interleaved(CONFIGS, REPEATS, runOnce)
  const perEvent = Object.fromEntries(CONFIGS.map((config) => [config, perCall[config] - perCall[0]]))
  return {
    unit: 'µs per PreToolUse event (median, minus the 0-callback loop)',
    turns: TURNS,
    repeats: REPEATS,
    perCallUs: perCall,
    perEventUs: perEvent,
    callbacksInvokedWithNoMatch: noMatchCalls,
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const result = await hookDispatch()
  console.log(JSON.stringify(result, null, 2))
}
