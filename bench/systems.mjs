// The same agent workload in each system: a model that asks for one tool call per turn for
// `turns` turns and then answers, one JS tool returning a short string, and two hooks per tool
// call (before and after). Each runner resolves with the number of tool calls it made.
import { Agent, run as runAgent, setTracingDisabled, tool as agentsTool, Usage } from '@openai/agents'
import { generateText, jsonSchema, stepCountIs, tool as aiTool } from 'ai'
import { MockLanguageModelV2 } from 'ai/test'
import { createAgent, defineTool, scriptedModel } from '../index.mjs'

setTracingDisabled(true)

const parameters = { type: 'object', properties: { i: { type: 'number' } }, required: ['i'], additionalProperties: false }
let hookCalls = 0
const before = () => {
  hookCalls++
}
const after = () => {
  hookCalls++
}
export const hookCallCount = () => hookCalls

/** agent-runtime-hooks: the loop in Rust, a PreToolUse and a PostToolUse JS callback. */
export async function ours(turns) {
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

/** @openai/agents with a fake Model; agent_tool_start / agent_tool_end stand in for the hooks. */
export async function openaiAgents(turns) {
  let call = 0
  const model = {
    async getResponse() {
      const usage = new Usage({ requests: 1, inputTokens: 1, outputTokens: 1, totalTokens: 2 })
      if (call < turns) {
        const i = call++
        return { usage, output: [{ type: 'function_call', callId: `c${i}`, name: 'noop', arguments: JSON.stringify({ i }), status: 'completed' }] }
      }
      return { usage, output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'done' }] }] }
    },
    async *getStreamedResponse() {
      throw new Error('not used')
    },
  }
  const agent = new Agent({
    name: 'bench',
    instructions: 'bench',
    model,
    tools: [agentsTool({ name: 'noop', description: 'noop', parameters, strict: false, execute: ({ i }) => `ok ${i}` })],
  })
  agent.on('agent_tool_start', before)
  agent.on('agent_tool_end', after)
  const result = await runAgent(agent, 'go', { maxTurns: turns + 1 })
  if (result.finalOutput !== 'done') throw new Error('openai-agents did not finish')
  return call
}

/** Vercel `ai` 5 with its mock model; the hooks wrap execute, and onStepFinish observes. */
export async function aiSdk(turns) {
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
        execute: async ({ i }) => {
          before()
          const output = `ok ${i}`
          after()
          return output
        },
      }),
    },
    stopWhen: stepCountIs(turns + 1),
    onStepFinish: () => {},
  })
  if (result.text !== 'done') throw new Error('ai-sdk did not finish')
  return call
}

/** The floor: a hand-written loop with two hook calls per tool call. */
export async function jsFloor(turns) {
  const messages = [{ role: 'user', content: 'go' }]
  const tools = { noop: async ({ i }) => `ok ${i}` }
  let calls = 0
  for (let turn = 0; ; turn++) {
    const reply = turn < turns ? { tool_calls: [{ id: `c${turn}`, function: { name: 'noop', arguments: JSON.stringify({ i: turn }) } }] } : { content: 'done' }
    messages.push({ role: 'assistant', ...reply })
    if (!reply.tool_calls) break
    for (const call of reply.tool_calls) {
      const input = JSON.parse(call.function.arguments)
      await before(input)
      const output = await tools[call.function.name](input)
      await after(output)
      messages.push({ role: 'tool', tool_call_id: call.id, content: output })
      calls++
    }
  }
  return calls
}

export const SYSTEMS = { ours, 'openai-agents': openaiAgents, 'ai-sdk': aiSdk, 'js-floor': jsFloor }
