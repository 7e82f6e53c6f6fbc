import { Agent, OpenAIChatCompletionsModel, run as runAgent, setTracingDisabled, tool as agentsTool } from '@openai/agents'
import OpenAI from 'openai'
import { after, before, parameters } from '../systems/common.mjs'

setTracingDisabled(true)
// One client per server, as an app configures it once.
const clients = new Map()

/** @openai/agents' chat-completions model over the `openai` client; agent_tool_start / agent_tool_end stand in for the hooks. */
export default async function openaiAgents(baseUrl, turns) {
  if (!clients.has(baseUrl)) clients.set(baseUrl, new OpenAI({ baseURL: baseUrl, apiKey: 'bench' }))
  const agent = new Agent({
    name: 'bench',
    instructions: 'bench',
    model: new OpenAIChatCompletionsModel(clients.get(baseUrl), `bench-${turns}`),
    tools: [agentsTool({ name: 'noop', description: 'noop', parameters, strict: false, execute: ({ i }) => `ok ${i}` })],
  })
  let calls = 0
  agent.on('agent_tool_start', before)
  agent.on('agent_tool_end', () => (after(), calls++))
  const stream = await runAgent(agent, 'go', { maxTurns: turns + 1, stream: true })
  for await (const _ of stream.toTextStream()) {
  }
  await stream.completed
  if (stream.finalOutput !== 'done') throw new Error(`openai-agents did not finish: ${JSON.stringify(stream.finalOutput)}`)
  return calls
}
