import { Agent } from '@mastra/core/agent'
import { createTool } from '@mastra/core/tools'
import { MockLanguageModelV2 } from 'ai5/test'
import { z } from 'zod'
import { after, before } from './common.mjs'

/** Mastra's `Agent` with the AI SDK's mock model (ai 5's, which Mastra takes); its `hooks.beforeToolCall` / `afterToolCall` are the two hooks. */
export default async function mastra(turns) {
  let call = 0
  const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
  const model = new MockLanguageModelV2({
    doGenerate: async () => {
      if (call < turns) {
        const i = call++
        return { content: [{ type: 'tool-call', toolCallId: `c${i}`, toolName: 'noop', input: JSON.stringify({ i }) }], finishReason: 'tool-calls', usage, warnings: [] }
      }
      return { content: [{ type: 'text', text: 'done' }], finishReason: 'stop', usage, warnings: [] }
    },
  })
  const noop = createTool({ id: 'noop', description: 'noop', inputSchema: z.object({ i: z.number() }), execute: async ({ i }) => `ok ${i}` })
  const agent = new Agent({
    id: 'bench',
    name: 'bench',
    instructions: 'bench',
    model,
    tools: { noop },
    hooks: { beforeToolCall: () => void before(), afterToolCall: () => void after() },
  })
  const result = await agent.generate('go', { maxSteps: turns + 1 })
  if (result.text !== 'done') throw new Error(`mastra did not finish: ${JSON.stringify(result.text)}`)
  return call
}
