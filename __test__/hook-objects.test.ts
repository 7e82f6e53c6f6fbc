// Hook objects: both registration forms, aliases, order, matchers, mock(), lifecycle events.
import { describe, expect, it } from 'vitest'
import { ConfigError, createAgent, defineTool, prompt, scriptedModel, type AgentHook, type HookEventPayload, type HookObject, type HookTypeName, type HookInput } from '../index.js'
import { until } from './helpers/server.js'

let ran: string[] = []
const tools = [
  defineTool({ name: 'fs/read', kind: 'readonly', execute: ({ path }) => (ran.push('fs/read'), `contents of ${path}`) }),
  defineTool({ name: 'net/get', execute: ({ url }) => (ran.push('net/get'), `fetched ${url}`) }),
]
const model = () =>
  scriptedModel([
    { text: 'looking', toolCalls: [{ id: 'a', name: 'fs/read', input: { path: 'x.txt' } }, { id: 'b', name: 'net/get', input: { url: 'http://example.test' } }], usage: { inputTokens: 10, outputTokens: 5 } },
    { text: 'done', usage: { inputTokens: 20, outputTokens: 3 } },
  ])

describe('registration', () => {
  it('runs hook objects and bare functions of one event in registration order, with aliases', async () => {
    const order: string[] = []
    const note = (name: string) => async (event: HookEventPayload) => void order.push(`${name}:${event.toolName}`)
    await prompt('go', {
      model: model(),
      tools,
      advanced: {
        hooks: {
          beforeToolCall: [
            { id: 'first', handler: note('first') },
            async (input: HookInput) => (order.push(`bare:${input.toolName}`), { action: 'continue' }),
          ],
          PreToolUse: [{ id: 'third', type: 'beforeToolCall', handler: note('third') }],
        } as any,
      },
    })
    // Within one call the order is first, bare, third; the two calls run concurrently.
    for (const tool of ['fs/read', 'net/get']) {
      expect(order.filter((entry) => entry.endsWith(tool))).toEqual([`first:${tool}`, `bare:${tool}`, `third:${tool}`])
    }
  })

  it('accepts an AgentHook[] and gives tool events both vocabularies', async () => {
    const seen: HookEventPayload[] = []
    const hooks: AgentHook[] = [{ id: 'observe', type: 'afterToolCall', handler: (event) => void seen.push(event) }]
    const agent = await createAgent({ model: model(), tools, advanced: { hooks } })
    await (await agent.send('go')).result()
    const read = seen.find((event) => event.toolName === 'fs/read')!
    expect(read).toMatchObject({
      event: 'PostToolUse',
      sessionId: agent.sessionId,
      toolName: 'fs/read',
      toolInput: { path: 'x.txt' },
      toolOutput: 'contents of x.txt',
      toolCallId: 'a',
      stepIndex: 0,
      callIndex: 0,
      operationId: expect.any(String),
      apiName: 'fs/read',
      identifier: 'fs',
      args: { path: 'x.txt' },
      result: { content: 'contents of x.txt', success: true },
      mocked: false,
    })
    expect(seen.find((event) => event.toolName === 'net/get')).toMatchObject({ callIndex: 1, identifier: 'net' })
    expect(new Set(seen.map((event) => event.operationId)).size).toBe(1)
    await agent.close()
  })

  it('identifier is the part before the first "/", else empty; operationId is new for every run', async () => {
    const seen: HookEventPayload[] = []
    const agent = await createAgent({
      model: scriptedModel([
        { toolCalls: [{ name: 'Read', input: {} }, { name: 'a/b/c', input: {} }] },
        { text: 'one' },
        { toolCalls: [{ name: 'Read', input: {} }] },
        { text: 'two' },
      ]),
      tools: [defineTool({ name: 'Read', execute: () => 'r' }), defineTool({ name: 'a/b/c', execute: () => 'c' })],
      advanced: { hooks: [{ id: 'observe', type: 'beforeToolCall', handler: (event) => void seen.push(event) }] },
    })
    await (await agent.send('first')).result()
    await (await agent.send('second')).result()
    await agent.close()
    expect(seen.map((event) => [event.toolName, event.identifier])).toEqual([['Read', ''], ['a/b/c', 'a'], ['Read', '']])
    expect(seen[0].operationId).toBe(seen[1].operationId)
    expect(seen[2].operationId).not.toBe(seen[0].operationId)
  })

  it('tool events count stepIndex from 0 across model turns', async () => {
    const steps: unknown[] = []
    const observe = (event: HookEventPayload) => void steps.push([event.event, event.toolName, event.stepIndex])
    await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'fs/read', input: { path: 'a' } }] }, { toolCalls: [{ name: 'net/get', input: { url: 'u' } }] }, { text: 'end' }]),
      tools,
      advanced: { hooks: [{ id: 'pre', type: 'beforeToolCall', handler: observe }, { id: 'post', type: 'afterToolCall', handler: observe }] },
    })
    expect(steps).toEqual([
      ['PreToolUse', 'fs/read', 0],
      ['PostToolUse', 'fs/read', 0],
      ['PreToolUse', 'net/get', 1],
      ['PostToolUse', 'net/get', 1],
    ])
  })

  it("a handler's error follows its event: a tool event fails the call, a session event reaches the caller unchanged", async () => {
    const thrown = new RangeError('handler broke')
    const failing = <T extends HookTypeName>(type: T): HookObject<T> => ({ id: `broken-${type}`, type, handler: () => { throw thrown } })
    await expect(createAgent({ model: model(), tools, advanced: { hooks: [failing('SessionStart')] } })).rejects.toBe(thrown)
    const agent = await createAgent({ model: model(), tools, advanced: { hooks: [failing('UserPromptSubmit')] } })
    await expect((await agent.send('go')).text()).rejects.toBe(thrown)
    await agent.close()
    const result = await prompt('go', { model: model(), tools, advanced: { hooks: [failing('beforeToolCall')] } })
    expect(result.toolCalls.map((call) => call.output)).toEqual(['Tool execution failed: handler broke', 'Tool execution failed: handler broke'])
  })

  it('rejects a bad registration as a whole, naming the hook and the field', async () => {
    let handlerRan = false
    const cases: [unknown, string][] = [
      [[{ id: 'x', type: 'afterStep', matcher: 'fs', handler: () => {} }], 'advanced.hooks[0] (hook "x").matcher is only supported on tool events'],
      [[{ id: 'x', type: 'beforeToolCall', matcher: '(', handler: () => {} }], 'advanced.hooks[0] (hook "x").matcher is not a valid regular expression'],
      [[{ id: 'ok', type: 'SessionStart', handler: () => ((handlerRan = true), undefined) }, { id: 'y', type: 'nope', handler: () => {} }], 'advanced.hooks[1] (hook "y").type must be a hook event or alias'],
      [[{ id: 'z', type: 'afterToolCall', webhook: { url: 'http://127.0.0.1:1/x', headers: { Authorization: 'Bearer ${SECRET_TOKEN}' } } }], 'advanced.hooks[0] (hook "z").webhook.headers.Authorization uses ${SECRET_TOKEN}, which is not in advanced.hooks[0] (hook "z").webhook.allowedEnvVars'],
      [[{ id: 'w', type: 'beforeToolCall', webhook: { url: 'http://127.0.0.1:1/x', responseHandling: 'toolCall', eventFields: ['toolName'] } }], 'advanced.hooks[0] (hook "w").webhook: control hooks cannot filter or override the event payload'],
      [[{ id: 'v', type: 'afterStep' }], 'advanced.hooks[0] (hook "v") needs a handler, a webhook, a command or an http hook'],
    ]
    for (const [hooks, message] of cases) {
      const error = await createAgent({ model: model(), advanced: { hooks: hooks as any } }).catch((e) => e)
      expect(error).toBeInstanceOf(ConfigError)
      expect(error.message.startsWith(message)).toBe(true)
    }
    // Validation happens before anything runs: the valid SessionStart hook never ran.
    expect(handlerRan).toBe(false)
  })
})

describe('matchers', () => {
  it('filters tool hooks by a regex on the tool name, in Rust, before calling JS', async () => {
    const calls: string[] = []
    await prompt('go', {
      model: model(),
      tools,
      advanced: {
        hooks: [
          { id: 'fs-only', type: 'beforeToolCall', matcher: '^fs/', handler: (event) => void calls.push(`fs-only:${event.toolName}`) },
          { id: 'all', type: 'beforeToolCall', matcher: '*', handler: (event) => void calls.push(`all:${event.toolName}`) },
          { id: 'empty', type: 'afterToolCall', matcher: '', handler: (event) => void calls.push(`empty:${event.toolName}`) },
          { id: 'none', type: 'afterToolCall', matcher: '^nothing$', handler: (event) => void calls.push(`none:${event.toolName}`) },
          { id: 'alternation', type: 'onToolCallError', matcher: 'read|get', handler: (event) => void calls.push(`error:${event.toolName}`) },
          // Fails net/get after it ran (a throwing PostToolUse), so the onToolCallError hook has a call to match.
          { id: 'break-get', type: 'afterToolCall', matcher: 'get$', handler: () => { throw new Error('no network') } },
        ],
      },
    })
    expect(calls.sort()).toEqual(['all:fs/read', 'all:net/get', 'empty:fs/read', 'empty:net/get', 'error:net/get', 'fs-only:fs/read'])
  })
})

describe('mock()', () => {
  it('the first mock wins, later PreToolUse handlers do not run, the tool does not execute, PostToolUse sees mocked', async () => {
    ran = []
    const order: string[] = []
    const post: HookEventPayload[] = []
    const result = await prompt('go', {
      model: model(),
      tools,
      advanced: {
        hooks: [
          { id: 'one', type: 'beforeToolCall', matcher: '^fs/', handler: (event) => { order.push('one'); expect(event.mock!({ content: '{"items":[]}', success: true })).toBe(true) } },
          { id: 'two', type: 'beforeToolCall', matcher: '^fs/', handler: () => void order.push('two') },
          { id: 'post', type: 'afterToolCall', handler: (event) => void post.push(event) },
        ],
      },
    })
    expect(order).toEqual(['one'])
    expect(ran).toEqual(['net/get'])
    expect(result.toolCalls[0]).toEqual({
      id: 'a',
      name: 'fs/read',
      input: { path: 'x.txt' },
      output: '{"items":[]}',
      duration: expect.any(Number),
      isError: false,
      status: 'success',
      mocked: true,
    })
    expect(result.toolCalls[1].mocked).toBeUndefined()
    expect(post.find((event) => event.toolName === 'fs/read')).toMatchObject({ mocked: true, toolOutput: '{"items":[]}', result: { content: '{"items":[]}', success: true } })
  })

  it('a mocked call, like a skipped one, is not put to PermissionRequest hooks or the permission function', async () => {
    const asked: string[] = []
    const result = await prompt('go', {
      model: model(),
      tools,
      advanced: {
        hooks: [
          { id: 'mock-fs', type: 'beforeToolCall', matcher: '^fs/', handler: (event) => void event.mock!('canned') },
          { id: 'ask', type: 'PermissionRequest', handler: (event) => void asked.push(`hook:${event.toolName}`) },
        ],
        permission: (request) => (asked.push(`permission:${request.toolName}`), { behavior: 'allow' }),
      },
    })
    expect(result.toolCalls[0]).toMatchObject({ output: 'canned', mocked: true })
    expect(asked).toEqual(['hook:net/get', 'permission:net/get'])
  })

  it('a second mock() returns false; a failed mock is a failed call whose output is the content; a plain string works', async () => {
    const answers: boolean[] = []
    const failed = await prompt('go', {
      model: model(),
      tools,
      advanced: {
        hooks: {
          PreToolUse: [
            (input: any) => {
              answers.push(input.mock({ content: 'denied by mock', success: false }), input.mock('second'))
              return { action: 'continue' }
            },
          ],
        },
      },
    })
    expect(answers).toEqual([true, false, true, false])
    expect(failed.toolCalls.map((call) => [call.status, call.output, call.mocked])).toEqual([
      ['error', 'denied by mock', true],
      ['error', 'denied by mock', true],
    ])
    const plain = await prompt('go', { model: model(), tools, advanced: { hooks: [{ id: 'm', type: 'PreToolUse', handler: (event) => void event.mock!('just text') }] } })
    expect(plain.toolCalls.map((call) => call.output)).toEqual(['just text', 'just text'])
  })
})

describe('mock() edge cases', () => {
  it('a mock that is not a string or { content } fails the call; a callback that mocked and then threw still mocked', async () => {
    const invalid = await prompt('go', { model: model(), tools, advanced: { hooks: [{ id: 'bad', type: 'PreToolUse', handler: (event) => void event.mock!(42 as any) }] } })
    expect(invalid.toolCalls[0]).toMatchObject({
      status: 'error',
      output: 'Tool execution failed: mock() was given 42; it takes a string or { content: string, success?: boolean }',
    })
    ran = []
    const thrown = await prompt('go', {
      model: model(),
      tools,
      advanced: { hooks: [{ id: 'then-throw', type: 'PreToolUse', handler: (event) => { event.mock!('mocked anyway'); throw new Error('after the mock') } }] },
    })
    expect(thrown.toolCalls.map((call) => [call.status, call.output, call.mocked])).toEqual([
      ['success', 'mocked anyway', true],
      ['success', 'mocked anyway', true],
    ])
    expect(ran).toEqual([])
  })
})

describe('this', () => {
  it('a bare callback gets this undefined; a handler or the permission function gets the object that holds it', async () => {
    const seen: Record<string, unknown> = {}
    const hookObject: AgentHook = {
      id: 'method',
      type: 'PostToolUse',
      handler(this: unknown) {
        seen.handler = this
      },
    }
    const advanced: any = {
      hooks: {
        PostToolUse: [
          function (this: unknown) {
            seen.bare = this
            return { action: 'continue' as const }
          },
          hookObject,
        ],
      },
      permission(this: unknown) {
        seen.permission = this
        return 'allow' as const
      },
    }
    await prompt('go', { model: scriptedModel([{ toolCalls: [{ name: 'fs/read', input: { path: 'x' } }] }, { text: 'end' }]), tools, advanced })
    // All three ran (a bare callback's `this` is undefined, so its key alone says it ran).
    expect(Object.keys(seen).sort()).toEqual(['bare', 'handler', 'permission'])
    expect(seen.bare).toBeUndefined()
    expect(seen.handler).toBe(hookObject)
    expect(seen.permission).toBe(advanced)
  })
})

describe('lifecycle events', () => {
  it('StepStart and StepEnd carry the step index, its tool calls and results, and usage totals', async () => {
    const steps: HookEventPayload[] = []
    await prompt('go', {
      model: model(),
      tools,
      advanced: { hooks: [{ id: 'b', type: 'beforeStep', handler: (event) => void steps.push(event) }, { id: 'a', type: 'afterStep', handler: (event) => void steps.push(event) }] },
    })
    expect(steps.map((event) => [event.event, event.stepIndex])).toEqual([
      ['StepStart', 0],
      ['StepEnd', 0],
      ['StepStart', 1],
      ['StepEnd', 1],
    ])
    expect(steps[1]).toMatchObject({
      content: 'looking',
      stepType: 'call_tool',
      toolCalls: [{ id: 'a', name: 'fs/read', arguments: '{"path":"x.txt"}' }, { id: 'b', name: 'net/get' }],
      toolsResult: [{ id: 'a', output: 'contents of x.txt', status: 'success' }, { id: 'b', status: 'success' }],
      totalInputTokens: 10,
      totalOutputTokens: 5,
      totalTokens: 15,
      totalToolCalls: 2,
      shouldContinue: true,
    })
    expect(steps[3]).toMatchObject({ content: 'done', stepType: 'call_llm', totalTokens: 38, shouldContinue: false })
  })

  it('onComplete gets the terminal reason; onError gets the error message and detail', async () => {
    const events: HookEventPayload[] = []
    const hooks: AgentHook[] = [
      { id: 'done', type: 'onComplete', handler: (event) => void events.push(event) },
      { id: 'err', type: 'onError', handler: (event) => void events.push(event) },
    ]
    await prompt('go', { model: scriptedModel([{ text: 'fine' }]), advanced: { hooks } })
    expect(events).toHaveLength(1)
    expect(events[0]).toMatchObject({ event: 'TaskCompleted', reason: 'done', success: true, lastAssistantContent: 'fine', steps: 1 })
    events.length = 0
    await expect(prompt('go', { model: scriptedModel([]), advanced: { hooks } })).rejects.toMatchObject({ code: 'MODEL_ERROR' })
    expect(events.map((event) => event.event)).toEqual(['TaskCompleted', 'StopFailure'])
    expect(events[1]).toMatchObject({
      reason: 'error',
      errorMessage: 'scriptedModel ran out of turns: it has 0, and this is model call 1',
      errorType: 'MODEL_ERROR',
      errorDetail: { code: 'MODEL_ERROR', message: 'scriptedModel ran out of turns: it has 0, and this is model call 1' },
    })
    const ends: unknown[] = []
    const onComplete: AgentHook = { id: 'r', type: 'onComplete', handler: (event) => void ends.push([event.reason, event.success]) }
    const twoCalls = () => scriptedModel([{ toolCalls: [{ name: 'fs/read', input: {} }] }, { toolCalls: [{ name: 'fs/read', input: {} }] }])
    await prompt('go', { model: twoCalls(), tools, maxTurns: 1, advanced: { hooks: [onComplete] } })
    await prompt('go', { model: twoCalls(), tools, advanced: { permission: () => ({ behavior: 'deny', message: 'no', interrupt: true }), hooks: [onComplete] } })
    expect(ends).toEqual([
      ['max_turns', false],
      ['interrupted', false],
    ])
  })

  it('a failing lifecycle handler is logged and the run goes on', async () => {
    let after = 0
    const result = await prompt('go', {
      model: model(),
      tools,
      advanced: {
        hooks: [
          { id: 'broken', type: 'afterStep', handler: () => { throw new Error('observer broke') } },
          { id: 'next', type: 'afterStep', handler: () => void after++ },
          { id: 'bad-output', type: 'beforeStep', handler: () => 42 as any },
        ],
      },
    })
    expect(result.content).toBe('done')
    expect(after).toBe(2)
  })

  it('a bare callback on a lifecycle event observes: its return value is ignored, its error logged', async () => {
    const warnings: string[] = []
    let later = 0
    const result = await prompt('go', {
      model: model(),
      tools,
      advanced: {
        logger: (entry) => void warnings.push(entry.message),
        hooks: { afterStep: [() => 42 as any, () => { throw new Error('observer broke') }, () => void later++] } as any,
      },
    })
    expect(result.content).toBe('done')
    expect(later).toBe(2)
    await until(() => warnings.length >= 2)
    expect(warnings).toEqual(Array(2).fill('advanced.hooks.afterStep[1] failed on StepEnd; the next hook runs'))
  })

  it('human intervention, compaction and sub-agent hooks are accepted and validated, and do not fire when nothing calls for them', async () => {
    const fired: string[] = []
    const types = ['beforeHumanIntervention', 'afterHumanIntervention', 'onStopByHumanIntervention', 'beforeCompact', 'afterCompact', 'onCompactError', 'beforeCallAgent', 'afterCallAgent', 'onCallAgentError'] as const
    await prompt('go', { model: model(), tools, advanced: { hooks: types.map((type) => ({ id: type, type, handler: () => void fired.push(type) })) } })
    expect(fired).toEqual([])
  })
})
