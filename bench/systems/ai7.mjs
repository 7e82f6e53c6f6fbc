import { jsonSchema, stepCountIs, tool as aiTool, ToolLoopAgent } from 'ai'
import { MockLanguageModelV4 } from 'ai/test'
import { after, before, parameters } from './common.mjs'

const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } }

/** Vercel `ai` 7's `ToolLoopAgent` with its mock model; `onToolExecutionStart` / `onToolExecutionEnd` are the two hooks. */
export default async function ai7(turns) {
  let call = 0
  const model = new MockLanguageModelV4({
    doGenerate: async () => {
      if (call < turns) {
        const i = call++
        return { content: [{ type: 'tool-call', toolCallId: `c${i}`, toolName: 'noop', input: JSON.stringify({ i }) }], finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage, warnings: [] }
      }
      return { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
    },
  })
  const agent = new ToolLoopAgent({
    model,
    tools: { noop: aiTool({ inputSchema: jsonSchema(parameters), execute: async ({ i }) => `ok ${i}` }) },
    stopWhen: stepCountIs(turns + 1),
    onToolExecutionStart: () => before(),
    onToolExecutionEnd: () => after(),
  })
  const result = await agent.generate({ prompt: 'go' })
  if (result.text !== 'done') throw new Error(`ai 7 did not finish: ${JSON.stringify(result.text)}`)
  return call
}
