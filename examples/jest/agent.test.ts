// A jest test of an agent, as the README's vitest one: the model is scripted, so no key or
// server is needed. Run it with `npm test` in a project set up as jest.config.js says.
import { AbortError, createAgent, defineTool, scriptedModel } from 'agent-runtime-hooks'
import { expect, test } from '@jest/globals'

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

test('a PreToolUse hook blocks the call, and the model is told why', async () => {
  const agent = await createAgent({
    model: scriptedModel([{ toolCalls: [{ name: 'list_files', input: { dir: '/etc' } }] }, { text: 'Blocked.' }]),
    tools: [listFiles],
    advanced: {
      hooks: {
        PreToolUse: [async ({ toolInput }) => (String(toolInput.dir).startsWith('/etc') ? { action: 'abort', reason: 'not /etc' } : { action: 'continue' })],
      },
    },
  })
  const result = await (await agent.send('list /etc')).result()
  expect(result.toolCalls[0]).toMatchObject({ status: 'error', output: 'Tool execution aborted: not /etc' })
  await agent.close()
})

test("an abort rejects with the package's AbortError, in jest's realm too", async () => {
  let started!: () => void
  const running = new Promise<void>((resolve) => (started = resolve))
  const wait = defineTool({
    name: 'wait',
    execute: (_input, { signal }) =>
      new Promise<string>((_resolve, reject) => {
        started()
        signal.addEventListener('abort', () => reject(signal.reason))
      }),
  })
  const agent = await createAgent({ model: scriptedModel([{ toolCalls: [{ name: 'wait', input: {} }] }]), tools: [wait] })
  const res = await agent.send('go')
  await running
  agent.abort(new AbortError('user pressed stop'))
  await expect(res.text()).rejects.toBeInstanceOf(AbortError)
  await expect(res.text()).rejects.toThrow('user pressed stop')
  await agent.close()
})
