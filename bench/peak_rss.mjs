// peak_rss_1000_sessions: 1000 concurrent sessions × 10 tool calls each, scripted model; each
// system in its own child process, which reports its peak RSS and wall time.
import { execFileSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { comparison, median } from './stats.mjs'

const SESSIONS = Number(process.env.SESSIONS ?? 1000)
const CALLS = 10
const REPEATS = Number(process.env.RSS_REPEATS ?? 3)

async function child(system) {
  const { load } = await import('./systems.mjs')
  const run = await load(system)
  const started = performance.now()
  const counts = await Promise.all(Array.from({ length: SESSIONS }, () => run(CALLS)))
  const wallMs = performance.now() - started
  if (counts.some((count) => count !== CALLS)) throw new Error(`${system}: a session made the wrong number of calls`)
  process.stdout.write(JSON.stringify({ peakRssMb: process.resourceUsage().maxRSS / 1024, wallMs }))
}

export async function peakRss() {
  const { NAMES: names } = await import('./systems.mjs')
  const samples = Object.fromEntries(names.map((name) => [name, []]))
  for (let repeat = 0; repeat < REPEATS; repeat++) {
    for (const name of names) {
      const output = execFileSync(process.execPath, [fileURLToPath(import.meta.url), name], { encoding: 'utf8', maxBuffer: 1 << 20 })
      samples[name].push(JSON.parse(output))
    }
  }
  const pick = (key) => Object.fromEntries(names.map((name) => [name, Number(median(samples[name].map((sample) => sample[key])).toFixed(1))]))
  return {
    unit: 'MB peak RSS (median)',
    sessions: SESSIONS,
    toolCallsPerSession: CALLS,
    ...comparison(pick('peakRssMb')),
    wallMs: comparison(pick('wallMs')),
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2]) await child(process.argv[2])
