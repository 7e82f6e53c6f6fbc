// loop_http and event_loop_utilization: the same agent against an OpenAI-compatible server on
// 127.0.0.1 in another process (bench/model_server.mjs), streaming (SSE), in every system. Ours
// talks to it from Rust; each peer through the provider its docs show (bench/systems_http/).
// Each system runs in a child process of its own (loading one system's modules only), kept for
// the whole benchmark and asked for one measurement at a time, so repeats interleave across
// systems (A B C … A B C …). Event-loop figures are taken inside the child, whose main thread is
// the one running the sessions.
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { serveRequests, startSystem } from './system_process.mjs'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { checked } from './systems/common.mjs'
import { NAMES as SCRIPTED } from './systems.mjs'
import { startProcess } from './peer_process.mjs'
import { comparison, median } from './stats.mjs'

// Every system of loop_scripted but the hand-written floor, which has no HTTP client.
export const NAMES = SCRIPTED.filter((name) => name !== 'js-floor')
const REPEATS = Number(process.env.REPEATS ?? 5)
const TURNS = Number(process.env.HTTP_TURNS ?? 200)
const SESSIONS = Number(process.env.ELU_SESSIONS ?? 100)
const SESSION_TURNS = Number(process.env.ELU_TURNS ?? 10)
// A model answers after some time to first token; with none, a run is pure CPU and every
// system's JS thread is busy for however long its run takes.
const ELU_LATENCY_MS = Number(process.env.ELU_LATENCY_MS ?? 10)
// Each system warms up with this many full-size measurements before the sampled ones, so that
// V8 has compiled its hot code (as in loop_scripted).
const WARM_UP_RUNS = Number(process.env.WARM_UP_RUNS ?? 2)

async function startModelServer(latencyMs = 0) {
  const child = await startProcess('./model_server.mjs', { LATENCY_MS: String(latencyMs) })
  return { baseUrl: `http://127.0.0.1:${child.port}/v1`, stop: () => child.stop() }
}

/** CPU time the main thread has used, in ms (Linux; `null` elsewhere): busy time minus the time
 * it was preempted while busy. */
const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`
const mainThreadCpuMs = () => (existsSync(SCHEDSTAT) ? Number(readFileSync(SCHEDSTAT, 'utf8').split(' ')[0]) / 1e6 : null)

/** What a child measures, by the request's `kind`. */
const MEASURES = {
  /** One run of `turns` turns: µs of wall time per tool call. */
  async loop(run, system, { baseUrl, turns }) {
    const started = process.hrtime.bigint()
    await checked(system, turns, () => run(baseUrl, turns))
    return Number(process.hrtime.bigint() - started) / 1000 / turns
  },
  /** `sessions` concurrent runs of `turns` turns: this (main) thread's event-loop utilization,
   * busy and CPU ms, and p99 event-loop delay. */
  async elu(run, system, { baseUrl, sessions, turns }) {
    const delay = monitorEventLoopDelay({ resolution: 1 })
    const start = performance.eventLoopUtilization()
    const cpuBefore = mainThreadCpuMs()
    delay.enable()
    await checked(system, sessions * turns, async () => (await Promise.all(Array.from({ length: sessions }, () => run(baseUrl, turns)))).reduce((sum, calls) => sum + calls, 0))
    delay.disable()
    const used = performance.eventLoopUtilization(start)
    const cpuMs = cpuBefore === null ? null : mainThreadCpuMs() - cpuBefore
    return { elu: used.utilization, activeMs: used.active, cpuMs, p99DelayMs: delay.percentile(99) / 1e6 }
  },
}

/** The child: loads `system`'s HTTP runner, then answers each request with one measurement. */
async function child(system) {
  const run = (await import(`./systems_http/${system}.mjs`)).default
  serveRequests((request) => MEASURES[request.kind](run, system, request))
}

/** Starts the model server and one child per system, warms each up with `warmUp` (WARM_UP_RUNS
 * times), then takes
 * REPEATS samples of `request` from each, interleaved; resolves with the samples. (Every peer
 * takes seconds per sample, Mastra the longest, so all get the same number.) */
async function sampled(latencyMs, request, warmUp) {
  const server = await startModelServer(latencyMs)
  const children = Object.fromEntries(NAMES.map((name) => [name, startSystem(fileURLToPath(import.meta.url), name)]))
  try {
    await Promise.all(Object.values(children).map((worker) => worker.ready))
    for (let i = 0; i < WARM_UP_RUNS; i++) for (const name of NAMES) await children[name].measure({ ...warmUp, baseUrl: server.baseUrl })
    const samples = Object.fromEntries(NAMES.map((name) => [name, []]))
    for (let repeat = 0; repeat < REPEATS; repeat++) {
      for (const name of NAMES) samples[name].push(await children[name].measure({ ...request, baseUrl: server.baseUrl }))
    }
    return samples
  } finally {
    for (const worker of Object.values(children)) worker.stop()
    await server.stop()
  }
}

export async function loopHttp() {
  const samples = await sampled(0, { kind: 'loop', turns: TURNS }, { kind: 'loop', turns: TURNS })
  const values = Object.fromEntries(NAMES.map((name) => [name, median(samples[name])]))
  return { unit: 'µs per tool call over HTTP (median)', turns: TURNS, repeats: REPEATS, ...comparison(values) }
}

/** Main-thread event-loop utilization and p99 event-loop delay while SESSIONS sessions stream. */
export async function eventLoopUtilization() {
  const request = { kind: 'elu', sessions: SESSIONS, turns: SESSION_TURNS }
  const samples = await sampled(ELU_LATENCY_MS, request, request)
  const pick = (key) => Object.fromEntries(NAMES.map((name) => [name, Number(median(samples[name].map((sample) => sample[key])).toFixed(4))]))
  return {
    unit: 'main-thread event-loop utilization (median)',
    sessions: SESSIONS,
    modelLatencyMs: ELU_LATENCY_MS,
    turnsPerSession: SESSION_TURNS,
    repeats: REPEATS,
    ...comparison(pick('elu')),
    activeMs: comparison(pick('activeMs')),
    ...(samples.ours[0].cpuMs === null ? {} : { mainThreadCpuMs: comparison(pick('cpuMs')) }),
    p99DelayMs: comparison(pick('p99DelayMs')),
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv[2]) await child(process.argv[2])
  else {
    console.log(JSON.stringify(await loopHttp(), null, 2))
    console.log(JSON.stringify(await eventLoopUtilization(), null, 2))
  }
}
