// subagents: what a tool call costs inside a sub-agent against the same call in the parent
// (issue 15). One agent, two JS hooks (PreToolUse and PostToolUse, each returning continue), a
// scripted model and a trivial tool:
// - parent: the root agent makes CALLS tool calls, one per turn, then answers.
// - child: the root makes one `Task` call; the sub-agent makes the same CALLS tool calls, one
//   per turn, then answers (its answer is the Task call's result, then the root answers).
// µs per tool call, each sample a fresh agent, parent and child interleaved, median of REPEATS
// samples after a warm-up. The child's figure includes its share of the one Task call (starting
// the sub-agent, its events on the parent); with CALLS = 200 that share is small.
import { fileURLToPath } from 'node:url'
import { createAgent, defineTool, scriptedModel } from '../index.mjs'
import { interleaved } from './stats.mjs'

const CALLS = Number(process.env.SUBAGENT_CALLS ?? 200)
const REPEATS = Number(process.env.REPEATS ?? 9)

const echo = defineTool({ name: 'echo', parameters: { type: 'object', properties: { i: { type: 'number' } } }, execute: ({ i }) => `ok ${i}` })
const hooks = { PreToolUse: [() => ({ action: 'continue' })], PostToolUse: [() => ({ action: 'continue' })] }

/** The root (no system prompt) or the sub-agent (its system prompt) calls echo CALLS times. */
function model(delegate) {
  let calls = 0
  return scriptedModel((request) => {
    const inChild = request.messages[0]?.role === 'system'
    const worker = delegate ? inChild : true
    if (delegate && !inChild) {
      const delegated = request.messages.some((message) => message.role === 'tool')
      return delegated ? { text: 'done' } : { toolCalls: [{ id: 'task', name: 'Task', input: { subagent_type: 'worker', prompt: 'work' } }] }
    }
    if (worker && calls < CALLS) {
      calls += 1
      return { toolCalls: [{ id: `c${calls}`, name: 'echo', input: { i: calls } }] }
    }
    return { text: 'worked' }
  })
}

async function sample(where) {
  const delegate = where === 'child'
  const agent = await createAgent({
    model: model(delegate),
    tools: [echo],
    maxTurns: CALLS + 5,
    advanced: { hooks, ...(delegate ? { agents: { worker: { description: 'works', systemPrompt: 'You work.', maxTurns: CALLS + 5 } } } : {}) },
  })
  const started = process.hrtime.bigint()
  const result = await (await agent.send('go')).result()
  const elapsed = Number(process.hrtime.bigint() - started) / 1000
  await agent.close()
  const expected = delegate ? 1 : CALLS
  if (result.toolCalls.length !== expected || result.toolCalls.some((call) => call.isError)) {
    throw new Error(`subagents ${where}: expected ${expected} successful calls, got ${JSON.stringify(result.toolCalls.slice(0, 2))}`)
  }
  return elapsed / CALLS
}

export async function subagents() {
  await sample('parent')
  await sample('child')
  const medians = await interleaved(['parent', 'child'], REPEATS, sample)
  return {
    calls: CALLS,
    repeats: REPEATS,
    parentUsPerCall: Number(medians.parent.toFixed(2)),
    childUsPerCall: Number(medians.child.toFixed(2)),
    ratio: Number((medians.child / medians.parent).toFixed(3)),
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) console.log(JSON.stringify(await subagents(), null, 2))
