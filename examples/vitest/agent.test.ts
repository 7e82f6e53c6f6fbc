// The README's vitest test, run by `npm test` in a project of its own.
import { createAgent, defineTool, scriptedModel } from 'agent-runtime-hooks'
import { expect, test } from 'vitest'

const listFiles = defineTool<{ dir: string }>({
  name: 'list_files',
  parameters: { type: 'object', properties: { dir: { type: 'string' } }, required: ['dir'] },
  execute: ({ dir }) => (dir === '.' ? 'a.txt\nb.txt' : ''),
})

test('the agent lists the files', async () => {
  const agent = await createAgent({
    model: scriptedModel([
      { toolCalls: [{ name: 'list_files', input: { dir: '.' } }] },
      { text: 'There are two files.' },
    ]),
    tools: [listFiles],
  })
  const res = await agent.send('what is here?')
  expect(await res.text()).toBe('There are two files.')
  expect((await res.result()).toolCalls[0]?.output).toBe('a.txt\nb.txt')
  await agent.close()
})

test('the function form of scriptedModel sees what the model was sent', async () => {
  const seen: number[] = []
  const agent = await createAgent({
    model: scriptedModel(({ turn, messages, tools }) => {
      seen.push(tools.length)
      return turn === 1 ? { toolCalls: [{ name: 'list_files', input: { dir: '.' } }] } : { text: `saw ${messages.length} messages` }
    }),
    tools: [listFiles],
  })
  expect(await (await agent.send('what is here?')).text()).toBe('saw 3 messages')
  expect(seen).toEqual([1, 1])
  await agent.close()
})
