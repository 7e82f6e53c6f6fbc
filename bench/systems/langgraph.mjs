import { AIMessage } from '@langchain/core/messages'
import { tool } from '@langchain/core/tools'
import { BaseChatModel } from '@langchain/core/language_models/chat_models'
import { createReactAgent } from '@langchain/langgraph/prebuilt'
import { z } from 'zod'
import { after, before } from './common.mjs'

/** A chat model that answers each call with the next scripted message (LangChain's own fakes repeat their first one). */
class ScriptedChatModel extends BaseChatModel {
  constructor(responses) {
    super({})
    this.responses = responses
    this.next = 0
  }
  _llmType() {
    return 'scripted'
  }
  bindTools() {
    return this
  }
  async _generate() {
    const message = this.responses[this.next++]
    return { generations: [{ text: typeof message.content === 'string' ? message.content : '', message }] }
  }
}

/** LangGraph's prebuilt `createReactAgent` with LangChain's fake chat model; the callbacks' `handleToolStart` / `handleToolEnd` are the two hooks. */
export default async function langgraph(turns) {
  const responses = [...Array.from({ length: turns }, (_, i) => new AIMessage({ content: '', tool_calls: [{ id: `c${i}`, name: 'noop', args: { i } }] })), new AIMessage('done')]
  const noop = tool(async ({ i }) => `ok ${i}`, { name: 'noop', description: 'noop', schema: z.object({ i: z.number() }) })
  const agent = createReactAgent({ llm: new ScriptedChatModel(responses), tools: [noop] })
  const state = await agent.invoke(
    { messages: [{ role: 'user', content: 'go' }] },
    { recursionLimit: 2 * turns + 5, callbacks: [{ handleToolStart: () => void before(), handleToolEnd: () => void after() }] },
  )
  if (state.messages.at(-1).content !== 'done') throw new Error(`langgraph did not finish: ${JSON.stringify(state.messages.at(-1).content)}`)
  return state.messages.filter((message) => message.getType?.() === 'tool').length
}
