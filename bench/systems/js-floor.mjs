import { after, before } from './common.mjs'

/** The floor: a hand-written loop with two hook calls per tool call. */
export default async function jsFloor(turns) {
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

