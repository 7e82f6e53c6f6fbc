import { Agent } from '@mastra/core/agent'
import { createTool } from '@mastra/core/tools'
import { z } from 'zod'
import { after, before } from '../systems/common.mjs'

/** Mastra's `Agent` with its documented model config for an OpenAI-compatible endpoint
 * (`{ id, url, apiKey }`: its model router on the `@ai-sdk/openai-compatible` it bundles, no
 * provider package); `hooks.beforeToolCall` / `afterToolCall` are the two hooks. */
export default async function mastra(baseUrl, turns) {
  let calls = 0
  const noop = createTool({ id: 'noop', description: 'noop', inputSchema: z.object({ i: z.number() }), execute: async ({ i }) => (calls++, `ok ${i}`) })
  const agent = new Agent({
    id: 'bench',
    name: 'bench',
    instructions: 'bench',
    model: { id: `bench/bench-${turns}`, url: baseUrl, apiKey: 'bench' },
    tools: { noop },
    hooks: { beforeToolCall: () => void before(), afterToolCall: () => void after() },
  })
  const stream = await agent.stream('go', { maxSteps: turns + 1 })
  let text = ''
  for await (const delta of stream.textStream) text += delta
  if (text !== 'done') throw new Error(`mastra did not finish: ${JSON.stringify(text)}`)
  return calls
}
