// `npm run bench`: installs the peers (bench/'s own devDependencies) if needed, runs every
// benchmark, prints tables, and writes bench/results.json and bench/RESULTS.md.
import { execSync } from 'node:child_process'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { fileURLToPath } from 'node:url'

const here = fileURLToPath(new URL('.', import.meta.url))
if (['@openai/agents', 'ai5', '@ai-sdk/openai-compatible-v5', '@langchain/openai'].some((pkg) => !existsSync(`${here}node_modules/${pkg}`))) execSync('npm ci --no-audit --no-fund', { cwd: here, stdio: 'inherit' })

const { loopScripted } = await import('./loop_scripted.mjs')
const { loopHttp, eventLoopUtilization } = await import('./http.mjs')
const { peakRss } = await import('./peak_rss.mjs')
const { hookDispatch } = await import('./hook_dispatch.mjs')
const { fmt } = await import('./stats.mjs')
const { webhookNotifications } = await import('./webhook_notifications.mjs')
const { approvals } = await import('./approvals.mjs')
const { subagents } = await import('./subagents.mjs')
const { mcp } = await import('./mcp.mjs')
const { workers } = await import('./workers.mjs')
const { builtins } = await import('./builtins.mjs')

const machine = `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, ${process.platform}-${process.arch}`
// Each peer's version as installed, read at run time.
const installed = (pkg) => JSON.parse(readFileSync(`${here}node_modules/${pkg}/package.json`, 'utf8')).version
const peerVersions = Object.fromEntries(
  [['openai-agents', '@openai/agents'], ['ai-sdk', 'ai5'], ['ai7', 'ai'], ['mastra', '@mastra/core'], ['langgraph', '@langchain/langgraph']].map(([name, pkg]) => [name, installed(pkg)]),
)
// The clients the peers talk to the model server with in loop_http and event_loop_utilization
// (Mastra's is bundled in @mastra/core).
const providerVersions = Object.fromEntries(['openai', '@ai-sdk/openai-compatible-v5', '@ai-sdk/openai-compatible', '@langchain/openai'].map((pkg) => [pkg, installed(pkg)]))
const date = new Date().toISOString().slice(0, 10)
// BENCH_ONLY=loop_scripted,peak_rss_1000_sessions reruns those benchmarks alone and keeps the
// others' rows from the last results.json; `dates` and `machines` say when and where each row
// was taken (the VMs of one kind are not all the same CPU).
const only = process.env.BENCH_ONLY?.split(',')
const want = (name) => !only || only.includes(name)
const previous = only ? JSON.parse(readFileSync(new URL('./results.json', import.meta.url), 'utf8')) : null
const results = { machine, node: process.version, date, peerVersions, providerVersions, benchmarks: previous?.benchmarks ?? {}, dates: previous?.dates ?? {}, machines: previous?.machines ?? {} }
for (const name of Object.keys(results.benchmarks)) {
  results.dates[name] ??= previous.date
  results.machines[name] ??= previous.machine
}
console.log(`machine: ${machine}\nnode: ${process.version}`)

function table(title, row) {
  console.log(`\n${title}`)
  const peers = Object.keys(row.peers)
  console.log(['', 'ours', ...peers].map((cell) => cell.padStart(14)).join(''))
  console.log(['value', fmt(row.ours), ...peers.map((peer) => fmt(row.peers[peer]))].map((cell) => cell.padStart(14)).join(''))
  console.log(['ours / peer', '', ...peers.map((peer) => fmt(row.ratio[peer]))].map((cell) => cell.padStart(14)).join(''))
}

if (want('loop_scripted')) {
  const scripted = await loopScripted()
  results.benchmarks.loop_scripted = { unit: scripted.unit, turns: 200, ...scripted.turns200, turns1000: scripted.turns1000, growth1000over200: scripted.growth, processCpuUsPerCall: scripted.cpuUsPerCall, repeats: scripted.repeats }
  table('loop_scripted, 200 turns (µs per tool call)', scripted.turns200)
  table('loop_scripted, 1000 turns (µs per tool call)', scripted.turns1000)
  console.log(`growth 1000/200: ${Object.entries(scripted.growth).map(([name, value]) => `${name} ${value}`).join(', ')}`)
}

if (want('loop_http')) {
  const http = await loopHttp()
  results.benchmarks.loop_http = http
  table(`loop_http, ${http.turns} turns over SSE (µs per tool call)`, http)
}

if (want('event_loop_utilization')) {
  const elu = await eventLoopUtilization()
  results.benchmarks.event_loop_utilization = elu
  table(`event_loop_utilization, ${elu.sessions} sessions streaming, model latency ${elu.modelLatencyMs} ms (utilization)`, elu)
  table('main-thread busy time over the run (ms)', elu.activeMs)
  if (elu.mainThreadCpuMs) table('main-thread CPU time over the run (ms)', elu.mainThreadCpuMs)
  table('event-loop delay p99 (ms)', elu.p99DelayMs)
}

if (want('peak_rss_1000_sessions')) {
  const rss = await peakRss()
  results.benchmarks.peak_rss_1000_sessions = rss
  table(`peak_rss_1000_sessions, ${rss.sessions} × ${rss.toolCallsPerSession} tool calls (MB)`, rss)
  table('wall time (ms)', rss.wallMs)
}

if (want('hook_dispatch')) {
  const dispatch = await hookDispatch()
  results.benchmarks.hook_dispatch = {
    unit: dispatch.unit,
    ours: dispatch.perEventUs,
    perCallUs: dispatch.perCallUs,
    turns: dispatch.turns,
    repeats: dispatch.repeats,
    callbacksInvokedWithNoMatch: dispatch.callbacksInvokedWithNoMatch,
  }
  console.log('\nhook_dispatch (PreToolUse, sync JS callbacks returning { action: "continue" })')
  console.log('callbacks | µs per tool call | µs per event')
  for (const count of Object.keys(dispatch.perCallUs)) console.log(`${count.padStart(9)} | ${fmt(dispatch.perCallUs[count]).padStart(16)} | ${fmt(dispatch.perEventUs[count]).padStart(12)}`)
  console.log(`callbacks invoked with 10 registered hook objects whose matcher does not match: ${dispatch.callbacksInvokedWithNoMatch}`)
}

if (want('webhook_notifications')) {
  const notifications = await webhookNotifications()
  results.benchmarks.webhook_notifications = notifications
  console.log(`\nwebhook_notifications: ${notifications.ours}/s sustained, added latency per tool call median ${notifications.addedLatencyUsPerToolCall.median} µs (p99 ${notifications.addedLatencyUsPerToolCall.p99} µs), sent ${notifications.sent}, received ${notifications.received}, lost ${notifications.lost}`)
}

if (want('approvals')) {
  const approval = await approvals()
  results.benchmarks.approvals = approval
  const sessions = approval.resumed_sessions_per_second_sqlite
  console.log(`\napprovals: send → paused → approve → resume → result, one agent (µs per round trip, median of ${approval.repeats} samples of ${approval.roundTripsPerSample})`)
  console.log(`${'memory'.padStart(14)}${'sqlite'.padStart(14)}`)
  console.log(`${fmt(approval.round_trip_memory.ours).padStart(14)}${fmt(approval.round_trip_sqlite.ours).padStart(14)}`)
  table(`approvals: ${sessions.sessions} concurrent sessions paused, then resumed via resumeAgent, one SQLite file (sessions/s, higher is better; blade = its published figure, not run here)`, sessions)
  console.log(`pause phase ${fmt(sessions.pauseMs)} ms, resume phase ${fmt(sessions.resumeMs)} ms; target ${sessions.target}: ${sessions.met ? 'met' : 'not met'}`)
}

if (want('subagents')) {
  const delegated = await subagents()
  results.benchmarks.subagents = delegated
  console.log(`\nsubagents: µs per tool call with two JS hooks, ${delegated.calls} calls — parent ${fmt(delegated.parentUsPerCall)}, inside a sub-agent ${fmt(delegated.childUsPerCall)} (${delegated.ratio}×)`)
}

if (want('mcp')) {
  const mcpCalls = await mcp()
  results.benchmarks.mcp = mcpCalls
  console.log(`\nmcp: µs per tool call with two JS hooks, ${mcpCalls.calls} calls — JS tool ${fmt(mcpCalls.jsUsPerCall)}, MCP tool over stdio ${fmt(mcpCalls.mcpUsPerCall)} (${mcpCalls.ratio}×)`)
}

if (want('workers')) {
  const fleet = await workers()
  results.benchmarks.workers = fleet
  if (!fleet.skipped) {
    for (const transport of ['plain', 'tls']) {
      const w = fleet[transport]
      console.log(`\nworkers (${transport === 'plain' ? 'plain TCP, as Blade measured' : 'TLS'}): ${fleet.sessions} sessions, sessions/s by worker processes — ${Object.entries(w.sessionsPerSecond).map(([n, v]) => `${n}: ${fmt(v)} (${w.ratioToBlade[n]}× Blade's ${fleet.blade.sessionsPerSecond})`).join(', ')}`)
      console.log(`claim ${fmt(w.idleClaimMs)} ms with the store open (Blade's first claim ${fleet.blade.firstClaimMs} ms), ${fmt(w.firstClaimMs)} ms in a new process, ${fmt(w.claimMs)} ms under load; recover and reclaim ${fmt(w.recoverAndReclaimMs)} ms (Blade ${fleet.blade.recoverAndReclaimMs}), kill → recovered result ${fmt(w.rtoMs)} ms with leaseTtlMs ${fleet.leaseTtlMs}; queued notifications ${fmt(w.notificationsPerSecond)}/s, ${w.notificationsQueued} queued, ${w.notificationsLost} lost`)
    }
  }
}

if (want('builtins')) {
  const search = await builtins((line) => console.log(`  ${line}`))
  results.benchmarks.builtins = search
  for (const [kind, rows] of [['Grep', search.grep], ['Glob', search.glob]]) {
    const systems = Object.keys(rows[0].ms)
    console.log(`\nbuiltins: ${kind} over ${search.tree.files} files / ${(search.tree.bytes / 1e9).toFixed(2)} GB (ms, median of ${search.repeats}; ours / rg; target ≤ 1.3)`)
    console.log(['', ...systems, 'ours / rg'].map((cell, i) => (i ? cell.padStart(18) : cell.padEnd(24))).join(''))
    for (const row of rows) console.log([row.name, ...systems.map((name) => fmt(row.ms[name] ?? '')), fmt(row.ratioToRg)].map((cell, i) => (i ? cell.padStart(18) : cell.padEnd(24))).join(''))
  }
  console.log('\nbuiltins: memory (peak RSS before → after one call, MB)')
  for (const row of search.memory) console.log(`${row.name.padEnd(46)} ${fmt(row.peakBeforeMb)} → ${fmt(row.peakAfterMb)} (+${fmt(row.growthMb)}), answer ${row.answerChars} chars`)
}

for (const name of Object.keys(results.benchmarks)) {
  if (!want(name)) continue
  results.dates[name] = date
  results.machines[name] = machine
}
writeFileSync(new URL('./results.json', import.meta.url), JSON.stringify(results, null, 2) + '\n')
const { writeReport } = await import('./report.mjs')
writeReport()
console.log('\nwrote bench/results.json and bench/RESULTS.md')
