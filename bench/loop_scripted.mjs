// loop_scripted: µs per tool call for a scripted model issuing one tool call per turn, with a
// before and an after hook per call, at 200 and 1000 turns, in every system. Each system runs
// in a child process of its own (loading one system's modules only), kept for the whole
// benchmark and asked for one run at a time, so repeats interleave across systems
// (A B C … A B C …); each run reports its wall time and the child's CPU time per call.
import { fileURLToPath } from 'node:url'
import { serveRequests, startSystem } from './system_process.mjs'
import { NAMES } from './systems.mjs'
import { comparison, median } from './stats.mjs'
import { checked } from './systems/common.mjs'

const REPEATS = Number(process.env.REPEATS ?? 5)
/** Mastra's 1000-turn run takes about half a minute and its process grows by ~2 GB over the
 * repeats: it gets fewer (still interleaved with the others, median of those). */
const MASTRA_1000_REPEATS = Number(process.env.MASTRA_1000_REPEATS ?? 3)
const WARM_UP_RUNS = Number(process.env.WARM_UP_RUNS ?? 3)
const repeatsOf = (name, turns) => (name === 'mastra' && turns === 1000 ? Math.min(REPEATS, MASTRA_1000_REPEATS) : REPEATS)

/** A sample runs back to back for at least this long: a run of a few milliseconds (ours at 200
 * turns) would otherwise be timed mostly from a cold start, a long one (Mastra's) is one run. */
const MIN_SAMPLE_MS = Number(process.env.MIN_SAMPLE_MS ?? 250)

/** One sample: runs of `turns` turns in this process, back to back until `MIN_SAMPLE_MS` has
 * passed; µs of wall time and of CPU time per tool call over all of them. */
async function perCall(run, system, turns) {
  const cpuBefore = process.cpuUsage()
  const started = process.hrtime.bigint()
  let runs = 0
  do {
    await checked(system, turns, () => run(turns))
    runs++
  } while (Number(process.hrtime.bigint() - started) / 1e6 < MIN_SAMPLE_MS)
  const calls = turns * runs
  const elapsed = Number(process.hrtime.bigint() - started) / 1000 / calls
  const cpu = process.cpuUsage(cpuBefore)
  return { wallUs: elapsed, cpuUs: (cpu.user + cpu.system) / calls }
}

/** The child: loads `system`, warms it up, then answers `{ turns }` with one sample's figures. */
async function child(system) {
  const { load } = await import('./systems.mjs')
  const run = await load(system)
  // The same warm-up for every system, long enough for V8 to have compiled each one's hot
  // code before the first measured run: one 50-turn run left ours (whose runs take a few ms)
  // still compiling on V8's background threads during its first measurements.
  for (let i = 0; i < WARM_UP_RUNS; i++) await perCall(run, system, 200)
  serveRequests(({ turns }) => perCall(run, system, turns))
}

export async function loopScripted() {
  // SYSTEMS=ours,ai7 runs a subset (for investigating one system; `npm run bench` runs them all).
  const names = process.env.SYSTEMS ? process.env.SYSTEMS.split(',') : NAMES
  const children = Object.fromEntries(names.map((name) => [name, startSystem(fileURLToPath(import.meta.url), name)]))
  try {
    await Promise.all(Object.values(children).map((worker) => worker.ready))
    const wall = {}
    const cpu = {}
    for (const turns of [200, 1000]) {
      const samples = Object.fromEntries(names.map((name) => [name, []]))
      for (let repeat = 0; repeat < REPEATS; repeat++) {
        for (const name of names) if (repeat < repeatsOf(name, turns)) samples[name].push(await children[name].measure({ turns }))
      }
      wall[turns] = Object.fromEntries(names.map((name) => [name, median(samples[name].map((sample) => sample.wallUs))]))
      cpu[turns] = Object.fromEntries(names.map((name) => [name, median(samples[name].map((sample) => sample.cpuUs))]))
    }
    return {
      unit: 'µs per tool call (median)',
      repeats: REPEATS,
      mastraRepeatsAt1000: Math.min(REPEATS, MASTRA_1000_REPEATS),
      turns200: comparison(wall[200]),
      turns1000: comparison(wall[1000]),
      cpuUsPerCall: { turns200: comparison(cpu[200]), turns1000: comparison(cpu[1000]) },
      growth: Object.fromEntries(names.map((name) => [name, Number((wall[1000][name] / wall[200][name]).toFixed(3))])),
    }
  } finally {
    for (const worker of Object.values(children)) worker.stop()
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2]) await child(process.argv[2])
  else console.log(JSON.stringify(await loopScripted(), null, 2))
}
