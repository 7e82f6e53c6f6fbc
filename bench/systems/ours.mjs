import { createAgent, defineTool, scriptedModel } from '../../index.mjs'
import { after, before, parameters } from './common.mjs'

/** agent-runtime-hooks: the loop in Rust, a PreToolUse and a PostToolUse JS callback. */
export default async function ours(turns) {
  const script = [...Array.from({ length: turns }, (_, i) => ({ toolCalls: [{ id: `c${i}`, name: 'noop', input: { i } }] })), { text: 'done' }]
  const agent = await createAgent({
    model: scriptedModel(script),
    tools: [defineTool({ name: 'noop', parameters, execute: ({ i }) => `ok ${i}` })],
    maxTurns: turns + 1,
    advanced: {
      hooks: {
        PreToolUse: [() => (before(), { action: 'continue' })],
        PostToolUse: [() => (after(), { action: 'continue' })],
      },
    },
  })
  const result = await (await agent.send('go')).result()
  await agent.close()
  return result.toolCalls.length
}

