// Writes bench/RESULTS.md from bench/results.json: the tables of the last `npm run bench`, the
// machine they were taken on, and (from bench/notes.md) what moved the numbers.
// `node bench/report.mjs` rewrites it from the committed results without running anything.
import { readFileSync, writeFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { fmt } from './stats.mjs'

/** Flat memory: the peak RSS may grow by at most this much during one call. */
export const MEMORY_BOUND_MB = 32

const met = (condition) => (condition ? 'yes' : '**no**')
/** `value (ratio)` for a peer's cell. */
const versus = (row, peer) => `${fmt(row.peers[peer])} (${fmt(row.ratio[peer])})`
/** The same, empty when the row has no such peer (results taken before it was measured). */
const versusIf = (row, peer) => (row.peers[peer] === undefined ? '' : versus(row, peer))

/** Whether `holds(ratio)` for every framework peer of `row` (the JS floor is not one). */
const everyPeer = (row, holds) => Object.entries(row.ratio).every(([peer, ratio]) => peer === 'js-floor' || holds(ratio))

/** A table of `[label, row]` rows, a column for ours and one for each peer of the first row. */
function everySystem(rows) {
  const peers = Object.keys(rows[0][1].peers)
  return [
    `| figure | ours | ${peers.join(' | ')} |`,
    `| --- | ---: |${peers.map(() => ' ---: |').join('')}`,
    ...rows.map(([label, row]) => `| ${label} | ${fmt(row.ours)} | ${peers.map((peer) => versusIf(row, peer)).join(' | ')} |`),
  ]
}

/** When rows were rerun alone (`BENCH_ONLY`): which were taken on which day, and on which
 * machine when that differs. */
function takenOn(dates = {}, machines = {}) {
  const byTake = {}
  const machineCount = new Set(Object.values(machines)).size
  for (const [name, date] of Object.entries(dates)) {
    const take = machineCount > 1 && machines[name] ? `${date} on ${machines[name]}` : date
    ;(byTake[take] ??= []).push(`\`${name}\``)
  }
  if (Object.keys(byTake).length < 2) return []
  return [`Rows taken on different days or machines (\`BENCH_ONLY\` reruns; compare ratios, not absolute figures, across them): ${Object.entries(byTake).map(([take, names]) => `${take}: ${names.join(', ')}`).join('; ')}.`]
}

export function report(results) {
  const { loop_scripted: scripted, loop_http: http, event_loop_utilization: elu, peak_rss_1000_sessions: rss, hook_dispatch: dispatch, webhook_notifications: webhooks, approvals, subagents, mcp, workers, builtins } = results.benchmarks
  // Absent from results taken before the approvals benchmark existed.
  const resumed = approvals?.resumed_sessions_per_second_sqlite
  const growth = scripted.growth1000over200
  const eluMet = elu.ratio['openai-agents'] <= 0.25
  // The HTTP client each peer talks to the model server with, as installed at run time.
  const provider = (pkg, major, name = pkg) => `\`${name}\` ${results.providerVersions?.[pkg] ?? major}`
  /** A peer's loop_http and event_loop_utilization rows for the table of `ai` 7, Mastra and LangGraph (none in results taken before they were measured over HTTP). */
  const httpRows = (peer, label) =>
    http.peers[peer] === undefined
      ? []
      : [
          `| ${label}, loop_http ${http.turns} turns, µs per tool call | ${fmt(http.ours)} | ${versus(http, peer)} | |`,
          `| ${label}, event_loop_utilization, ${elu.sessions} sessions, main-thread ELU | ${fmt(elu.ours)} | ${versus(elu, peer)} | |`,
          ...(elu.mainThreadCpuMs ? [`| ${label}, same run, main-thread CPU ms | ${fmt(elu.mainThreadCpuMs.ours)} | ${versus(elu.mainThreadCpuMs, peer)} | |`] : []),
        ]
  const lines = [
    '# Benchmark results',
    '',
    'Command: `npm run bench` (installs `bench/`\'s own devDependencies, the peers pinned in',
    '`bench/package.json`, on first use, then writes `bench/results.json` and this file).',
    `Machine: ${results.machine}; Node ${results.node}; release build; ${results.date}.`,
    ...takenOn(results.dates, results.machines),
    ...(results.peerVersions ? [`Peer versions, as installed: ${Object.entries(results.peerVersions).map(([name, version]) => `${name} ${version}`).join(', ')}.`] : []),
    'Every figure is a median of interleaved runs (A B C D A B C D …); ratios are ours / peer, lower',
    'is better (for rates, sessions per second, ours / peer above 1 is better). This 2-core VM\'s speed',
    'varies over time (a run at a busy moment was 2–3× slower for every system alike), so compare',
    'ratios rather than absolute times across runs.',
    '',
    'Peers, each written the way its docs show, with a scripted or mock model and the nearest',
    'equivalent of our two hooks: `openai-agents` is `@openai/agents` with a fake `Model` and tracing',
    'disabled (its `agent_tool_start` / `agent_tool_end` stand in for the hooks); `ai-sdk` is `ai` 5\'s',
    '`generateText` with its mock model (the hooks wrap `execute`, `onStepFinish` observes); `ai7` is',
    '`ai` 7\'s `ToolLoopAgent` with `MockLanguageModelV4` (`onToolExecutionStart` / `onToolExecutionEnd`);',
    '`mastra` is `@mastra/core`\'s `Agent` with `hooks.beforeToolCall` / `afterToolCall` (on ai 5\'s mock',
    'model, which Mastra takes); `langgraph` is `@langchain/langgraph`\'s prebuilt `createReactAgent` with a',
    'scripted chat model (LangChain\'s callbacks `handleToolStart` / `handleToolEnd`); `js-floor` is a hand-written loop with two hook calls per tool call —',
    'the floor no framework can beat in-process. In loop_scripted, loop_http and event_loop_utilization each',
    'system runs in a child process of its own (over HTTP each peer streams from a local server through',
    'the client its docs show: see loop_http); in loop_scripted and loop_http each run starts once the machine\'s CPUs',
    'have been at least 90% idle for 50 ms (at most 2 s of waiting), so what one system\'s process still does after its',
    'run (a collection finishing, code compiled on a background thread) is not timed in the next system\'s run.',
    'A loop_scripted sample runs one system\'s runs back to back for at least 250 ms (one run when a run takes',
    'longer) and gives the mean per tool call over them: a run of a few milliseconds is not timed from a cold start alone.',
    'For durable approvals the peer is LangGraph (`@langchain/langgraph`): a StateGraph of',
    'the ReAct shape whose tools node asks `interrupt()` and is resumed with `Command({ resume })`, on its',
    'SQLite checkpointer (at its default and at `synchronous=FULL`) and its PostgreSQL checkpointer.',
    '',
    '## Headline',
    '',
    '| benchmark | figure | ours | openai-agents | ai-sdk | js-floor | target | met |',
    '| --- | --- | ---: | ---: | ---: | ---: | --- | --- |',
    `| loop_scripted, 200 turns | µs per tool call | ${fmt(scripted.ours)} | ${versus(scripted, 'openai-agents')} | ${versus(scripted, 'ai-sdk')} | ${fmt(scripted.peers['js-floor'])} (${fmt(scripted.ratio['js-floor'])}×) | ≤ 0.1 / ≤ 0.2 | ${met(scripted.ratio['openai-agents'] <= 0.1)} / ${met(scripted.ratio['ai-sdk'] <= 0.2)} |`,
    `| loop_scripted, 1000 turns | µs per tool call | ${fmt(scripted.turns1000.ours)} | ${versus(scripted.turns1000, 'openai-agents')} | ${versus(scripted.turns1000, 'ai-sdk')} | ${fmt(scripted.turns1000.peers['js-floor'])} | growth ≤ 1.5× | ${met(growth.ours <= 1.5)} (${growth.ours}×; peers ${growth['openai-agents']}×, ${growth['ai-sdk']}×) |`,
    `| loop_http, ${http.turns} turns, SSE | µs per tool call | ${fmt(http.ours)} | ${versus(http, 'openai-agents')} | ${versusIf(http, 'ai-sdk')} | | ≤ 0.3 | ${met(http.ratio['openai-agents'] <= 0.3)} |`,
    `| event_loop_utilization, ${elu.sessions} sessions | main-thread ELU | ${fmt(elu.ours)} | ${versus(elu, 'openai-agents')} | ${versusIf(elu, 'ai-sdk')} | | ≤ 0.25 | ${met(eluMet)} |`,
    `| same run | main-thread busy ms | ${fmt(elu.activeMs.ours)} | ${versus(elu.activeMs, 'openai-agents')} | ${versusIf(elu.activeMs, 'ai-sdk')} | | | |`,
    ...(elu.mainThreadCpuMs ? [`| same run | main-thread CPU ms | ${fmt(elu.mainThreadCpuMs.ours)} | ${versus(elu.mainThreadCpuMs, 'openai-agents')} | ${versusIf(elu.mainThreadCpuMs, 'ai-sdk')} | | | |`] : []),
    `| same run | p99 event-loop delay, ms | ${fmt(elu.p99DelayMs.ours)} | ${versus(elu.p99DelayMs, 'openai-agents')} | ${versusIf(elu.p99DelayMs, 'ai-sdk')} | | | |`,
    `| peak_rss_1000_sessions | peak RSS, MB | ${fmt(rss.ours)} | ${versus(rss, 'openai-agents')} | ${versus(rss, 'ai-sdk')} | ${fmt(rss.peers['js-floor'])} | ≤ 0.5 every peer | ${met(everyPeer(rss, (ratio) => ratio <= 0.5))} |`,
    `| same run | wall time, ms | ${fmt(rss.wallMs.ours)} | ${versus(rss.wallMs, 'openai-agents')} | ${versus(rss.wallMs, 'ai-sdk')} | ${fmt(rss.wallMs.peers['js-floor'])} | | |`,
    `| webhook_notifications | notifications/s | ${webhooks.ours} | | | | ≥ 5000, 0 lost | ${met(webhooks.ours >= 5000 && webhooks.lost === 0)} (${webhooks.lost} lost of ${webhooks.sent}) |`,
    ...(approvals
      ? [
          `| approvals, round trip in memory | µs per pause → approve → resume | ${fmt(approvals.round_trip_memory.ours)} | | | | | |`,
          `| approvals, round trip on SQLite | µs per pause → approve → resume | ${fmt(approvals.round_trip_sqlite.ours)} | | | | | |`,
          `| approvals, ${resumed.sessions} sessions on SQLite | sessions paused and resumed /s | ${fmt(resumed.ours)} | | | | ≥ ${fmt(10 * resumed.peers.blade)} (10× Blade's published ${resumed.peers.blade}) | ${met(resumed.met)} (${fmt(resumed.ratio.blade)}×) |`,
          ...(approvals.resumed_sessions_per_second_postgres
            ? [`| approvals, ${approvals.resumed_sessions_per_second_postgres.sessions} sessions on PostgreSQL | sessions paused and resumed /s; LangGraph's PostgreSQL checkpointer | ${fmt(approvals.resumed_sessions_per_second_postgres.ours)} | ${fmt(approvals.resumed_sessions_per_second_postgres.peers['langgraph-postgres'])} (ours ${fmt(approvals.resumed_sessions_per_second_postgres.ratio['langgraph-postgres'])}× its rate) | | | ≥ 5× its rate | ${met(approvals.resumed_sessions_per_second_postgres.met)} |`, ...(approvals.resumed_sessions_per_second_postgres.commitsPerSession ? [`| same run | committed transactions per session (pg_stat_database) | ${fmt(approvals.resumed_sessions_per_second_postgres.commitsPerSession.ours)} | ${fmt(approvals.resumed_sessions_per_second_postgres.commitsPerSession['langgraph-postgres'])} | | | | |`] : [])]
            : []),
          ...['langgraph-sqlite-default', 'langgraph-sqlite-full']
            .filter((name) => resumed.peers[name] !== undefined)
            .map((name) => `| approvals, ${resumed.sessions} sessions on SQLite | LangGraph SQLite checkpointer (${resumed.durability[name].journal_mode}, synchronous=${resumed.durability[name].synchronous}), sessions /s | ${fmt(resumed.ours)} | ${fmt(resumed.peers[name])} (ours ${fmt(resumed.ratio[name])}× its rate) | | | ${name.endsWith('default') ? '≥ 2× its rate' : ''} | ${name.endsWith('default') ? met(resumed.ratio[name] >= 2) : ''} |`),
        ]
      : []),
    ...(subagents
      ? [
          `| subagents, ${subagents.calls} calls, two JS hooks | µs per tool call in the parent | ${fmt(subagents.parentUsPerCall)} | | | | | |`,
          `| same | µs per tool call inside a sub-agent | ${fmt(subagents.childUsPerCall)} (${subagents.ratio}× the parent's) | | | | | |`,
        ]
      : []),
    ...(mcp
      ? [
          `| mcp, ${mcp.calls} calls, two JS hooks | µs per JS tool call | ${fmt(mcp.jsUsPerCall)} | | | | | |`,
          `| same | µs per MCP tool call (stdio, Node server) | ${fmt(mcp.mcpUsPerCall)} (${mcp.ratio}× the JS tool's) | | | | | |`,
        ]
      : []),
    ...(workers && !workers.skipped
      ? ['plain', 'tls'].flatMap((transport) => {
          const w = workers[transport]
          const label = transport === 'plain' ? 'plain TCP' : 'TLS'
          return [
            ...Object.entries(w.sessionsPerSecond).map(
              ([count, value]) =>
                `| workers, ${workers.sessions} sessions, ${count} process${count === '1' ? '' : 'es'}, PostgreSQL ${label} | sessions claimed, run, completed /s | ${fmt(value)} | | | | ≥ ${fmt(5 * workers.blade.sessionsPerSecond)} (5× Blade's published ${workers.blade.sessionsPerSecond}) | ${met(value >= 5 * workers.blade.sessionsPerSecond)} (${w.ratioToBlade[count]}×) |`,
            ),
            `| same, ${label} | recover and reclaim, ms | ${fmt(w.recoverAndReclaimMs)} | | | | ≤ ${workers.blade.recoverAndReclaimMs} (Blade's) | ${met(w.recoverAndReclaimMs <= workers.blade.recoverAndReclaimMs)} |`,
            `| same, ${label} | claim with the store open, ms | ${fmt(w.idleClaimMs)} | | | | ≤ ${workers.blade.firstClaimMs} (Blade's first claim) | ${met(w.idleClaimMs <= workers.blade.firstClaimMs)} |`,
            `| same, ${label} | first claim in a new process (connect, migration check), ms | ${fmt(w.firstClaimMs)} | | | | | |`,
            `| same, ${label} | queued notifications delivered /s; lost | ${fmt(w.notificationsPerSecond)}; ${w.notificationsLost} of ${w.notificationsQueued} | | | | 0 lost | ${met(w.notificationsLost === 0)} |`,
          ]
        })
      : []),
    '',
    ...(scripted.peers.ai7 === undefined
      ? []
      : [
          '## `ai` 7, Mastra and LangGraph',
          '',
          `\`ai\` ${results.peerVersions?.ai7 ?? '7'}'s \`ToolLoopAgent\` with its \`MockLanguageModelV4\`; its \`onToolExecutionStart\` / \`onToolExecutionEnd\``,
          'callbacks stand in for the two hooks (over HTTP it streams through `@ai-sdk/openai-compatible`, and',
          'Mastra and LangGraph through the clients named under loop_http). Same runs as the headline (ours / peer in brackets):',
          '',
          '| figure | ours | ai 7 | target |',
          '| --- | ---: | ---: | --- |',
          `| loop_scripted, 200 turns, µs per tool call | ${fmt(scripted.ours)} | ${versus(scripted, 'ai7')} | ≤ 0.05 |`,
          `| loop_scripted, 1000 turns, µs per tool call | ${fmt(scripted.turns1000.ours)} | ${versus(scripted.turns1000, 'ai7')} | ≤ 0.05 |`,
          `| growth 1000/200 | ${growth.ours}× | ${growth.ai7}× | ours ≤ 1.2× |`,
          ...(rss.peers.ai7 === undefined ? [] : [`| peak RSS, 1000 sessions, MB | ${fmt(rss.ours)} | ${versus(rss, 'ai7')} | ≤ 0.5 |`]),
          ...httpRows('ai7', 'ai 7'),
          ...(scripted.peers.mastra === undefined
            ? []
            : [
                `| Mastra ${results.peerVersions?.mastra ?? ''} (\`Agent\` with \`hooks.beforeToolCall\` / \`afterToolCall\`), loop_scripted 200 turns | ${fmt(scripted.ours)} | ${versus(scripted, 'mastra')} | ≤ 0.05 |`,
                `| Mastra, loop_scripted 1000 turns | ${fmt(scripted.turns1000.ours)} | ${versus(scripted.turns1000, 'mastra')} | ≤ 0.05 |`,
                ...httpRows('mastra', 'Mastra'),
              ]),
          ...(scripted.peers.langgraph === undefined
            ? []
            : [
                `| LangGraph ${results.peerVersions?.langgraph ?? ''} (\`createReactAgent\`, callbacks' \`handleToolStart\` / \`handleToolEnd\`), loop_scripted 200 turns | ${fmt(scripted.ours)} | ${versus(scripted, 'langgraph')} | ≤ 0.05 |`,
                `| LangGraph, loop_scripted 1000 turns | ${fmt(scripted.turns1000.ours)} | ${versus(scripted.turns1000, 'langgraph')} | ≤ 0.05 |`,
                ...httpRows('langgraph', 'LangGraph'),
              ]),
          '',
        ]),
    '## loop_scripted',
    '',
    'One agent, a scripted model issuing one tool call per turn, one JS tool returning a short',
    `string, one before and one after hook per call. From 200 to 1000 turns our cost per call changed`,
    `${growth.ours}× (target ≤ 1.5×; the 200-turn figure moves between runs on this VM); the pure-JS SDKs grow ${growth['openai-agents']}× and`,
    `${growth['ai-sdk']}×, because they rebuild or copy the conversation on every turn. Against the`,
    'hand-written floor (a JS loop doing nothing but three function calls per tool call) we are about',
    `${fmt(scripted.ratio['js-floor'])}× slower: each tool call still builds and parses JSON for three calls into JS,`,
    'creates events and keeps the conversation.',
    '',
    '## loop_http',
    '',
    'The same workload against an OpenAI-compatible server on 127.0.0.1 in another process',
    '(`bench/model_server.mjs`: streaming `POST /v1/chat/completions`, each completion with an id of',
    `its own, usage when \`stream_options\` asks for it), ${http.turns} turns, streaming SSE. Each system runs in a`,
    'child process of its own that loads only that system (`bench/systems_http/`), kept for the whole',
    `benchmark and asked for one run at a time, interleaved across systems${http.repeats ? ` (median of ${http.repeats})` : ''}. A run must end`,
    `with the text \`done\` after exactly ${http.turns} tool calls, each with one call of our before and one of our after`,
    'hook (counted). Ours talks to the server from Rust. Each peer streams the way its docs show, through',
    'a client created once per server as an app would (each run builds its agent):',
    '',
    `- \`openai-agents\`: \`@openai/agents\`' \`OpenAIChatCompletionsModel\` over the ${provider('openai', '7')} client, \`run(…, { stream: true })\`;`,
    '  hooks: `agent_tool_start` / `agent_tool_end`.',
    `- \`ai-sdk\`: \`ai\` 5's \`streamText\` on ${provider('@ai-sdk/openai-compatible-v5', '1.x', '@ai-sdk/openai-compatible')} (installed as the alias`,
    '  `@ai-sdk/openai-compatible-v5`: the 1.x line makes the LanguageModelV2 that ai 5 takes); the hooks wrap',
    '  `execute` (ai 5 has no tool-execution callbacks), `onStepFinish` observes.',
    `- \`ai7\`: \`ai\` 7's \`ToolLoopAgent.stream\` on ${provider('@ai-sdk/openai-compatible', '3.x')} (a LanguageModelV4); hooks:`,
    '  `onToolExecutionStart` / `onToolExecutionEnd`.',
    '- `mastra`: `@mastra/core`\'s `Agent.stream` with the model config its docs give for an OpenAI-compatible',
    '  endpoint, `{ id, url, apiKey }` (its model router, on the `@ai-sdk/openai-compatible` it bundles: no',
    '  provider package); hooks: `hooks.beforeToolCall` / `afterToolCall`.',
    `- \`langgraph\`: \`@langchain/langgraph\`'s prebuilt \`createReactAgent\` on ${provider('@langchain/openai', '1.x')}'s \`ChatOpenAI\``,
    "  (`configuration: { baseURL }`, `streaming: true`), `agent.stream(…, { streamMode: 'messages' })`; hooks:",
    "  LangChain's callbacks `handleToolStart` / `handleToolEnd`.",
    '',
    ...everySystem([[`µs per tool call, ${http.turns} turns (ours / peer)`, http]]),
    '',
    '## event_loop_utilization',
    '',
    `${elu.sessions} concurrent sessions of ${elu.turnsPerSession} tool calls each (two JS hooks and a JS tool per`,
    `call), streaming from that server, which answers after ${elu.modelLatencyMs} ms as a model would, in every system`,
    'of loop_http, written the same way and run the same way (a child process each, interleaved);',
    '`performance.eventLoopUtilization()` and `monitorEventLoopDelay` (p99) on the main thread of the',
    `child, the one running the sessions, over the run. The target (≤ 0.25) is ${eluMet ? 'met' : '**not met**'}: our run is ${fmt(elu.ours)} utilized against`,
    `${fmt(elu.peers['openai-agents'])}. The JS thread does ${fmt(elu.activeMs.ratio['openai-agents'])}× the work of \`@openai/agents\` in`,
    `absolute terms (${fmt(elu.activeMs.ours)} ms against ${fmt(elu.activeMs.peers['openai-agents'])} ms) and its p99 delay is`,
    `${fmt(elu.p99DelayMs.ratio['openai-agents'])}×; utilization is the busy time over the run's wall time, and ours is a short`,
    'run on a machine whose two cores are shared with the model server and the HTTP workers.',
    ...(elu.mainThreadCpuMs ? [`Busy time counts time the thread was preempted while busy; its CPU time (from \`/proc\`) was ${fmt(elu.mainThreadCpuMs.ours)} ms.`] : []),
    '',
    ...everySystem([
      ['main-thread ELU', elu],
      ['main-thread busy ms', elu.activeMs],
      ...(elu.mainThreadCpuMs ? [['main-thread CPU ms', elu.mainThreadCpuMs]] : []),
      ['p99 event-loop delay, ms', elu.p99DelayMs],
    ]),
    '',
    '## peak_rss_1000_sessions',
    '',
    '1000 concurrent sessions × 10 tool calls, scripted model, each system in its own child process',
    'that loads only that system.',
    '',
    '## hook_dispatch',
    '',
    'A scripted model issues one tool call per turn; the configurations differ only in the',
    'PreToolUse callbacks (sync JS functions returning `{ action: \'continue\' }`). The cost of an',
    'event is the time per tool call minus the time with no callbacks.',
    '',
    '| callbacks | µs per tool call | µs per PreToolUse event |',
    '| ---: | ---: | ---: |',
    ...['0', '1', '3', '10', 'no-match'].map((key) => `| ${key === 'no-match' ? '10 hook objects whose matcher does not match' : key} | ${fmt(dispatch.perCallUs[key])} | ${fmt(dispatch.ours[key])} |`),
    '',
    'With only hook objects whose `matcher` does not match the tool, no callback is invoked (the',
    `benchmark counts invocations: ${dispatch.callbacksInvokedWithNoMatch}) and the event costs ${fmt(dispatch.ours['no-match'])} µs over no hooks at all (ten regex`,
    'tests; the figure is a difference of two medians, and on this VM such differences move by a few',
    'µs between runs). The Rust tests check that an event without callbacks calls nothing. Each',
    'callback is one direct call into JS.',
    '',
    '## webhook_notifications',
    '',
    `${webhooks.sessions} concurrent sessions share ${webhooks.toolCallsPerRun} tool calls, each with an`,
    '`afterToolCall` notification to a receiver in another process (`bench/receiver.mjs`, which',
    `counts what it got). Sustained ${webhooks.ours} notifications/s; the notification adds`,
    `${webhooks.addedLatencyUsPerToolCall.median} µs per tool call at the median (${webhooks.addedLatencyUsPerToolCall.p99} µs p99, against the`,
    `same runs without the webhook); ${webhooks.sent} sent, ${webhooks.received} received, ${webhooks.lost} lost.`,
    '',
    ...(approvals
      ? [
          '## approvals',
          '',
          'One agent, a scripted model asking for one call of a trivial `kind: \'write\'` tool, `permission:',
          '\'default\'` and no confirmation handler, so every `send` pauses: `send` → paused result',
          '(`stopReason: \'interrupted\'`, one pending approval) → `approve` → `resume` → result. A sample is',
          `${approvals.roundTripsPerSample} round trips on a fresh agent; in memory and on SQLite (\`advanced.store: { sqlite }\`) interleaved,`,
          `median of ${approvals.repeats} samples: ${fmt(approvals.round_trip_memory.ours)} µs in memory, ${fmt(approvals.round_trip_sqlite.ours)} µs on SQLite per round trip. On SQLite a`,
          'round trip writes the pause, the decision, the turn boundaries and the effects ledger; every',
          'write of the process goes to the file\'s one writer, which commits the writes waiting at that',
          'moment in one transaction (group commit; WAL, `synchronous=FULL` for run state, so such a',
          'commit waits for the disk). One agent alone has nothing to share a commit with, so this figure',
          'is one commit per write; the conversation is saved whole at each boundary.',
          '',
          `${resumed.sessions} concurrent sessions on one SQLite file: each is created and sent a message until it has`,
          'paused, then closed; once all have paused, each is opened with `resumeAgent({ ...options,',
          'sessionId })` — a new agent object, as another process would — approved, resumed to its',
          `result and closed. ${fmt(resumed.ours)} sessions/s over the whole of it (median of ${resumed.repeats} runs; pausing all took`,
          `${fmt(resumed.pauseMs)} ms, resuming all ${fmt(resumed.resumeMs)} ms). The process keeps the file open throughout (an idle`,
          'agent holds its pool, as a server would), so opening the file is not counted. The SQLite files',
          `are in the OS temp directory (${approvals.sqliteFileSystem} on this machine's disk) and removed afterwards.`,
          '',
          `Blade's ${resumed.peers.blade} sessions/s is the figure Blade published for its runtime store (PostgreSQL, 100`,
          'sessions): a reference quoted from Blade, not run here, on another machine and another',
          `database. Ours is ${fmt(resumed.ratio.blade)}× that (higher is better). Measured in the same run on the same disk,`,
          "LangGraph's SQLite checkpointer (`@langchain/langgraph-checkpoint-sqlite`, `interrupt()` then",
          '`Command({ resume })`, the same 100 sessions) at its default durability (WAL,',
          `\`synchronous=NORMAL\`): ${fmt(resumed.peers['langgraph-sqlite-default'])} sessions/s, ours ${fmt(resumed.ratio['langgraph-sqlite-default'])}× its rate with \`FULL\` kept; at`,
          `\`FULL\` like ours ${fmt(resumed.peers['langgraph-sqlite-full'])}/s (ours ${fmt(resumed.ratio['langgraph-sqlite-full'])}×). The target, at least 2× LangGraph at its default and`,
          `10× Blade's figure, is ${resumed.met ? 'met' : '**not met**'}.`,
          '',
        ]
      : []),
    ...(builtins ? builtinsSection(builtins) : []),
  ]
  const notes = readFileSync(new URL('./notes.md', import.meta.url), 'utf8')
  return `${lines.join('\n')}\n${notes}`
}

export function writeReport() {
  const results = JSON.parse(readFileSync(new URL('./results.json', import.meta.url), 'utf8'))
  writeFileSync(new URL('./RESULTS.md', import.meta.url), report(results))
}

if (process.argv[1] === fileURLToPath(import.meta.url)) writeReport()


/** `## builtins`: Grep and Glob against rg and Blade, Read and Bash memory (bench/builtins.mjs). */
export function builtinsSection(b) {
  const gb = (b.tree.bytes / 1e9).toFixed(2)
  const blades = [...new Set(b.grep.flatMap((row) => Object.keys(row.ms).filter((name) => name.startsWith('blade'))))]
  const cell = (row, name) => (row.ms[name] === undefined ? '' : `${fmt(row.ms[name])}${name === 'ours' || name === 'rg' ? '' : ` (${fmt(row.speedupOverBlade[name])}×)`}${name !== 'rg' && row.sameAnswerAsRg[name] === false ? ' ≠' : ''}`)
  const worst = (rows) => Math.max(...rows.map((row) => row.ratioToRg))
  const grepWorst = worst(b.grep)
  const globWorst = worst(b.glob)
  const bladeRg = b.grep.map((row) => row.speedupOverBlade['blade (rg)']).filter((value) => value !== undefined)
  const slowest = (name, rows = b.grep) => rows.map((row) => row.speedupOverBlade[name]).filter((value) => value !== undefined)
  const span = (values) => (values.length ? `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}×` : 'not measured')
  const range = (name) => span(slowest(name))
  const sameRange = (name) => span(slowest(name, b.grep.filter((row) => row.sameAnswerAsRg[name])))
  const lines = [
    '## builtins',
    '',
    `Grep and Glob over a generated tree (\`bench/builtins_tree.mjs\`, seeded, in \`${b.tree.dir}\`): ${b.tree.files} files,`,
    `${gb} GB — ${b.tree.sources.files} source-like text files of 300 B–40 KB (log-uniform) in nested package folders, four`,
    `large files (100 MB and 3 × 50 MB), ${b.tree.binaries.files} binary files, and a \`.gitignore\` excluding \`node_modules/\` and \`target/\``,
    `(${b.tree.ignored.files} files, ${(b.tree.ignored.bytes / 1e6).toFixed(0)} MB); a git repository with every file in the index. Rare markers planted at fixed`,
    'rates give each query a known, moderate answer. **Ours** is the built-in tool called as a user gets it:',
    'an agent (`filesystem: { roots: [tree], cwd: tree }`) whose scripted model calls the tool once; timed',
    'from its PreToolUse to its PostToolUse callback (the whole `send` → `result` is given too). **rg** is',
    `Debian's \`${b.rg}\` run as a process with the equivalent command, timed from spawn to exit with its output read.`,
    `Threads: ${b.threads}. ${b.cache[0].toUpperCase()}${b.cache.slice(1)}. Every figure is the median of ${b.repeats} interleaved runs`,
    `(ours, rg, Blade, … then again), in ms${b.loadAverage ? ` (load average ${b.loadAverage.start} at the start, ${b.loadAverage.end} at the end: the VM's two cores were shared with other work, so compare ratios, not absolute times)` : ''}. **Blade** is \`@blade-ai/agent-sdk\` ${b.blade.version}, ${b.blade.skipped ? `**not run**: ${b.blade.skipped}` : 'built from source (`bench/blade_sdk.mjs`: the package is not on the npm registry these machines reach), its `getBuiltinTools()` Grep and Glob called with `execute(params, { contextSnapshot })` in a child process'}.`,
    ...(b.blade.skipped
      ? []
      : [
          'Its Grep picks a backend by what it finds: the system `rg` first, then a vendored or `@vscode/ripgrep`',
          'binary (neither installs here: both download one), then `git grep` in a repository, then `grep -r`,',
          'then a JS scan; each column is one Blade process given a PATH that leaves it that backend (the backend',
          `it reported using is in results.json). The slower backends ran ${b.slowRepeats} times, the JS one once, on ${b.jsQueries.join(', ')}.`,
          'In parentheses: Blade\'s time over ours (the target is ≥ 5); ≠ marks an answer that differs from rg\'s',
          '(git grep and grep read `\\(` as a group, and their `file:line:text` output is parsed as file names in',
          '`files_with_matches` mode; the JS scan ignores `output_mode` and `.gitignore`).',
        ]),
    '',
    `| Grep | rg command | entries | ours | ours, whole call | rg | ours / rg | ${blades.join(' | ')} |`,
    `| --- | --- | ---: | ---: | ---: | ---: | ---: |${blades.map(() => ' ---: |').join('')}`,
    ...b.grep.map((row) => `| ${row.name} | \`${row.rg}\` | ${row.entries} | ${cell(row, 'ours')} | ${fmt(row.oursWallMs)} | ${fmt(row.ms.rg)} | ${fmt(row.ratioToRg)} | ${blades.map((name) => cell(row, name)).join(' | ')} |`),
    '',
    '| Glob | rg command | entries | ours | ours, whole call | rg | ours / rg | blade |',
    '| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |',
    ...b.glob.map((row) => `| ${row.name} | \`${row.rg}\` | ${row.entries} | ${cell(row, 'ours')} | ${fmt(row.oursWallMs)} | ${fmt(row.ms.rg)} | ${fmt(row.ratioToRg)} | ${cell(row, 'blade')} |`),
    '',
    ...(b.glob.some((row) => row.name.startsWith('packages/'))
      ? ['A pattern with a leading folder (`packages/pkg-07/**/*.md`) is walked from that folder only; `rg --iglob` walks the whole tree and filters.', '']
      : []),
    `Against the targets: ours / rg is at most ${fmt(grepWorst)} on Grep and ${fmt(globWorst)} on Glob (target ≤ 1.3: ${met(grepWorst <= 1.3 && globWorst <= 1.3)}).`,
    ...(b.blade.skipped
      ? []
      : [
          `Blade with its preferred backend, the same \`rg\`, takes ${fmt(Math.min(...bladeRg))}–${fmt(Math.max(...bladeRg))}× our time on Grep (target ≥ 5: ${met(Math.min(...bladeRg) >= 5)}):`,
          'there Blade\'s Grep is rg plus a process spawn, its default exclusion globs and parsing the text,',
          'so no implementation can be 5× faster than it while staying within 1.3× of rg. With the backends it',
          `falls back to without rg, Blade takes: grep -r ${range('blade (grep)')}, the JS scan ${range('blade (js)')} our time;`,
          `git grep ${range('blade (git grep)')}, that is, **faster than ours** (${sameRange('blade (git grep)')} on the queries where its answer is rg's):`,
          'it takes the list of files from git\'s index instead of walking the folders and reading their ignore',
          'files, and with a pathspec (`-- *.rs`) it reads only those files.',
          `Blade's Glob (fast-glob, stat of every entry, a recursive scan for .gitignore files) takes ${fmt(Math.min(...b.glob.map((row) => row.speedupOverBlade.blade)))}–${fmt(Math.max(...b.glob.map((row) => row.speedupOverBlade.blade)))}× our time (target ≥ 5: ${met(Math.min(...b.glob.map((row) => row.speedupOverBlade.blade)) >= 5)}).`,
        ]),
    '',
    'Memory: each case in a new process (an agent, one warm-up call of the same tool, then the case), its',
    'peak RSS (VmHWM, /proc/self/status) read before and after the call; RSS was also sampled every 10 ms.',
    `Flat means the peak grew by at most ${MEMORY_BOUND_MB} MB, whatever the size of the file or the output.`,
    '',
    '| case | ms | peak RSS before, MB | after, MB | growth, MB | answer, chars | what the model got |',
    '| --- | ---: | ---: | ---: | ---: | ---: | --- |',
    ...b.memory.map((row) => `| ${row.name} | ${row.ms} | ${fmt(row.peakBeforeMb)} | ${fmt(row.peakAfterMb)} | ${fmt(row.growthMb)} | ${row.answerChars} | ${row.answer.replaceAll('|', '\\|')} |`),
    '',
    `Flat memory (growth ≤ ${MEMORY_BOUND_MB} MB in every case): ${met(b.memory.every((row) => row.growthMb <= MEMORY_BOUND_MB))}.`,
    '',
  ]
  return lines
}
