// Adversarial tests of the safety invariants (SPEC §11, with §5, §6 and §7): what an attacker or
// a careless integrator does through the public API. Each test counts side effects (`ran`, the
// model calls) so that "the tool did not run" and "the model was not called again" are proven,
// not inferred from a text.
import type { ServerResponse } from 'node:http'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import {
  ConfigError,
  createAgent,
  defineTool,
  prompt,
  scriptedModel,
  SdkError,
  type Agent,
  type AgentHook,
  type HookObject,
  type AgentOptions,
  type AgentPermission,
  type HookCallback,
  type ScriptRequest,
  type ScriptedTurn,
  type ToolContext,
} from '../index.js'
import { startServer, untilAborted, type ModelServer, type Recorded } from './helpers/server.js'

// ---------------------------------------------------------------------------------------------
// Fixtures

/** Tools that count every start, so a test can prove which ones ran. */
function counted() {
  const ran: string[] = []
  const tool = (name: string, body: (input: any, context: ToolContext) => any = () => `${name} done`) =>
    defineTool({
      name,
      execute: (input: any, context: ToolContext) => {
        ran.push(name)
        return body(input, context)
      },
    })
  return { ran, tool }
}

/** A scripted model that counts its calls and records what it was asked. */
function countedModel(script: (request: ScriptRequest, call: number) => ScriptedTurn) {
  const requests: ScriptRequest[] = []
  const model = scriptedModel((request) => {
    requests.push(structuredClone(request))
    return script(request, requests.length)
  })
  return { model, requests }
}

/** First turn: the given tool calls; any later call would be a model call after the abort. */
const toolsThenText = (...toolCalls: { id: string; name: string; input?: any }[]) =>
  countedModel((_request, call) => (call === 1 ? { toolCalls } : { text: 'MODEL CALLED AGAIN' }))

/** Replaces each lone surrogate with U+FFFD, as a lossy but valid crossing would. */
const wellFormed = (text: string) => text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd')
/** `actual` is `expected` as-is, or with its lone surrogates (only those) turned into U+FFFD. */
function expectSurvived(actual: unknown, expected: string) {
  expect(typeof actual).toBe('string')
  expect([expected, wellFormed(expected)]).toContain(actual)
}

const lastOf = <T>(list: T[]) => list[list.length - 1]

// ---------------------------------------------------------------------------------------------
// Finding 1: an abort from inside a synchronous callback, a tool or the permission function is
// seen before the next tool starts and before the next model call, and the response rejects
// with the abort's reason (the very value given to agent.abort / controller.abort).

describe('§11 an abort from inside a callback is seen before the next tool and the next model call', () => {
  for (const flavour of ['sync', 'async'] as const) {
    it(`a ${flavour} permission function that calls agent.abort() and returns 'allow': no tool runs, the response rejects with the reason`, async () => {
      const { ran, tool } = counted()
      const { model, requests } = toolsThenText({ id: 'a', name: 'Bash', input: { command: 'rm -rf /' } }, { id: 'b', name: 'Bash', input: { command: 'ls' } })
      const reason = { why: `aborted from a ${flavour} permission function` }
      let permissionCalls = 0
      let agent!: Agent
      const abortAndAllow = () => {
        permissionCalls++
        agent.abort(reason)
        return 'allow' as const
      }
      agent = await createAgent({
        model,
        tools: [tool('Bash')],
        advanced: { permission: flavour === 'sync' ? abortAndAllow : async () => abortAndAllow() },
      })
      const response = await agent.send('go')
      await expect(response.result()).rejects.toBe(reason)
      expect(ran).toEqual([])
      // Asked at least for the first call (whether the second is asked too is not the point).
      expect(permissionCalls).toBeGreaterThanOrEqual(1)
      expect(requests.length).toBe(1)
      await agent.close()
    })
  }

  it('a synchronous tool used as a kill switch (agent.abort) stops its sibling of the same turn and the next model call', async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'k', name: 'kill', input: {} }, { id: 's', name: 'sibling', input: {} })
    const reason = new Error('kill switch pulled')
    let agent!: Agent
    agent = await createAgent({
      model,
      tools: [
        tool('kill', () => {
          agent.abort(reason)
          return 'killed'
        }),
        tool('sibling'),
      ],
    })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual(['kill'])
    expect(requests.length).toBe(1)
    await agent.close()
  })

  it("a synchronous tool that aborts the caller's AbortController stops its sibling and the next model call", async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'k', name: 'kill', input: {} }, { id: 's', name: 'sibling', input: {} })
    const controller = new AbortController()
    const reason = { why: 'caller deadline, hit inside a tool' }
    const agent = await createAgent({
      model,
      tools: [
        tool('kill', () => {
          controller.abort(reason)
          return 'killed'
        }),
        tool('sibling'),
      ],
    })
    const response = await agent.send('go', { signal: controller.signal })
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual(['kill'])
    expect(requests.length).toBe(1)
    await agent.close()
  })

  it('a synchronous tool that calls close() stops its sibling and the next model call; the response rejects with ABORT', async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'k', name: 'kill', input: {} }, { id: 's', name: 'sibling', input: {} })
    let agent!: Agent
    let closing: Promise<void> | undefined
    agent = await createAgent({
      model,
      tools: [
        tool('kill', () => {
          closing = agent.close()
          return 'closed'
        }),
        tool('sibling'),
      ],
    })
    const response = await agent.send('go')
    const error = await response.result().then(
      (result) => ({ resolved: result }),
      (e) => e,
    )
    expect(error).toMatchObject({ code: 'ABORT', message: 'Session is closed' })
    expect(ran).toEqual(['kill'])
    expect(requests.length).toBe(1)
    await closing?.catch(() => {})
  })

  it('scriptedModel: a synchronous tool (the only call of its turn) that calls agent.abort(): the model is not called again', async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'k', name: 'kill', input: {} })
    const reason = new Error('stop after this tool')
    let agent!: Agent
    agent = await createAgent({ model, tools: [tool('kill', () => (agent.abort(reason), 'killed'))] })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual(['kill'])
    expect(requests.length).toBe(1)
    await agent.close()
  })

  it('scriptedModel: a synchronous PreToolUse callback that calls agent.abort() and continues: no tool runs, no model call follows', async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'a', name: 'Bash', input: {} }, { id: 'b', name: 'Bash', input: {} })
    const reason = new Error('abort from PreToolUse')
    let agent!: Agent
    agent = await createAgent({
      model,
      tools: [tool('Bash')],
      advanced: { hooks: { PreToolUse: [() => (agent.abort(reason), { action: 'continue' })] } },
    })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual([])
    expect(requests.length).toBe(1)
    await agent.close()
  })

  it('scriptedModel: a PreToolUse hook object handler that calls agent.abort() and returns nothing: no tool runs', async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'a', name: 'Bash', input: {} }, { id: 'b', name: 'Bash', input: {} })
    const reason = new Error('abort from a handler')
    let agent!: Agent
    agent = await createAgent({
      model,
      tools: [tool('Bash')],
      advanced: { hooks: [{ id: 'kill', type: 'beforeToolCall', handler: () => void agent.abort(reason) }] },
    })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual([])
    expect(requests.length).toBe(1)
    await agent.close()
  })

  it('scriptedModel: a PermissionRequest callback that calls agent.abort() and continues: no tool runs', async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'a', name: 'Bash', input: {} }, { id: 'b', name: 'Bash', input: {} })
    const reason = new Error('abort from PermissionRequest')
    let agent!: Agent
    agent = await createAgent({
      model,
      tools: [tool('Bash')],
      advanced: { hooks: { PermissionRequest: [() => (agent.abort(reason), { action: 'continue' })] } },
    })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual([])
    expect(requests.length).toBe(1)
    await agent.close()
  })

  it('scriptedModel: the synchronous script function calls agent.abort() and asks for tools: no tool runs, no second model call', async () => {
    const { ran, tool } = counted()
    const reason = { why: 'aborted inside the model' }
    let agent!: Agent
    let calls = 0
    agent = await createAgent({
      model: scriptedModel(() => {
        calls++
        if (calls === 1) agent.abort(reason)
        return calls === 1 ? { toolCalls: [{ id: 'a', name: 'Bash', input: {} }] } : { text: 'MODEL CALLED AGAIN' }
      }),
      tools: [tool('Bash')],
    })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual([])
    expect(calls).toBe(1)
    await agent.close()
  })

  it('scriptedModel: the synchronous script function calls agent.abort() and answers with text: the response still rejects with the reason', async () => {
    const reason = new Error('aborted while answering')
    let agent!: Agent
    agent = await createAgent({ model: scriptedModel(() => (agent.abort(reason), { text: 'final answer' })) })
    const response = await agent.send('go')
    await expect(response.text()).rejects.toBe(reason)
    await agent.close()
  })

  it('scriptedModel: a PostToolUse callback that calls agent.abort(): the model is not called again', async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'a', name: 'Bash', input: {} })
    const reason = new Error('abort from PostToolUse')
    let agent!: Agent
    agent = await createAgent({
      model,
      tools: [tool('Bash')],
      advanced: { hooks: { PostToolUse: [() => (agent.abort(reason), { action: 'continue' })] } },
    })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual(['Bash'])
    expect(requests.length).toBe(1)
    await agent.close()
  })

  it('scriptedModel: an afterToolCall hook object handler that calls agent.abort(): the model is not called again', async () => {
    const { ran, tool } = counted()
    const { model, requests } = toolsThenText({ id: 'a', name: 'Bash', input: {} })
    const reason = new Error('abort from an afterToolCall handler')
    let agent!: Agent
    agent = await createAgent({
      model,
      tools: [tool('Bash')],
      advanced: { hooks: [{ id: 'after', type: 'afterToolCall', handler: () => void agent.abort(reason) }] },
    })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual(['Bash'])
    expect(requests.length).toBe(1)
    await agent.close()
  })

  it('a synchronous tool that aborts in turn 1 and a second turn with tools: nothing of turn 2 happens', async () => {
    // The same kill switch, with a model that would go on asking for tools.
    const { ran, tool } = counted()
    const reason = new Error('stop everything')
    let agent!: Agent
    const { model, requests } = countedModel((_request, call) => ({ toolCalls: [{ id: `c${call}`, name: call === 1 ? 'kill' : 'after', input: {} }] }))
    agent = await createAgent({ model, tools: [tool('kill', () => (agent.abort(reason), 'killed')), tool('after')], maxTurns: 5 })
    const response = await agent.send('go')
    await expect(response.result()).rejects.toBe(reason)
    expect(ran).toEqual(['kill'])
    expect(requests.length).toBe(1)
    await agent.close()
  })
})

// ---------------------------------------------------------------------------------------------
// Finding 2: decisions and hook outputs are read from plain own data properties. A value that
// cannot be read that way (toJSON, throwing or changing getters, a Symbol or a function where
// data is expected) is invalid and, on a gating event, denies: the tool does not run.

/** A getter that answers `first` on its first read and the other value on every later read. */
function flipping<K extends string>(key: K, first: string, then: string): Record<K, string> {
  let reads = 0
  return Object.defineProperty({}, key, { enumerable: true, get: () => (reads++ === 0 ? first : then) }) as Record<K, string>
}

const permissionDecisions: [string, () => unknown][] = [
  ["{ behavior: 'deny', toJSON: () => ({ behavior: 'allow' }) }", () => ({ behavior: 'deny', toJSON: () => ({ behavior: 'allow' }) })],
  ["'deny' with toJSON returning the string 'allow'", () => ({ behavior: 'deny', message: 'no', toJSON: () => 'allow' })],
  ['a behavior getter that throws', () => ({
    get behavior(): string {
      throw new Error('getter says no')
    },
  })],
  ["a behavior getter: 'deny' on the first read, 'allow' after", () => flipping('behavior', 'deny', 'allow')],
  ["a behavior getter: 'allow' on the first read, 'deny' after", () => flipping('behavior', 'allow', 'deny')],
  ["a behavior getter that always answers 'allow' (not a data property)", () => Object.defineProperty({}, 'behavior', { enumerable: true, get: () => 'allow' })],
  ["behavior 'allow' inherited, not own", () => Object.create({ behavior: 'allow' })],
  ['behavior: a Symbol', () => ({ behavior: Symbol('allow') })],
  ['the decision itself a Symbol', () => Symbol('allow')],
  ["the decision itself a function returning 'allow'", () => () => 'allow'],
  ['behavior: a function', () => ({ behavior: () => 'allow' })],
  ["{ behavior: 'allow', updatedInput: { command: Symbol() } }", () => ({ behavior: 'allow', updatedInput: { command: Symbol('rm') } })],
  ["{ behavior: 'allow', updatedInput: { command: () => 'rm' } }", () => ({ behavior: 'allow', updatedInput: { command: () => 'rm' } })],
  ["{ behavior: 'allow', updatedInput: { command: 'ls', toJSON } } (toJSON rewrites the input)", () => ({
    behavior: 'allow',
    updatedInput: { command: 'ls', toJSON: () => ({ command: 'rm -rf /' }) },
  })],
  ["{ behavior: 'allow', updatedInput } with a getter for command", () => ({
    behavior: 'allow',
    updatedInput: flipping('command', 'ls', 'rm -rf /'),
  })],
]

describe('§11 / §6 the permission function decision is read from plain own data properties', () => {
  it.each(permissionDecisions)('%s denies: the tool does not run', async (_label, decision) => {
    const { ran, tool } = counted()
    const executed: unknown[] = []
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ id: 'b', name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
      tools: [tool('Bash', (input) => (executed.push(input), 'ran'))],
      advanced: { permission: (() => decision()) as AgentPermission },
    })
    expect(ran).toEqual([])
    expect(executed).toEqual([])
    expect(result.toolCalls[0].status).toBe('error')
  })
})

const preToolUseOutputs: [string, () => unknown, 'error' | 'either'][] = [
  ["{ action: 'abort', toJSON: () => ({ action: 'continue' }) }", () => ({ action: 'abort', toJSON: () => ({ action: 'continue' }) }), 'error'],
  // Read from own data this is a skip (a successful call, tool not run); invalid, a failed call.
  ["{ action: 'skip', toJSON: () => ({ action: 'continue' }) }", () => ({ action: 'skip', reason: 'skipped', toJSON: () => ({ action: 'continue' }) }), 'either'],
  ['an action getter that throws', () => ({
    get action(): string {
      throw new Error('getter says no')
    },
  }), 'error'],
  ["an action getter: 'abort' on the first read, 'continue' after", () => flipping('action', 'abort', 'continue'), 'error'],
  ["an action getter: 'continue' on the first read, 'abort' after", () => flipping('action', 'continue', 'abort'), 'error'],
  ["{ action: 'continue', modifiedInput } with a setter-only accessor beside command (read as nothing, still an accessor)", () => ({
    action: 'continue',
    modifiedInput: Object.defineProperty({ command: 'ls' }, 'flags', { enumerable: true, set: () => {} }),
  }), 'error'],
  ["{ action: 'continue', modifiedInput } with an accessor of neither getter nor setter beside command", () => ({
    action: 'continue',
    modifiedInput: Object.defineProperty({ command: 'ls' }, 'flags', { enumerable: true, get: undefined }),
  }), 'error'],
  ['action: a Symbol', () => ({ action: Symbol('continue') }), 'error'],
  ['the output itself a function', () => () => ({ action: 'continue' }), 'error'],
  ["{ action: 'continue', modifiedInput: { command: Symbol() } }", () => ({ action: 'continue', modifiedInput: { command: Symbol('rm') } }), 'error'],
  ["{ action: 'continue', modifiedInput: { command: () => 'rm' } }", () => ({ action: 'continue', modifiedInput: { command: () => 'rm' } }), 'error'],
  ["{ action: 'continue', modifiedInput: { command: 'ls', toJSON } } (toJSON rewrites the input)", () => ({
    action: 'continue',
    modifiedInput: { command: 'ls', toJSON: () => ({ command: 'rm -rf /' }) },
  }), 'error'],
  ["{ action: 'continue', modifiedInput } with a getter for command", () => ({ action: 'continue', modifiedInput: flipping('command', 'ls', 'rm -rf /') }), 'error'],
  ["{ action: 'continue', modifiedInput: { command: 'ls' }, toJSON } (toJSON rewrites modifiedInput)", () => ({
    action: 'continue',
    modifiedInput: { command: 'ls' },
    toJSON: () => ({ action: 'continue', modifiedInput: { command: 'rm -rf /' } }),
  }), 'error'],
]

async function gatedRun(hooks: AgentOptions['advanced']) {
  const { ran, tool } = counted()
  const executed: unknown[] = []
  const result = await prompt('go', {
    model: scriptedModel([{ toolCalls: [{ id: 'b', name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
    tools: [tool('Bash', (input) => (executed.push(input), 'ran'))],
    advanced: hooks,
  })
  return { ran, executed, result }
}

describe('§11 / §5.3 a PreToolUse callback output is read from plain own data properties', () => {
  it.each(preToolUseOutputs)('%s: the tool does not run', async (_label, output, status) => {
    const { ran, executed, result } = await gatedRun({ hooks: { PreToolUse: [(() => output()) as unknown as HookCallback] } })
    expect(ran).toEqual([])
    expect(executed).toEqual([])
    if (status === 'error') expect(result.toolCalls[0].status).toBe('error')
  })
})

describe('§11 / §7 a PreToolUse hook object handler output is read from plain own data properties', () => {
  it.each(preToolUseOutputs)('%s: the tool does not run', async (_label, output, status) => {
    const { ran, executed, result } = await gatedRun({ hooks: [{ id: 'gate', type: 'beforeToolCall', handler: (() => output()) as HookObject<'beforeToolCall'>['handler'] }] })
    expect(ran).toEqual([])
    expect(executed).toEqual([])
    if (status === 'error') expect(result.toolCalls[0].status).toBe('error')
  })
})

describe('§11 / §5.3 a PermissionRequest callback output is read from plain own data properties', () => {
  it.each(preToolUseOutputs.filter(([label]) => !label.includes("'skip'")))('%s: the tool does not run', async (_label, output) => {
    // A permission function that allows everything: only the hook stands between the model and the tool.
    const { ran, executed, result } = await gatedRun({ hooks: { PermissionRequest: [(() => output()) as unknown as HookCallback] }, permission: () => 'allow' })
    expect(ran).toEqual([])
    expect(executed).toEqual([])
    expect(result.toolCalls[0].status).toBe('error')
  })
})

describe('§11 a UserPromptSubmit output is read from plain own data properties', () => {
  it("{ action: 'abort', toJSON: () => ({ action: 'continue' }) } does not let the prompt reach the model", async () => {
    const { model, requests } = countedModel(() => ({ text: 'MODEL CALLED' }))
    const agent = await createAgent({
      model,
      advanced: { hooks: { UserPromptSubmit: [(() => ({ action: 'abort', reason: 'blocked prompt', toJSON: () => ({ action: 'continue' }) })) as unknown as HookCallback] } },
    })
    const response = await agent.send('go')
    await expect(response.text()).rejects.toBeInstanceOf(SdkError)
    expect(requests.length).toBe(0)
    await agent.close()
  })
})

// ---------------------------------------------------------------------------------------------
// Finding 3: an unusable mock must not let the tool run silently.
//
// Decision: the call fails (the tool does not run). §7 says "the first accepted mock wins", so a
// mock() that is not accepted could in principle leave the call unmocked; but §11 says a Symbol
// or a function where data is expected is invalid and, on a gating event (PreToolUse is one),
// denies, and the established behaviour for another unusable mock (mock(42), see
// hook-objects.test.ts) is a failed call `Tool execution failed: mock() was given 42; ...`. The
// hook author who called mock() meant "do not run the tool"; running it would fail open. So
// whatever mock() returns, the tool must not run and the call is a failed one.

const unusableMocks: [string, () => unknown][] = [
  ['a Symbol', () => Symbol('canned')],
  ['a function', () => () => 'canned'],
  ['{ content: Symbol() }', () => ({ content: Symbol('canned') })],
  ['{ content: () => "x" }', () => ({ content: () => 'canned' })],
  ['{ content: a throwing getter }', () => ({
    get content(): string {
      throw new Error('getter says no')
    },
  })],
  ["{ content: 'x', success: Symbol() }", () => ({ content: 'canned', success: Symbol('no') })],
  ["{ content } inherited, not own", () => Object.create({ content: 'canned' })],
  ["{ content: 'canned', success } with success a setter-only accessor", () => Object.defineProperty({ content: 'canned' }, 'success', { enumerable: true, set: () => {} })],
]

describe('§7 / §11 mock() with a value it cannot use', () => {
  it.each(unusableMocks)('mock(%s) in a PreToolUse hook object handler: the tool does not run, the call fails', async (_label, value) => {
    const answers: unknown[] = []
    const { ran, executed, result } = await gatedRun({
      hooks: [{ id: 'mocker', type: 'beforeToolCall', handler: (event) => void answers.push(event.mock!(value() as any)) }],
    })
    expect(answers).toHaveLength(1)
    expect(ran).toEqual([])
    expect(executed).toEqual([])
    expect(result.toolCalls[0].status).toBe('error')
    expect(result.toolCalls[0].output).toMatch(/^Tool execution failed: /)
  })

  it.each(unusableMocks.slice(0, 2))('mock(%s) in a bare PreToolUse callback: the tool does not run, the call fails', async (_label, value) => {
    const { ran, result } = await gatedRun({
      hooks: { PreToolUse: [(input: any) => (input.mock(value()), { action: 'continue' })] },
    })
    expect(ran).toEqual([])
    expect(result.toolCalls[0].status).toBe('error')
  })
})

// ---------------------------------------------------------------------------------------------
// Finding 4: every valid JS string survives a crossing. A lone surrogate may arrive as U+FFFD;
// a proper surrogate pair arrives intact; the run does not fail.

describe('§11 every valid JS string survives a crossing', () => {
  const lone = 'ok \ud83d' // a string cut in the middle of an emoji
  const pair = 'pair \ud83d\ude00 and lone \udc00 end'

  it.each([lone, pair])('a tool result %j reaches the model', async (text) => {
    const { model, requests } = countedModel((_request, call) => (call === 1 ? { toolCalls: [{ id: 't', name: 'cut', input: {} }] } : { text: 'end' }))
    const result = await prompt('go', { model, tools: [defineTool({ name: 'cut', execute: () => text })] })
    expect(result.content).toBe('end')
    expect(requests).toHaveLength(2)
    const toolMessage = lastOf(requests[1].messages) as any
    expect(toolMessage.role).toBe('tool')
    expectSurvived(toolMessage.content, text)
    expect(toolMessage.content).toContain(text === pair ? '\ud83d\ude00' : 'ok ')
    expectSurvived(result.toolCalls[0].output, text)
  })

  it('a surrogate pair in a tool result arrives intact', async () => {
    const { model, requests } = countedModel((_request, call) => (call === 1 ? { toolCalls: [{ id: 't', name: 'emoji', input: {} }] } : { text: 'end' }))
    await prompt('go', { model, tools: [defineTool({ name: 'emoji', execute: () => 'smile \ud83d\ude00' })] })
    expect((lastOf(requests[1].messages) as any).content).toBe('smile \ud83d\ude00')
  })

  it('a prompt with a lone surrogate: send("hi \\ud800") reaches the model', async () => {
    const { model, requests } = countedModel(() => ({ text: 'end' }))
    const agent = await createAgent({ model })
    expect(await (await agent.send('hi \ud800')).text()).toBe('end')
    expectSurvived((lastOf(requests[0].messages) as any).content, 'hi \ud800')
    await agent.close()
  })

  it('a prompt given as text parts with a lone surrogate reaches the model', async () => {
    const { model, requests } = countedModel(() => ({ text: 'end' }))
    const agent = await createAgent({ model })
    expect(await (await agent.send([{ type: 'text', text: 'parts \udfff' }])).text()).toBe('end')
    const content = (lastOf(requests[0].messages) as any).content
    const text = typeof content === 'string' ? content : content[0].text
    expectSurvived(text, 'parts \udfff')
    await agent.close()
  })

  it.each([
    ['a bare string', (text: string) => text],
    ['{ userPrompt }', (text: string) => ({ userPrompt: text })],
  ])('a UserPromptSubmit modifiedInput (%s) with a lone surrogate reaches the model', async (_label, shape) => {
    const { model, requests } = countedModel(() => ({ text: 'end' }))
    const result = await prompt('go', {
      model,
      advanced: { hooks: { UserPromptSubmit: [() => ({ action: 'continue', modifiedInput: shape('rewritten \ud800') as any })] } },
    })
    expect(result.content).toBe('end')
    expectSurvived((lastOf(requests[0].messages) as any).content, 'rewritten \ud800')
  })

  it('a PreToolUse modifiedInput with a lone surrogate reaches the tool and the model', async () => {
    const inputs: any[] = []
    const { model, requests } = countedModel((_request, call) => (call === 1 ? { toolCalls: [{ id: 't', name: 'echo', input: { text: 'plain' } }] } : { text: 'end' }))
    const result = await prompt('go', {
      model,
      tools: [defineTool({ name: 'echo', execute: (input) => (inputs.push(input), `echo ${input.text}`) })],
      advanced: { hooks: { PreToolUse: [() => ({ action: 'continue', modifiedInput: { text: 'cut \ud83d' } })] } },
    })
    expect(result.content).toBe('end')
    expect(inputs).toHaveLength(1)
    expectSurvived(inputs[0].text, 'cut \ud83d')
    expectSurvived((lastOf(requests[1].messages) as any).content, 'echo cut \ud83d')
  })

  it('a PostToolUse modifiedOutput with a lone surrogate reaches the model', async () => {
    const { model, requests } = countedModel((_request, call) => (call === 1 ? { toolCalls: [{ id: 't', name: 'echo', input: {} }] } : { text: 'end' }))
    const result = await prompt('go', {
      model,
      tools: [defineTool({ name: 'echo', execute: () => 'original' })],
      advanced: { hooks: { PostToolUse: [() => ({ action: 'continue', modifiedOutput: 'redacted \udbff' })] } },
    })
    expect(result.content).toBe('end')
    expectSurvived((lastOf(requests[1].messages) as any).content, 'redacted \udbff')
  })

  it('a permission updatedInput with a lone surrogate reaches the tool', async () => {
    const inputs: any[] = []
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ id: 't', name: 'echo', input: { text: 'plain' } }] }, { text: 'end' }]),
      tools: [defineTool({ name: 'echo', execute: (input) => (inputs.push(input), 'ok') })],
      advanced: { permission: () => ({ behavior: 'allow', updatedInput: { text: 'allowed \ud800' } }) },
    })
    expect(result.content).toBe('end')
    expect(inputs).toHaveLength(1)
    expectSurvived(inputs[0].text, 'allowed \ud800')
  })

  it('model text and tool-call input with lone surrogates (scriptedModel) reach the caller and the tool', async () => {
    const inputs: any[] = []
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ id: 't', name: 'echo', input: { text: 'from model \udc00' } }] }, { text: 'answer \ud83d' }]),
      tools: [defineTool({ name: 'echo', execute: (input) => (inputs.push(input), 'ok') })],
    })
    expectSurvived(result.content, 'answer \ud83d')
    expect(inputs).toHaveLength(1)
    expectSurvived(inputs[0].text, 'from model \udc00')
  })

  it('a tool that throws an error whose message has a lone surrogate: a failed call, the run goes on', async () => {
    const { model, requests } = countedModel((_request, call) => (call === 1 ? { toolCalls: [{ id: 't', name: 'boom', input: {} }] } : { text: 'end' }))
    const result = await prompt('go', {
      model,
      tools: [
        defineTool({
          name: 'boom',
          execute: () => {
            throw new Error('broken \ud800')
          },
        }),
      ],
    })
    expect(result.content).toBe('end')
    expect(result.toolCalls[0].status).toBe('error')
    expectSurvived((lastOf(requests[1].messages) as any).content, 'Tool execution failed: broken \ud800')
  })
})

// ---------------------------------------------------------------------------------------------
// Finding 5: bad input of any JS type is an SdkError with a code, never a raw engine error.

/** What a promise rejected with (or `{ resolved }`). */
const outcome = (promise: Promise<unknown>) =>
  promise.then(
    (value) => ({ resolved: value }),
    (error) => error,
  )

function expectSdkError(error: unknown, code: string) {
  expect(error).toBeInstanceOf(SdkError)
  expect((error as SdkError).code).toBe(code)
}

describe('§11 bad arguments to agent methods reject that call with INVALID_INPUT; the agent stays usable', () => {
  const cyclicParts = (): unknown => {
    const parts: any[] = [{ type: 'text', text: 'hello' }]
    parts.push(parts)
    return parts
  }
  const cyclicPart = (): unknown => {
    const part: any = { type: 'text', text: 'hello' }
    part.self = part
    return [part]
  }
  const badMessages: [string, () => unknown][] = [
    ['a content array that contains itself', cyclicParts],
    ['a text part that contains itself', cyclicPart],
    ['a BigInt', () => 5n],
    ['a Symbol', () => Symbol('prompt')],
    ['a function', () => () => 'hi'],
    ['a text part whose text is a BigInt', () => [{ type: 'text', text: 5n }]],
    ['a text part with a throwing getter', () => [{
      type: 'text',
      get text(): string {
        throw new Error('getter')
      },
    }]],
  ]

  it.each(badMessages)('send(%s)', async (_label, message) => {
    const { model, requests } = countedModel(() => ({ text: 'still usable' }))
    const agent = await createAgent({ model })
    expectSdkError(await outcome(agent.send(message() as any)), 'INVALID_INPUT')
    expect(requests.length).toBe(0)
    expect(await (await agent.send('hello')).text()).toBe('still usable')
    await agent.close()
  })

  it.each([
    ['maxTurns: 5n', { maxTurns: 5n }],
    ['maxTurns: Symbol()', { maxTurns: Symbol('n') }],
    ['signal: a string', { signal: 'aborted' }],
  ])('send("hi", { %s })', async (_label, options) => {
    const { model, requests } = countedModel(() => ({ text: 'still usable' }))
    const agent = await createAgent({ model })
    expectSdkError(await outcome(agent.send('hi', options as any)), 'INVALID_INPUT')
    expect(requests.length).toBe(0)
    expect(await (await agent.send('hello')).text()).toBe('still usable')
    await agent.close()
  })

  it.each([
    ['a cyclic object', () => {
      const reason: any = { why: 'cyclic' }
      reason.self = reason
      return reason
    }],
    ['a BigInt', () => 5n],
    ['a Symbol', () => Symbol('reason')],
  ])('agent.abort(%s) aborts the run with that very value', async (_label, make) => {
    const reason = make()
    let started = false
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'h', name: 'hang', input: {} }] }, { text: 'after' }]),
      tools: [defineTool({ name: 'hang', execute: (_input, context) => ((started = true), untilAborted(context.signal)) })],
    })
    const response = await agent.send('go')
    while (!started) await new Promise((resolve) => setTimeout(resolve, 1))
    agent.abort(reason)
    expect(await outcome(response.result())).toBe(reason)
    expect(await (await agent.send('again')).text()).toBe('after')
    await agent.close()
  })
})

describe('§11 bad options give ConfigError', () => {
  const cyclic = () => {
    const schema: any = { type: 'object', properties: {} }
    schema.properties.self = schema
    return schema
  }
  it.each<[string, () => unknown]>([
    ['maxTurns: 5n', () => ({ maxTurns: 5n })],
    ['systemPrompt: Symbol()', () => ({ systemPrompt: Symbol('s') })],
    ['temperature: 1n', () => ({ temperature: 1n })],
    ['a tool whose parameters contain themselves', () => ({ tools: [{ name: 't', parameters: cyclic(), execute: (): string => 'x' }] })],
    ['a tool whose name is a Symbol', () => ({ tools: [{ name: Symbol('t'), execute: (): string => 'x' }] })],
    ['hookTimeoutMs: 5n', () => ({ advanced: { hookTimeoutMs: 5n } })],
    ['advanced that contains itself', () => {
      const advanced: any = { hookTimeoutMs: 1000 }
      advanced.self = advanced
      return { advanced }
    }],
  ])('createAgent with %s', async (_label, extra) => {
    const error = await outcome(createAgent({ model: scriptedModel([{ text: 'x' }]), ...(extra() as any) }))
    expect(error).toBeInstanceOf(ConfigError)
    expectSdkError(error, 'CONFIG_ERROR')
  })
})

describe('§11 / §7.1 an environment variable name that exists only on Object.prototype is simply unset', () => {
  let receiver: ModelServer
  beforeAll(async () => {
    receiver = await startServer()
    receiver.reply((_req: Recorded, res: ServerResponse) => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ decision: 'allow' })))
  })
  afterAll(() => receiver.close())
  beforeEach(() => {
    receiver.requests.length = 0
  })

  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty', 'valueOf'])(
    'a control whose header template is ${%s}: createAgent accepts it; at send time it is unset, a delivery error that blocks',
    async (name) => {
      expect(Object.prototype.hasOwnProperty.call(process.env, name)).toBe(false)
      const { ran, tool } = counted()
      const hook: AgentHook = {
        id: `env-${name}`,
        type: 'beforeToolCall',
        webhook: { url: `${receiver.url}/control`, responseHandling: 'toolCall', onError: 'block', timeout: 2, headers: { 'x-token': `\${${name}}` }, allowedEnvVars: [name] },
      }
      const creating = createAgent({
        model: scriptedModel([{ toolCalls: [{ id: 'c', name: 'Bash', input: {} }] }, { text: 'end' }]),
        tools: [tool('Bash')],
        advanced: { hooks: [hook] },
      })
      const agent = await creating
      const result = await (await agent.send('go')).result()
      // Nothing was sent with Object's constructor (or anything else) as the header value.
      expect(receiver.requests).toEqual([])
      expect(result.toolCalls[0]).toMatchObject({ status: 'error', output: 'hook_control_error' })
      expect(ran).toEqual([])
      await agent.close()
    },
  )

  it.each(['constructor', '__proto__'])('a notification with fallback none and ${%s} fails its dispatch with CriticalHookDeliveryError, not a crash', async (name) => {
    const agent = await createAgent({
      model: scriptedModel([{ text: 'end' }]),
      advanced: { hooks: [{ id: `critical-${name}`, type: 'UserPromptSubmit', webhook: { url: `${receiver.url}/notify`, fallback: 'none', headers: { 'x-token': `\${${name}}` }, allowedEnvVars: [name] } }] },
    })
    const error = await outcome((await agent.send('go')).text())
    expectSdkError(error, 'CRITICAL_HOOK_DELIVERY')
    expect(receiver.requests).toEqual([])
    await agent.close()
  })
})
