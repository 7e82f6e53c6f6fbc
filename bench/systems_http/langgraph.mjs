import { tool } from '@langchain/core/tools'
import { createReactAgent } from '@langchain/langgraph/prebuilt'
import { ChatOpenAI } from '@langchain/openai'
import { z } from 'zod'
import { after, before } from '../systems/common.mjs'

// One chat model per server and model name, as an app configures it once.
const models = new Map()

/** LangGraph's prebuilt `createReactAgent` on `@langchain/openai`'s `ChatOpenAI` (chat
 * completions, `streaming: true`), streamed with `streamMode: 'messages'`; the callbacks'
 * `handleToolStart` / `handleToolEnd` are the two hooks. */
export default async function langgraph(baseUrl, turns) {
  const key = `${baseUrl} ${turns}`
  if (!models.has(key)) models.set(key, new ChatOpenAI({ model: `bench-${turns}`, apiKey: 'bench', configuration: { baseURL: baseUrl }, streaming: true }))
  let calls = 0
  const noop = tool(async ({ i }) => (calls++, `ok ${i}`), { name: 'noop', description: 'noop', schema: z.object({ i: z.number() }) })
  const agent = createReactAgent({ llm: models.get(key), tools: [noop] })
  const stream = await agent.stream(
    { messages: [{ role: 'user', content: 'go' }] },
    { streamMode: 'messages', recursionLimit: 2 * turns + 5, callbacks: [{ handleToolStart: () => void before(), handleToolEnd: () => void after() }] },
  )
  let text = ''
  for await (const [message] of stream) if (message.getType() === 'ai') text += message.content
  if (text !== 'done') throw new Error(`langgraph did not finish: ${JSON.stringify(text)}`)
  return calls
}
