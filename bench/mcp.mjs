// mcp: an MCP tool call through two hooks against a JS tool call through the same two hooks
// (issue 15). One agent, a scripted model making CALLS tool calls, one per turn, with a
// PreToolUse and a PostToolUse callback returning continue:
// - js: the tool is a JS function returning a short string;
// - mcp: the tool is `echo` on a stdio MCP server (bench/mcp_server.mjs, a Node process using
//   @modelcontextprotocol/sdk) reached through rmcp: JSON-RPC over the child's pipes and back.
// µs per tool call, each sample a fresh agent (the server is started before the clock starts),
// interleaved, median of REPEATS samples after a warm-up.
import { fileURLToPath } from 'node:url'
import { createAgent, defineTool, scriptedModel } from '../index.mjs'
import { interleaved } from './stats.mjs'

const CALLS = Number(process.env.MCP_CALLS ?? 200)
const REPEATS = Number(process.env.REPEATS ?? 9)
const SERVER = fileURLToPath(new URL('./mcp_server.mjs', import.meta.url))

const echo = defineTool({ name: 'echo', parameters: { type: 'object', properties: { i: { type: 'number' } } }, execute: ({ i }) => `ok ${i}` })
const hooks = { PreToolUse: [() => ({ action: 'continue' })], PostToolUse: [() => ({ action: 'continue' })] }

function model(tool) {
  let calls = 0
  return scriptedModel(() => {
    if (calls >= CALLS) return { text: 'done' }
    calls += 1
    return { toolCalls: [{ id: `c${calls}`, name: tool, input: { i: calls } }] }
  })
}

async function sample(kind) {
  const mcp = kind === 'mcp'
  const agent = await createAgent({
    model: model(mcp ? 'mcp__bench__echo' : 'echo'),
    maxTurns: CALLS + 5,
    ...(mcp ? {} : { tools: [echo] }),
    advanced: { hooks, ...(mcp ? { mcpServers: { bench: { command: process.execPath, args: [SERVER] } } } : {}) },
  })
  const started = process.hrtime.bigint()
  const result = await (await agent.send('go')).result()
  const elapsed = Number(process.hrtime.bigint() - started) / 1000
  await agent.close()
  if (result.toolCalls.length !== CALLS || result.toolCalls.some((call) => call.isError || call.output !== `ok ${call.input.i}`)) {
    throw new Error(`mcp ${kind}: expected ${CALLS} successful calls, got ${JSON.stringify(result.toolCalls.slice(0, 2))}`)
  }
  return elapsed / CALLS
}

export async function mcp() {
  await sample('js')
  await sample('mcp')
  const medians = await interleaved(['js', 'mcp'], REPEATS, sample)
  return {
    calls: CALLS,
    repeats: REPEATS,
    jsUsPerCall: Number(medians.js.toFixed(2)),
    mcpUsPerCall: Number(medians.mcp.toFixed(2)),
    ratio: Number((medians.mcp / medians.js).toFixed(3)),
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(JSON.stringify(await mcp(), null, 2))
