import { createOpenAICompatible } from '@ai-sdk/openai-compatible'
import { jsonSchema, stepCountIs, tool as aiTool, ToolLoopAgent } from 'ai'
import { after, before, parameters } from '../systems/common.mjs'

// One provider per server, as an app configures it once.
const providers = new Map()

/** Vercel `ai` 7's `ToolLoopAgent` on `@ai-sdk/openai-compatible` 3.x (LanguageModelV4);
 * `onToolExecutionStart` / `onToolExecutionEnd` are the two hooks. */
export default async function ai7(baseUrl, turns) {
  if (!providers.has(baseUrl)) providers.set(baseUrl, createOpenAICompatible({ name: 'bench', baseURL: baseUrl, apiKey: 'bench' }))
  let calls = 0
  const agent = new ToolLoopAgent({
    model: providers.get(baseUrl).chatModel(`bench-${turns}`),
    tools: { noop: aiTool({ inputSchema: jsonSchema(parameters), execute: async ({ i }) => (calls++, `ok ${i}`) }) },
    stopWhen: stepCountIs(turns + 1),
    onToolExecutionStart: () => before(),
    onToolExecutionEnd: () => after(),
  })
  const result = await agent.stream({ prompt: 'go' })
  let text = ''
  for await (const delta of result.textStream) text += delta
  if (text !== 'done') throw new Error(`ai 7 did not finish: ${JSON.stringify(text)}`)
  return calls
}
