// loop_scripted: µs per tool call for a scripted model issuing one tool call per turn, with a
// before and an after hook per call, at 200 and 1000 turns, in every system.
import { loadAll, NAMES } from './systems.mjs'
import { comparison, interleaved } from './stats.mjs'
import { hookCallCount } from './systems/common.mjs'

const REPEATS = Number(process.env.REPEATS ?? 5)

async function perCall(systems, system, turns) {
  const hooksBefore = hookCallCount()
  const started = process.hrtime.bigint()
  const calls = await systems[system](turns)
  const elapsed = Number(process.hrtime.bigint() - started) / 1000 / turns
  if (calls !== turns) throw new Error(`${system} made ${calls} tool calls, expected ${turns}`)
  // Every system must really have run its before and after hook for each call.
  const hooks = hookCallCount() - hooksBefore
  if (hooks !== 2 * turns) throw new Error(`${system} ran ${hooks} hook calls, expected ${2 * turns}`)
  return elapsed
}

export async function loopScripted() {
  const names = NAMES
  const systems = await loadAll()
  for (const name of names) await perCall(systems, name, 50) // warm-up
  const results = {}
  for (const turns of [200, 1000]) {
    results[turns] = await interleaved(names, REPEATS, (name) => perCall(systems, name, turns))
  }
  return {
    unit: 'µs per tool call (median)',
    repeats: REPEATS,
    turns200: comparison(results[200]),
    turns1000: comparison(results[1000]),
    growth: Object.fromEntries(names.map((name) => [name, Number((results[1000][name] / results[200][name]).toFixed(3))])),
  }
}
