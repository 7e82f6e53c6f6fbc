import { createAgent, defineTool, scriptedModel } from '../../index.mjs'
import { after, before, parameters } from './common.mjs'

/** agent-runtime-hooks: the loop in Rust, a PreToolUse and a PostToolUse JS callback. */
export default function ours(turns) {
  return runOurs(turns, {
    execute: ({ i }) => `ok ${i}`,
    hooks: {
      PreToolUse: [() => (before(), { action: 'continue' })],
      PostToolUse: [() => (after(), { action: 'continue' })],
    },
  })
}

/** The scripted run every variant of ours shares: `turns` calls of the tool `noop` running
 * `execute`, with `hooks` registered when given; resolves with the tool calls made. */
export async function runOurs(turns, { execute, hooks }) {
  const script = [...Array.from({ length: turns }, (_, i) => ({ toolCalls: [{ id: `c${i}`, name: 'noop', input: { i } }] })), { text: 'done' }]
  const agent = await createAgent({
    model: scriptedModel(script),
    tools: [defineTool({ name: 'noop', parameters, execute })],
    maxTurns: turns + 1,
    ...(hooks && { advanced: { hooks } }),
  })
  const result = await (await agent.send('go')).result()
  await agent.close()
  return result.toolCalls.length
}
