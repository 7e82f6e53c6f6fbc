import { createAgent, defineTool } from '../../index.mjs'
import { after, before, parameters } from '../systems/common.mjs'

/** agent-runtime-hooks: the loop and the model's HTTP in Rust, a PreToolUse and a PostToolUse JS callback. */
export default async function ours(baseUrl, turns) {
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
  if (text !== 'done') throw new Error(`ours did not finish: ${JSON.stringify(text)}`)
  return result.toolCalls.length
}
