// loop_http and event_loop_utilization: the same agent against an OpenAI-compatible server on
// 127.0.0.1 in another process, streaming (SSE). Ours talks to it from Rust; @openai/agents
// uses its chat-completions model over the `openai` client.
import { existsSync, readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { monitorEventLoopDelay, performance } from 'node:perf_hooks'
import { Agent, OpenAIChatCompletionsModel, run as runAgent, setTracingDisabled, tool as agentsTool } from '@openai/agents'
import OpenAI from 'openai'
import { createAgent, defineTool } from '../index.mjs'
import { after, before, parameters } from './systems/common.mjs'
import { startProcess } from './peer_process.mjs'
import { comparison, interleaved, median } from './stats.mjs'

setTracingDisabled(true)
const REPEATS = Number(process.env.REPEATS ?? 5)
const TURNS = Number(process.env.HTTP_TURNS ?? 200)
const SESSIONS = Number(process.env.ELU_SESSIONS ?? 100)
const SESSION_TURNS = Number(process.env.ELU_TURNS ?? 10)
// A model answers after some time to first token; with none, a run is pure CPU and every
// system's JS thread is busy for however long its run takes.
const ELU_LATENCY_MS = Number(process.env.ELU_LATENCY_MS ?? 10)

async function startModelServer(latencyMs = 0) {
  const child = await startProcess('./model_server.mjs', { LATENCY_MS: String(latencyMs) })
  return { baseUrl: `http://127.0.0.1:${child.port}/v1`, stop: () => child.stop() }
}

async function ours(baseUrl, turns) {
  const agent = await createAgent({
    model: `bench-${turns}`,
    apiKey: 'bench',
    baseUrl,
    tools: [defineTool({ name: 'noop', parameters, execute: ({ i }) => `ok ${i}` })],
    maxTurns: turns + 1,
    advanced: { hooks: { PreToolUse: [() => (before(), { action: 'continue' })], PostToolUse: [() => (after(), { action: 'continue' })] } },
  })
  const response = await agent.send('go')
  let text = ''
  for await (const delta of response.textStream()) text += delta
  const result = await response.result()
  await agent.close()
  if (text !== 'done') throw new Error('ours did not finish')
  return result.toolCalls.length
}

const clients = new Map()
async function openaiAgents(baseUrl, turns) {
  if (!clients.has(baseUrl)) clients.set(baseUrl, new OpenAI({ baseURL: baseUrl, apiKey: 'bench' }))
  const client = clients.get(baseUrl)
  const agent = new Agent({
    name: 'bench',
    instructions: 'bench',
    model: new OpenAIChatCompletionsModel(client, `bench-${turns}`),
    tools: [agentsTool({ name: 'noop', description: 'noop', parameters, strict: false, execute: ({ i }) => `ok ${i}` })],
  })
  let calls = 0
  agent.on('agent_tool_start', before)
  agent.on('agent_tool_end', () => (after(), calls++))
  const stream = await runAgent(agent, 'go', { maxTurns: turns + 1, stream: true })
  for await (const _ of stream.toTextStream()) {
  }
  await stream.completed
  if (stream.finalOutput !== 'done') throw new Error('openai-agents did not finish')
  return calls
}

const SYSTEMS = { ours, 'openai-agents': openaiAgents }

export async function loopHttp() {
  const server = await startModelServer()
  try {
    const names = Object.keys(SYSTEMS)
    for (const name of names) await SYSTEMS[name](server.baseUrl, 20)
    const values = await interleaved(names, REPEATS, async (name) => {
      const started = process.hrtime.bigint()
      const calls = await SYSTEMS[name](server.baseUrl, TURNS)
      if (calls !== TURNS) throw new Error(`${name} made ${calls} calls`)
      return Number(process.hrtime.bigint() - started) / 1000 / TURNS
    })
    return { unit: 'µs per tool call over HTTP (median)', turns: TURNS, ...comparison(values) }
  } finally {
    await server.stop()
  }
}

/** CPU time the main thread has used, in ms (Linux; `null` elsewhere): busy time minus the time
 * it was preempted while busy. */
const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`
const mainThreadCpuMs = () => (existsSync(SCHEDSTAT) ? Number(readFileSync(SCHEDSTAT, 'utf8').split(' ')[0]) / 1e6 : null)

/** Main-thread event-loop utilization and p99 event-loop delay while SESSIONS sessions stream. */
export async function eventLoopUtilization() {
  const server = await startModelServer(ELU_LATENCY_MS)
  try {
    const names = Object.keys(SYSTEMS)
    const measure = async (name) => {
      const delay = monitorEventLoopDelay({ resolution: 1 })
      const start = performance.eventLoopUtilization()
      const cpuBefore = mainThreadCpuMs()
      delay.enable()
      await Promise.all(Array.from({ length: SESSIONS }, () => SYSTEMS[name](server.baseUrl, SESSION_TURNS)))
      delay.disable()
      const used = performance.eventLoopUtilization(start)
      const cpuMs = cpuBefore === null ? null : mainThreadCpuMs() - cpuBefore
      return { elu: used.utilization, activeMs: used.active, cpuMs, p99DelayMs: delay.percentile(99) / 1e6 }
    }
    for (const name of names) await measure(name)
    const samples = Object.fromEntries(names.map((name) => [name, []]))
    for (let repeat = 0; repeat < REPEATS; repeat++) for (const name of names) samples[name].push(await measure(name))
    const pick = (key) => Object.fromEntries(names.map((name) => [name, Number(median(samples[name].map((sample) => sample[key])).toFixed(4))]))
    return {
      unit: 'main-thread event-loop utilization (median)',
      sessions: SESSIONS,
      modelLatencyMs: ELU_LATENCY_MS,
      turnsPerSession: SESSION_TURNS,
      ...comparison(pick('elu')),
      activeMs: comparison(pick('activeMs')),
      ...(samples[names[0]][0].cpuMs === null ? {} : { mainThreadCpuMs: comparison(pick('cpuMs')) }),
      p99DelayMs: comparison(pick('p99DelayMs')),
    }
  } finally {
    await server.stop()
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(JSON.stringify(await loopHttp(), null, 2))
  console.log(JSON.stringify(await eventLoopUtilization(), null, 2))
}
