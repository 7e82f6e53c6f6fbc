import { Agent, run as runAgent, setTracingDisabled, tool as agentsTool, Usage } from '@openai/agents'
import { after, before, parameters } from './common.mjs'

setTracingDisabled(true)

/** @openai/agents with a fake Model; agent_tool_start / agent_tool_end stand in for the hooks. */
export default async function openaiAgents(turns) {
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

