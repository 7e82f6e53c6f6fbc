import { createAgent, defineTool, scriptedModel } from '../../index.mjs'
import { executeWithHooks, parameters } from './common.mjs'

/**
 * Not a peer, and not in `NAMES`: ours with no hooks registered, the two hook functions called
 * inside the tool instead (as `ai` 5's runner does). One crossing into JS per tool call instead
 * of three, so set beside `ours` it shows what the loop costs apart from hook dispatch:
 * `SYSTEMS=ours,ours-hooks-in-tool,ai7,js-floor node bench/loop_scripted.mjs`.
 */
export default async function oursHooksInTool(turns) {
  const script = [...Array.from({ length: turns }, (_, i) => ({ toolCalls: [{ id: `c${i}`, name: 'noop', input: { i } }] })), { text: 'done' }]
  const agent = await createAgent({
    model: scriptedModel(script),
    tools: [defineTool({ name: 'noop', parameters, execute: executeWithHooks })],
    maxTurns: turns + 1,
  })
  const result = await (await agent.send('go')).result()
  await agent.close()
  return result.toolCalls.length
}
