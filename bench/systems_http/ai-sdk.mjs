import { createOpenAICompatible } from '@ai-sdk/openai-compatible-v5'
import { jsonSchema, stepCountIs, streamText, tool as aiTool } from 'ai5'
import { executeWithHooks, parameters } from '../systems/common.mjs'

// One provider per server, as an app configures it once.
const providers = new Map()

/** Vercel `ai` 5's `streamText` on `@ai-sdk/openai-compatible` 1.x (LanguageModelV2, npm alias
 * `@ai-sdk/openai-compatible-v5`); the hooks wrap execute, and onStepFinish observes. */
export default async function aiSdk(baseUrl, turns) {
  if (!providers.has(baseUrl)) providers.set(baseUrl, createOpenAICompatible({ name: 'bench', baseURL: baseUrl, apiKey: 'bench' }))
  let calls = 0
  const result = streamText({
    model: providers.get(baseUrl).chatModel(`bench-${turns}`),
    prompt: 'go',
    tools: {
      noop: aiTool({
        inputSchema: jsonSchema(parameters),
        execute: (input) => (calls++, executeWithHooks(input)),
      }),
    },
    stopWhen: stepCountIs(turns + 1),
    onStepFinish: () => {},
  })
  let text = ''
  for await (const delta of result.textStream) text += delta
  if (text !== 'done') throw new Error(`ai-sdk did not finish: ${JSON.stringify(text)}`)
  return calls
}
