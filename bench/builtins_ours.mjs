// The builtins benchmark's child for agent-runtime-hooks: each request is one Grep or Glob call
// made the way a user gets it, by an agent (`filesystem: { roots, cwd }`) whose scripted model
// calls the tool once. It answers the tool's time (PreToolUse → PostToolUse, on the JS thread),
// the whole call's (send → result, agent creation and close excluded) and what the model was sent.
import { performance } from 'node:perf_hooks'
import { createAgent, scriptedModel } from '../index.mjs'
import { serve } from './builtins_child.mjs'

const root = process.env.BENCH_TREE
let calls = 0

serve(async ({ tool, input }) => {
  let pre = 0
  let post = 0
  const agent = await createAgent({
    model: scriptedModel([{ toolCalls: [{ id: `call_${++calls}`, name: tool, input }] }, { text: 'done' }]),
    filesystem: { roots: [root], cwd: root },
    advanced: {
      hooks: {
        PreToolUse: [() => ((pre = performance.now()), { action: 'continue' })],
        PostToolUse: [() => ((post = performance.now()), { action: 'continue' })],
      },
    },
  })
  const started = performance.now()
  const result = await (await agent.send('search')).result()
  const wallMs = performance.now() - started
  await agent.close()
  const [record] = result.toolCalls
  if (!record || record.isError || !post) throw new Error(`${tool} failed: ${record?.output}`)
  return { ms: post - pre, wallMs, output: record.output }
})
