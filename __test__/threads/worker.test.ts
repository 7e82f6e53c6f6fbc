// Runs under `pool: 'threads'`: the addon loads and works inside a worker thread.
import { isMainThread } from 'node:worker_threads'
import { expect, it } from 'vitest'
import { createAgent, defineTool, scriptedModel } from '../../index.js'

it('runs an agent with a tool inside a worker thread', async () => {
  expect(isMainThread).toBe(false)
  const agent = await createAgent({
    model: scriptedModel([{ toolCalls: [{ id: 'w', name: 'where', input: {} }] }, { text: 'from a worker' }]),
    tools: [defineTool({ name: 'where', execute: () => (isMainThread ? 'main' : 'worker') })],
  })
  const result = await (await agent.send('go')).result()
  expect(result.toolCalls[0].output).toBe('worker')
  expect(result.content).toBe('from a worker')
  await agent.close()
})
