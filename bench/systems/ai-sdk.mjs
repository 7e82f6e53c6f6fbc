import { generateText, jsonSchema, stepCountIs, tool as aiTool } from 'ai5'
import { MockLanguageModelV2 } from 'ai5/test'
import { executeWithHooks, parameters } from './common.mjs'

/** Vercel `ai` 5 (npm alias `ai5`) with its mock model; the hooks wrap execute, and onStepFinish observes. */
export default async function aiSdk(turns) {
  let call = 0
  const model = new MockLanguageModelV2({
    doGenerate: async () => {
      const usage = { inputTokens: 1, outputTokens: 1, totalTokens: 2 }
      if (call < turns) {
        const i = call++
        return { content: [{ type: 'tool-call', toolCallId: `c${i}`, toolName: 'noop', input: JSON.stringify({ i }) }], finishReason: 'tool-calls', usage, warnings: [] }
      }
      return { content: [{ type: 'text', text: 'done' }], finishReason: 'stop', usage, warnings: [] }
    },
  })
  const result = await generateText({
    model,
    prompt: 'go',
    tools: {
      noop: aiTool({
        inputSchema: jsonSchema(parameters),
        execute: executeWithHooks,
      }),
    },
    stopWhen: stepCountIs(turns + 1),
    onStepFinish: () => {},
  })
  if (result.text !== 'done') throw new Error('ai-sdk did not finish')
  return call
}

