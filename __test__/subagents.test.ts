// Sub-agents (SPEC §8.4), written as the careless integrator and the policy owner would test
// them: a parent's hooks, hook objects, webhooks, environment hooks, permission and confirmation
// apply to every tool call of every child at any depth; the three sub-agent events; the child's
// own TaskCompleted; child events in the parent's stream with `agentPath`; abort reaching the
// child; `maxSubagentDepth`; bad options named.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  ConfigError,
  createAgent,
  defineTool,
  scriptedModel,
  type AgentHook,
  type AgentOptions,
  type HookEventPayload,
  type HookInput,
  type JsonObject,
  type ScriptRequest,
  type ScriptedTurn,
  type StreamEvent,
} from '../index.js'
import { runScript } from './helpers/child.js'
import { sleep, until, untilAborted } from './helpers/server.js'

const ran: string[] = []
const shell = defineTool<{ command: string }>({
  name: 'shell',
  description: 'Runs a command',
  parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  kind: 'execute',
  execute: ({ command }) => {
    ran.push(command)
    return `ran ${command}`
  },
})
const search = defineTool<{ query: string }>({
  name: 'search',
  description: 'Searches',
  parameters: { type: 'object', properties: { query: { type: 'string' } }, required: ['query'] },
  kind: 'readonly',
  execute: ({ query }) => `found ${query}`,
})

type Script = (request: ScriptRequest) => ScriptedTurn
/** The agent at `path` is told what to do by its own script; the model tells them apart by the system prompt. */
function tree(scripts: Record<string, Script>) {
  const requests: Array<{ who: string; request: ScriptRequest }> = []
  const model = scriptedModel((request) => {
    const system = request.messages[0]?.role === 'system' ? String(request.messages[0].content) : ''
    const who = system.startsWith('You are ') ? system.slice('You are '.length) : 'root'
    requests.push({ who, request: structuredClone(request) })
    const script = scripts[who]
    if (!script) throw new Error(`no script for ${who}`)
    return script(request)
  })
  return { model, requests }
}

/** Calls `call` on its first turn, then answers with what the last tool said. */
function once(call: { name: string; input: JsonObject }, id: string): Script {
  return (request) => {
    const results = request.messages.filter((message) => message.role === 'tool')
    if (results.length === 0) return { toolCalls: [{ id, ...call }] }
    return { text: `after ${id}: ${String(results[results.length - 1]!.content)}` }
  }
}

const agents = {
  worker: { description: 'Does the work', systemPrompt: 'You are worker' },
  manager: { description: 'Delegates', systemPrompt: 'You are manager' },
}

function lifecycle() {
  const fired: Array<{ type: string; payload: Record<string, unknown> }> = []
  const keep = (type: string) => (event: HookEventPayload) => {
    const { abortSignal: _signal, mock: _mock, ...rest } = event as any
    fired.push({ type, payload: structuredClone(rest) })
  }
  const hooks: AgentHook[] = [
    { id: 'start', type: 'beforeCallAgent', handler: keep('SubagentStart') },
    { id: 'started', type: 'afterCallAgent', handler: keep('SubagentStarted') },
    { id: 'failed', type: 'onCallAgentError', handler: keep('SubagentFailure') },
    { id: 'done', type: 'onComplete', handler: keep('TaskCompleted') },
  ]
  return { fired, hooks }
}

async function run(options: AgentOptions, prompt = 'go') {
  const agent = await createAgent(options)
  const response = await agent.send(prompt)
  const events: StreamEvent[] = []
  for await (const event of response.stream()) events.push(event)
  await agent.close()
  return { agent, events }
}
const resultOf = (events: StreamEvent[]) => events.find((event) => event.type === 'result') as Extract<StreamEvent, { type: 'result' }>

describe('a parent policy governs its sub-agents', () => {
  it('a PreToolUse deny rule on the parent denies the child’s call, at depth 1', async () => {
    ran.length = 0
    const seen: HookInput[] = []
    const { model } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'wipe the disk' } }, 'task-1'),
      worker: once({ name: 'shell', input: { command: 'rm -rf /' } }, 'w-1'),
    })
    const { events } = await run({
      model,
      tools: [shell],
      advanced: {
        agents,
        hooks: {
          PreToolUse: [
            (input) => {
              seen.push(input)
              return input.toolName === 'shell' ? { action: 'abort', reason: 'no shell, anywhere' } : { action: 'continue' }
            },
          ],
        },
      },
    })
    expect(ran).toEqual([])
    const child = seen.find((input) => input.toolName === 'shell') as any
    expect(child).toMatchObject({ agentPath: ['worker'], parentToolCallId: 'task-1', toolCallId: 'w-1' })
    const task = seen.find((input) => input.toolName === 'Task') as any
    expect(task.agentPath).toEqual([])
    expect(task.parentToolCallId).toBeUndefined()
    // The child saw the denial and said so; its answer is the Task call's result.
    expect(resultOf(events).result.content).toBe('after task-1: after w-1: Tool execution aborted: no shell, anywhere')
  })

  it('at depth 2: the grandchild’s call is denied by the root’s permission function, and the path names both', async () => {
    ran.length = 0
    const asked: Array<{ toolName: string }> = []
    const seen: any[] = []
    const { model } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'manager', prompt: 'get it done' } }, 'task-1'),
      manager: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'run it' } }, 'task-2'),
      worker: once({ name: 'shell', input: { command: 'deploy' } }, 'w-1'),
    })
    const { events } = await run({
      model,
      tools: [shell],
      advanced: {
        agents,
        permission: (request) => {
          asked.push({ toolName: request.toolName })
          return request.toolName === 'shell' ? { behavior: 'deny', message: 'shell is not allowed' } : { behavior: 'allow' }
        },
        hooks: { PostToolUse: [(input) => (seen.push(input), { action: 'continue' })] },
      },
    })
    expect(ran).toEqual([])
    expect(asked.map((request) => request.toolName)).toEqual(['Task', 'Task', 'shell'])
    const failed = events.filter((event) => event.type === 'tool_result' && event.name === 'shell')
    expect(failed).toEqual([expect.objectContaining({ isError: true, output: 'Tool execution aborted: shell is not allowed', agentPath: ['manager', 'worker'] })])
    expect(resultOf(events).result.content).toBe('after task-1: after task-2: after w-1: Tool execution aborted: shell is not allowed')
    // Post hooks saw the Task calls of root and manager with their paths.
    expect(seen.filter((input) => input.toolName === 'Task').map((input) => [input.agentPath, input.toolCallId])).toEqual([
      [['manager'], 'task-2'],
      [[], 'task-1'],
    ])
  })

  it('an "ask" inside a child that nobody answers pauses the whole tree (§8.7), never an allow', async () => {
    ran.length = 0
    const { model } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'do it' } }, 'task-1'),
      worker: once({ name: 'shell', input: { command: 'ls' } }, 'w-1'),
    })
    const { events } = await run({ model, tools: [shell], advanced: { agents, permission: () => ({ behavior: 'ask' }) } })
    expect(ran).toEqual([])
    // The Task call itself was asked about too: at the root, an unanswered ask pauses.
    expect(resultOf(events).result.pendingApprovals?.map((approval) => approval.toolName)).toEqual(['Task'])
    const { events: confirmed } = await run({
      model: tree({
        root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'do it' } }, 'task-1'),
        worker: once({ name: 'shell', input: { command: 'ls' } }, 'w-1'),
      }).model,
      tools: [shell],
      advanced: { agents, permission: (request) => (request.toolName === 'Task' ? { behavior: 'allow' } : { behavior: 'ask' }) },
    })
    expect(ran).toEqual([])
    const paused = resultOf(confirmed).result
    expect(paused.stopReason).toBe('interrupted')
    expect(paused.pendingApprovals?.map((approval) => [approval.toolCallId, approval.agentPath, approval.parentToolCallId])).toEqual([['w-1', ['worker'], 'task-1']])
  })

  it('a permission preset lets the model delegate (Task is read-only) and still governs the child: plan denies its shell', async () => {
    ran.length = 0
    const { model } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'do it' } }, 'task-1'),
      worker: once({ name: 'shell', input: { command: 'ls' } }, 'w-1'),
    })
    const { events } = await run({ model, tools: [shell], advanced: { agents, permission: 'plan' } })
    expect(ran).toEqual([])
    const result = resultOf(events).result
    expect(result.pendingApprovals ?? []).toEqual([])
    expect(result.toolCalls.map((call) => [call.name, call.isError])).toEqual([['Task', false]])
    expect(events.find((event) => event.type === 'tool_result' && event.name === 'shell')).toMatchObject({ isError: true, agentPath: ['worker'] })
  })

  it('the confirmation handler answers a child’s ask', async () => {
    ran.length = 0
    const requests: string[] = []
    const { model } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'do it' } }, 'task-1'),
      worker: once({ name: 'shell', input: { command: 'ls' } }, 'w-1'),
    })
    const { events } = await run({
      model,
      tools: [shell],
      advanced: {
        agents,
        permission: (request) => (request.toolName === 'shell' ? { behavior: 'ask' } : { behavior: 'allow' }),
        confirmationHandler: { requestConfirmation: (request) => (requests.push(request.toolName), { approved: true }) },
      },
    })
    expect(requests).toEqual(['shell'])
    expect(ran).toEqual(['ls'])
    expect(resultOf(events).result.content).toBe('after task-1: after w-1: ran ls')
  })

  it('a webhook control and an environment hook on the parent see and deny the child’s call', async () => {
    ran.length = 0
    const bodies: any[] = []
    const server: Server = createServer(async (req, res) => {
      const chunks: Buffer[] = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
      bodies.push(body)
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(body.toolName === 'shell' ? { decision: 'deny', reason: 'policy server says no' } : { decision: 'allow' }))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/policy`
    try {
      const { model } = tree({
        root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'do it' } }, 'task-1'),
        worker: once({ name: 'shell', input: { command: 'ls' } }, 'w-1'),
      })
      const { events } = await run({
        model,
        tools: [shell],
        advanced: { agents, hooks: [{ id: 'policy', type: 'beforeToolCall', webhook: { url, responseHandling: 'toolCall' } }] as any },
      })
      expect(ran).toEqual([])
      const shellBody = bodies.find((body) => body.toolName === 'shell')
      expect(shellBody).toMatchObject({ agentPath: ['worker'], parentToolCallId: 'task-1' })
      expect(events.find((event) => event.type === 'tool_result' && event.name === 'shell')).toMatchObject({ isError: true, agentPath: ['worker'] })
      // The same policy as an environment hook (AGENT_HOOK_WEBHOOK_*), read when the parent's run started.
      bodies.length = 0
      Object.assign(process.env, { AGENT_HOOK_WEBHOOK_URL: url, AGENT_HOOK_WEBHOOK_TOKEN: 'env-token', AGENT_HOOK_WEBHOOK_EVENTS: 'beforeToolCall', AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING: 'toolCall' })
      try {
        const again = tree({
          root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'do it' } }, 'task-1'),
          worker: once({ name: 'shell', input: { command: 'ls' } }, 'w-1'),
        })
        const { events: envEvents } = await run({ model: again.model, tools: [shell], advanced: { agents } })
        expect(ran).toEqual([])
        expect(bodies.map((body) => [body.toolName, body.agentPath])).toEqual([
          ['Task', []],
          ['shell', ['worker']],
        ])
        expect(resultOf(envEvents).result.content).toBe('after task-1: after w-1: policy server says no')
      } finally {
        for (const name of ['AGENT_HOOK_WEBHOOK_URL', 'AGENT_HOOK_WEBHOOK_TOKEN', 'AGENT_HOOK_WEBHOOK_EVENTS', 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING']) delete process.env[name]
      }
    } finally {
      server.close()
    }
  })
})

describe('sub-agent events, stream and tools', () => {
  it('fires SubagentStart, SubagentStarted, the child’s TaskCompleted, and streams its tool events with agentPath', async () => {
    const { fired, hooks } = lifecycle()
    const { model, requests } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'find cats', description: 'cats' } }, 'task-1'),
      worker: once({ name: 'search', input: { query: 'cats' } }, 'w-1'),
    })
    const { agent, events } = await run({ model, tools: [shell, search], advanced: { agents: { worker: { ...agents.worker, allowedTools: ['search'] } }, hooks } })
    expect(fired.map((event) => event.type)).toEqual(['SubagentStart', 'SubagentStarted', 'TaskCompleted', 'TaskCompleted'])
    const [start, started, childDone, rootDone] = fired.map((event) => event.payload)
    expect(start).toMatchObject({ event: 'SubagentStart', sessionId: agent.sessionId, agentId: 'worker', instruction: 'find cats', toolCallId: 'task-1', agentPath: [] })
    expect(started).toMatchObject({ event: 'SubagentStarted', agentId: 'worker', success: true, operationId: start!.operationId })
    expect(started!.subOperationId).not.toBe(start!.operationId)
    expect(childDone).toMatchObject({ taskId: started!.subOperationId, taskDescription: 'find cats', resultSummary: 'after w-1: found cats', success: true })
    expect(rootDone).toMatchObject({ taskId: start!.operationId, success: true })
    // The child was offered only its allowed tools, under its own system prompt.
    const workerRequest = requests.find((entry) => entry.who === 'worker')!.request
    expect(workerRequest.tools.map((tool) => tool.name)).toEqual(['search'])
    expect(workerRequest.messages.slice(0, 2)).toEqual([
      { role: 'system', content: 'You are worker' },
      { role: 'user', content: 'find cats' },
    ])
    // The root's stream: its own events, and the child's tool events with their path.
    const tools = events.filter((event) => event.type.startsWith('tool_')).map((event: any) => [event.type, event.name, event.agentPath])
    expect(tools).toEqual([
      ['tool_use', 'Task', undefined],
      ['tool_use', 'search', ['worker']],
      ['tool_result', 'search', ['worker']],
      ['tool_result', 'Task', undefined],
    ])
    expect(events.filter((event) => event.type === 'content').map((event: any) => event.delta)).toEqual(['after task-1: after w-1: found cats'])
  })

  it('the sub-agent’s tokens count in the parent’s usage', async () => {
    const usage = { inputTokens: 10, outputTokens: 1 }
    const model = scriptedModel((request) => {
      const inChild = request.messages[0]?.role === 'system'
      const results = request.messages.filter((message) => message.role === 'tool').length
      if (inChild) return results === 0 ? { toolCalls: [{ id: 'w-1', name: 'search', input: { query: 'q' } }], usage } : { text: 'child done', usage }
      return results === 0 ? { toolCalls: [{ id: 'task-1', name: 'Task', input: { subagent_type: 'worker', prompt: 'x' } }], usage } : { text: 'root done', usage }
    })
    const { events } = await run({ model, tools: [search], advanced: { agents } })
    // Two model calls in the root, two in the child.
    expect(resultOf(events).result.usage).toMatchObject({ inputTokens: 40, outputTokens: 4, totalTokens: 44 })
  })

  it('a tool the child was not allowed is not found, and the Task tool lists the sub-agents', async () => {
    ran.length = 0
    const { model, requests } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'x' } }, 'task-1'),
      worker: once({ name: 'shell', input: { command: 'ls' } }, 'w-1'),
    })
    const { events } = await run({ model, tools: [shell, search], advanced: { agents: { worker: { ...agents.worker, allowedTools: ['search'] } } } })
    expect(ran).toEqual([])
    expect(resultOf(events).result.content).toBe('after task-1: after w-1: Tool execution failed: Tool "shell" not found')
    const task = requests[0]!.request.tools.find((tool) => tool.name === 'Task')!
    expect(task.description).toBe('Runs a sub-agent on a task and returns its final answer. Sub-agents:\n- worker: Does the work')
    expect(task.parameters).toMatchObject({ required: ['subagent_type', 'prompt'], properties: { subagent_type: { enum: ['worker'] } } })
  })

  it('maxSubagentDepth: a child at the limit is not offered Task, and one that calls it anyway is refused', async () => {
    const { model, requests } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'manager', prompt: 'go deeper' } }, 'task-1'),
      manager: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'deeper still' } }, 'task-2'),
    })
    const { events } = await run({ model, advanced: { agents, maxSubagentDepth: 1 } })
    const manager = requests.find((entry) => entry.who === 'manager')!.request
    expect(manager.tools.map((tool) => tool.name)).toEqual([])
    expect(resultOf(events).result.content).toBe('after task-1: after task-2: Tool execution failed: Tool "Task" not found')
  })

  it('a Task naming no sub-agent fails with the names it knows; a failing child fires SubagentFailure', async () => {
    const { fired, hooks } = lifecycle()
    const { model } = tree({
      root: (request) => {
        const results = request.messages.filter((message) => message.role === 'tool')
        if (results.length === 0) return { toolCalls: [{ id: 't-1', name: 'Task', input: { subagent_type: 'nobody', prompt: 'x' } }] }
        if (results.length === 1) return { toolCalls: [{ id: 't-2', name: 'Task', input: { subagent_type: 'worker', prompt: 'fail' } }] }
        return { text: results.map((message) => String(message.content)).join(' | ') }
      },
      worker: () => {
        throw new Error('the worker model is down')
      },
    })
    const { events } = await run({ model, advanced: { agents, hooks } })
    expect(resultOf(events).result.content).toBe(
      'Tool execution failed: Task: no sub-agent named "nobody" (known: worker, manager) | Tool execution failed: the worker model is down',
    )
    const failure = fired.find((event) => event.type === 'SubagentFailure')!.payload
    expect(failure).toMatchObject({ agentId: 'worker', error: 'the worker model is down', agentPath: [] })
  })

  it('a Blade-docs agent definition ({ name, description, systemPrompt, allowedTools, model }) runs as written', async () => {
    const { model } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'researcher', prompt: 'find cats' } }, 'task-1'),
      researcher: once({ name: 'search', input: { query: 'cats' } }, 'r-1'),
    })
    const childModel = model
    const { events } = await run({
      model,
      tools: [search],
      advanced: { agents: { researcher: { name: 'researcher', description: 'Finds things', systemPrompt: 'You are researcher', allowedTools: ['search'], model: childModel } } },
    })
    expect(resultOf(events).result.content).toBe('after task-1: after r-1: found cats')
  })

  it('a child’s maxTurns and model default to the parent’s and can be set', async () => {
    const childModel = scriptedModel([{ text: 'from the child’s own model' }])
    const { model } = tree({ root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'x' } }, 'task-1') })
    const { events } = await run({ model, advanced: { agents: { worker: { description: 'd', model: childModel, maxTurns: 1 } } } })
    expect(resultOf(events).result.content).toBe('after task-1: from the child’s own model')
  })
})

describe('a tree that cannot crash the process, bounded by one budget', () => {
  // In a child process: a stack overflow kills the process with SIGSEGV, which no test could catch.
  it('every agent calls Task three times at once, maxSubagentDepth 20, aborted after 2 s: the process ends with the abort, not a signal', async () => {
    const result = await runScript(
      `
      const { createAgent, scriptedModel } = require(process.env.ENTRY)
      ;(async () => {
        let started = 0
        // Every agent that may delegate fans out three ways at once, on every turn, whatever it
        // is told; once refused it keeps trying, a turn every 50 ms.
        const fanOut = { toolCalls: [1, 2, 3].map(() => ({ name: 'Task', input: { subagent_type: 'fan', prompt: 'fan out' } })) }
        const model = scriptedModel(({ tools, messages }) => {
          if (!tools.some((tool) => tool.name === 'Task')) return { text: 'leaf' }
          const refused = messages.some((message) => message.role === 'tool' && String(message.content).includes('maxSubagentCalls'))
          return refused ? new Promise((resolve) => setTimeout(() => resolve(fanOut), 50)) : fanOut
        })
        const agent = await createAgent({
          model,
          advanced: {
            agents: { fan: { description: 'Fans out' } },
            maxSubagentDepth: 20,
            hooks: { SubagentStart: [() => { started += 1 }] },
          },
        })
        const response = await agent.send('go')
        setTimeout(() => agent.abort('fan-out stopped'), 2000)
        const outcome = await response.result().then(() => 'resolved', (error) => String(error))
        await agent.close()
        console.log(JSON.stringify({ outcome, started }))
      })()
    `,
      { timeoutMs: 30_000 },
    )
    expect(result.stderr).toBe('')
    expect({ signal: result.signal, code: result.code, timedOut: result.timedOut }).toEqual({ signal: null, code: 0, timedOut: false })
    // The default budget (advanced.maxSubagentCalls, 100) started that many sub-agents, no more.
    expect(JSON.parse(result.stdout)).toEqual({ outcome: 'fan-out stopped', started: 100 })
  }, 40_000)

  it('a chain of sub-agents 20 deep runs to its end and answers', async () => {
    const result = await runScript(
      `
      const { createAgent, scriptedModel } = require(process.env.ENTRY)
      ;(async () => {
        // Each agent delegates once while it may, then answers with what its child said.
        const model = scriptedModel(({ tools, messages }) => {
          const answered = messages.filter((message) => message.role === 'tool').map((message) => message.content)
          if (answered.length > 0) return { text: 'up(' + answered[0] + ')' }
          if (tools.some((tool) => tool.name === 'Task')) return { toolCalls: [{ name: 'Task', input: { subagent_type: 'link', prompt: 'go on' } }] }
          return { text: 'bottom' }
        })
        const agent = await createAgent({ model, advanced: { agents: { link: { description: 'Delegates once' } }, maxSubagentDepth: 20 } })
        const result = await agent.send('go').then((response) => response.result())
        await agent.close()
        console.log(JSON.stringify(result.content))
      })()
    `,
      { timeoutMs: 30_000 },
    )
    expect({ signal: result.signal, code: result.code, stderr: result.stderr }).toEqual({ signal: null, code: 0, stderr: '' })
    // The sub-agent at depth 20 (not offered Task) answered; the root and 19 sub-agents each
    // wrapped the answer of the one below.
    expect(JSON.parse(result.stdout)).toBe('up('.repeat(20) + 'bottom' + ')'.repeat(20))
  }, 40_000)

  it('advanced.maxSubagentCalls bounds the whole tree: the calls past it fail with a text the model sees, and the run succeeds', async () => {
    const { fired, hooks } = lifecycle()
    // The root asks two managers, each manager three workers: eight Task calls, five allowed.
    const { model } = tree({
      root: (request) =>
        request.messages.some((message) => message.role === 'tool')
          ? { text: 'root done' }
          : { toolCalls: [1, 2].map((n) => ({ id: `task-${n}`, name: 'Task', input: { subagent_type: 'manager', prompt: 'manage' } })) },
      manager: (request) =>
        request.messages.some((message) => message.role === 'tool')
          ? { text: 'managed' }
          : { toolCalls: [1, 2, 3].map((n) => ({ id: `m-${n}`, name: 'Task', input: { subagent_type: 'worker', prompt: 'work' } })) },
      worker: () => ({ text: 'worked' }),
    })
    const { events } = await run({ model, advanced: { agents, maxSubagentCalls: 5, hooks } })
    expect(resultOf(events).result.content).toBe('root done')
    expect(fired.filter((event) => event.type === 'SubagentStart')).toHaveLength(5)
    const refused = events.filter((event: any) => event.type === 'tool_result' && event.name === 'Task' && event.isError)
    expect(refused.map((event: any) => [event.output, event.agentPath])).toEqual(
      Array(3).fill(['Tool execution failed: Task: the limit of 5 sub-agent calls for this run (advanced.maxSubagentCalls) is reached; go on without delegating', ['manager']]),
    )
    const worked = events.filter((event: any) => event.type === 'tool_result' && event.name === 'Task' && !event.isError)
    expect(worked).toHaveLength(5)
  })
})

describe('abort and bad options', () => {
  it('aborting the parent aborts the child’s running tool', async () => {
    let started = false
    let aborted = false
    const slow = defineTool({
      name: 'slow',
      description: 'Waits',
      parameters: { type: 'object', properties: {} },
      execute: async (_input: JsonObject, context: { signal: AbortSignal }) => {
        started = true
        await untilAborted(context.signal).catch(() => {
          aborted = true
        })
        return 'late'
      },
    })
    const { model } = tree({
      root: once({ name: 'Task', input: { subagent_type: 'worker', prompt: 'wait' } }, 'task-1'),
      worker: once({ name: 'slow', input: {} }, 'w-1'),
    })
    const agent = await createAgent({ model, tools: [slow], advanced: { agents } })
    const response = await agent.send('go')
    await until(() => started)
    agent.abort('stop everything')
    await expect(response.result()).rejects.toBe('stop everything')
    await until(() => aborted)
    await sleep(10)
    await agent.close()
  })

  it('bad agents options are ConfigErrors naming the field', async () => {
    const model = scriptedModel([{ text: 'x' }])
    const cases: Array<[unknown, string]> = [
      [{ agents: { a: {} } }, 'advanced.agents.a.description must be a non-empty string'],
      [{ agents: { a: { description: 'd', allowedTools: 'all' } } }, 'advanced.agents.a.allowedTools must be an array of tool names'],
      [{ agents: { a: { description: 'd', model: 'gpt-4o' } } }, 'advanced.agents.a.model is a model id, which needs the agent’s own model'.replace('’', "'")],
      [{ agents: { a: { description: 'd', maxTurns: 0 } } }, 'advanced.agents.a.maxTurns'],
      [{ agents: { a: { description: 'd' } }, maxSubagentDepth: 0 }, 'advanced.maxSubagentDepth'],
      [{ agents: { a: { description: 'd' } }, maxSubagentDepth: 100 }, 'advanced.maxSubagentDepth must be a positive integer no greater than 32 (got 100)'],
      [{ agents: { a: { description: 'd' } }, maxSubagentCalls: 0 }, 'advanced.maxSubagentCalls must be a positive integer no greater than 10000 (got 0)'],
      [{ agents: { a: { description: 'd' } }, maxSubagentCalls: 10001 }, 'advanced.maxSubagentCalls must be a positive integer no greater than 10000 (got 10001)'],
      [{ agents: { a: { description: 'd' } }, maxSubagentCalls: '5' }, 'advanced.maxSubagentCalls must be a positive integer no greater than 10000 (got "5")'],
    ]
    for (const [advanced, message] of cases) {
      const error = await createAgent({ model, advanced: advanced as any }).then(
        () => null,
        (failure: unknown) => failure,
      )
      expect(error, message).toBeInstanceOf(ConfigError)
      expect((error as Error).message).toContain(message)
    }
    const named = defineTool({ name: 'Task', description: 'mine', execute: () => 'x' })
    await expect(createAgent({ model, tools: [named], advanced: { agents } })).rejects.toThrow(
      'a tool is named "Task", the name of the tool that runs advanced.agents: rename it',
    )
  })
})
