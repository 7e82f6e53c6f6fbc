// Aborting a run: agent.abort(), the caller's signal, close(); the session stays usable.
import { describe, expect, it } from 'vitest'
import { AbortError, createAgent, defineTool, scriptedModel, type ToolContext } from '../index.js'
import { until, untilAborted } from './helpers/server.js'

function hangingTool() {
  const seen: { signal?: AbortSignal; started: boolean } = { started: false }
  const tool = defineTool({
    name: 'hang',
    execute: (_input, context: ToolContext) => {
      seen.signal = context.signal
      seen.started = true
      return untilAborted(context.signal)
    },
  })
  return { tool, seen }
}

describe('abort', () => {
  it('agent.abort(reason) aborts the running tool, rejects with that reason and answers the open calls', async () => {
    const { tool, seen } = hangingTool()
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'h1', name: 'hang', input: {} }, { id: 'h2', name: 'hang', input: {} }] }, { text: 'after abort' }]),
      tools: [tool],
    })
    const response = await agent.send('go')
    await until(() => seen.started)
    const reason = new Error('user pressed stop')
    agent.abort(reason)
    await expect(response.text()).rejects.toBe(reason)
    expect(seen.signal!.aborted).toBe(true)
    expect(seen.signal!.reason).toBe(reason)
    expect(response.isSettled).toBe(true)
    expect(agent.messages.slice(-2)).toEqual([
      { role: 'tool', tool_call_id: 'h1', content: 'Tool execution aborted: user pressed stop' },
      { role: 'tool', tool_call_id: 'h2', content: 'Tool execution aborted: user pressed stop' },
    ])
    // The session stays usable, and the next turn sees a valid conversation.
    expect(await (await agent.send('again')).text()).toBe('after abort')
    await agent.close()
  })

  it('after an abort TaskCompleted runs with reason aborted, and StopFailure does not run', async () => {
    const { tool, seen } = hangingTool()
    const events: string[] = []
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ name: 'hang', input: {} }] }]),
      tools: [tool],
      advanced: {
        hooks: [
          { id: 'done', type: 'onComplete', handler: (event) => void events.push(`complete:${event.success}:${event.reason}:signal aborted ${event.abortSignal?.aborted}`) },
          { id: 'failed', type: 'onError', handler: () => void events.push('stop-failure') },
        ],
      },
    })
    const response = await agent.send('go')
    await until(() => seen.started)
    agent.abort(new Error('stop'))
    await expect(response.text()).rejects.toThrow('stop')
    // Its signal follows only its own deadline, not the caller's aborted one.
    expect(events).toEqual(['complete:false:aborted:signal aborted false'])
    await agent.close()
  })

  it("the caller's signal aborts the run with the caller's reason", async () => {
    const { tool, seen } = hangingTool()
    const agent = await createAgent({ model: scriptedModel([{ toolCalls: [{ name: 'hang', input: {} }] }]), tools: [tool] })
    const controller = new AbortController()
    const response = await agent.send('go', { signal: controller.signal })
    await until(() => seen.started)
    const reason = { why: 'deadline' }
    controller.abort(reason)
    await expect(response.result()).rejects.toBe(reason)
    const events: unknown[] = []
    for await (const event of response.stream()) events.push(event)
    expect(events.at(-1)).toEqual({ type: 'error', message: '[object Object]', code: 'ABORT', error: reason, sessionId: agent.sessionId })
    expect(agent.messages.at(-1)).toMatchObject({ role: 'tool', content: 'Tool execution aborted: [object Object]' })
    await agent.close()
  })

  it('abort() without a reason rejects with AbortError "Operation aborted", also while the model is thinking', async () => {
    let called = false
    const agent = await createAgent({
      model: scriptedModel(() => {
        called = true
        return new Promise(() => {})
      }),
    })
    const response = await agent.send('go')
    await until(() => called)
    agent.abort()
    const error = await response.text().catch((e) => e)
    expect(error).toBeInstanceOf(AbortError)
    expect(error.toJSON()).toEqual({ name: 'AbortError', code: 'ABORT', message: 'Operation aborted' })
    await agent.close()
  })

  it('an already aborted signal rejects send with its reason and starts nothing', async () => {
    let calls = 0
    const agent = await createAgent({ model: scriptedModel(() => (calls++, { text: 'x' })) })
    const reason = new Error('too late')
    await expect(agent.send('go', { signal: AbortSignal.abort(reason) })).rejects.toBe(reason)
    expect(calls).toBe(0)
    expect(await (await agent.send('go')).text()).toBe('x')
    await agent.close()
  })

  it('close() aborts an active run', async () => {
    const { tool, seen } = hangingTool()
    const agent = await createAgent({ model: scriptedModel([{ toolCalls: [{ name: 'hang', input: {} }] }]), tools: [tool] })
    const response = await agent.send('go')
    await until(() => seen.started)
    await agent.close()
    await expect(response.text()).rejects.toMatchObject({ code: 'ABORT', message: 'Session is closed' })
    expect(seen.signal!.aborted).toBe(true)
  })

  it('abort() with no active run does nothing', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'fine' }]) })
    agent.abort(new Error('nothing to abort'))
    expect(await (await agent.send('go')).text()).toBe('fine')
    await agent.close()
  })
})
