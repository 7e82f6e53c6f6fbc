// Webhook hooks against a real receiver on 127.0.0.1: payloads, header templates, every
// response class of a result control under both onError values, before and after the tool,
// ordering, environment hooks, critical delivery, and secrets kept out of sight.
import type { ServerResponse } from 'node:http'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ConfigError, createAgent, CriticalHookDeliveryError, defineTool, prompt, scriptedModel, type AgentHook, type AgentOptions, type WebhookConfig } from '../index.js'
import { sleep, startServer, type ModelServer, type Recorded } from './helpers/server.js'

let receiver: ModelServer
const routes: Record<string, (req: Recorded, res: ServerResponse) => void | Promise<void>> = {}
beforeAll(async () => {
  receiver = await startServer()
  receiver.reply(async (req, res) => {
    const route = routes[req.url.split('?')[0]]
    if (route) return route(req, res)
    res.writeHead(204).end()
  })
})
afterAll(() => receiver.close())
beforeEach(() => {
  receiver.requests.length = 0
})
afterEach(() => {
  for (const key of Object.keys(routes)) delete routes[key]
  for (const name of Object.keys(process.env)) if (name.startsWith('AGENT_HOOK_WEBHOOK_') || name === 'HOOK_TOKEN') delete process.env[name]
})

const url = (path: string) => `${receiver.url}${path}`
const received = (path: string) => receiver.requests.filter((req) => req.url === path)

let executed = 0
const tools = [defineTool({ name: 'fs/read', execute: ({ path }) => (executed++, `SECRET_CONTENT of ${path}`) })]
/** One tool call through `hooks`; `advanced` adds options (its `hooks` come after these). */
function run(hooks: AgentHook[], advanced: AgentOptions['advanced'] = {}) {
  executed = 0
  return prompt('go', {
    model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'fs/read', input: { path: 'a.txt' } }] }, { text: 'done' }]),
    tools,
    advanced: { ...advanced, hooks: [...hooks, ...((advanced?.hooks as AgentHook[] | undefined) ?? [])] },
  })
}
const control = (type: 'beforeToolCall' | 'afterToolCall', path: string, webhook: Partial<WebhookConfig> = {}, id = `${type}-${path}`): AgentHook => ({
  id,
  type,
  webhook: { url: url(path), responseHandling: 'toolCall', timeout: 0.3, ...webhook },
})

const json = (status: number, body: unknown) => (_req: Recorded, res: ServerResponse) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
const raw = (status: number, body: string | Buffer, headers: Record<string, string> = {}) => (_req: Recorded, res: ServerResponse) => void res.writeHead(status, headers).end(body)

describe('notifications', () => {
  it('sends the event fields, then hookId and hookType, then body (which wins), in that order', async () => {
    let text = ''
    routes['/notify'] = (req, res) => {
      text = JSON.stringify(req.body)
      res.writeHead(204).end()
    }
    await run([{ id: 'audit', type: 'afterToolCall', webhook: { url: url('/notify'), body: { tenant: 'acme', toolName: 'overridden' } } }])
    const payload = JSON.parse(text)
    expect(Object.keys(payload)).toEqual([
      'event', 'sessionId', 'agentPath', 'toolName', 'toolInput', 'toolCallId', 'stepIndex', 'callIndex', 'operationId', 'apiName', 'identifier', 'args',
      'toolOutput', 'result', 'mocked', 'hookId', 'hookType', 'tenant',
    ])
    expect(payload).toMatchObject({ event: 'PostToolUse', toolName: 'overridden', hookId: 'audit', hookType: 'afterToolCall', tenant: 'acme', result: { content: 'SECRET_CONTENT of a.txt', success: true } })
    expect(received('/notify')[0].headers['content-type']).toBe('application/json')
  })

  it('body wins over hookId and hookType too, which keep their place', async () => {
    await run([{ id: 'audit', type: 'afterToolCall', webhook: { url: url('/renamed'), eventFields: ['toolName'], body: { hookType: 'custom', hookId: 'renamed' } } }])
    expect(JSON.stringify(received('/renamed')[0].body)).toBe('{"toolName":"fs/read","hookId":"renamed","hookType":"custom"}')
  })

  it('eventFields selects fields in the listed order', async () => {
    await run([{ id: 'slim', type: 'beforeToolCall', webhook: { url: url('/slim'), eventFields: ['toolName', 'stepIndex', 'notAField'] } }])
    expect(JSON.stringify(received('/slim')[0].body)).toBe('{"toolName":"fs/read","stepIndex":0,"hookId":"slim","hookType":"beforeToolCall"}')
  })

  it('resolves ${VAR} header templates at send time from allowedEnvVars, and an unset one is a delivery error', async () => {
    const hook: AgentHook = { id: 'tok', type: 'onComplete', webhook: { url: url('/tok'), headers: { Authorization: 'Bearer ${HOOK_TOKEN}' }, allowedEnvVars: ['HOOK_TOKEN'] } }
    const agent = await createAgent({ model: scriptedModel([{ text: 'a' }, { text: 'b' }, { text: 'c' }]), advanced: { hooks: [hook] } })
    process.env.HOOK_TOKEN = 'first-secret'
    await (await agent.send('one')).result()
    process.env.HOOK_TOKEN = 'rotated-secret'
    await (await agent.send('two')).result()
    delete process.env.HOOK_TOKEN
    // Unset: the delivery fails (and is logged); the run is not affected.
    expect(await (await agent.send('three')).text()).toBe('c')
    expect(received('/tok').map((req) => req.headers.authorization)).toEqual(['Bearer first-secret', 'Bearer rotated-secret'])
    await agent.close()
  })

  it('ignores what a notification answers, whatever it is', async () => {
    routes['/loud'] = json(200, { decision: 'deny', reason: 'ignored for notifications' })
    const result = await run([{ id: 'n', type: 'beforeToolCall', webhook: { url: url('/loud') } }])
    expect(result.toolCalls[0].status).toBe('success')
    expect(executed).toBe(1)
  })

  it('runs handler then webhook for a hook that has both', async () => {
    const order: string[] = []
    routes['/both'] = (_req, res) => {
      order.push('webhook')
      res.writeHead(204).end()
    }
    await run([{ id: 'both', type: 'afterStep', handler: () => void order.push('handler'), webhook: { url: url('/both') } }])
    expect(order).toEqual(['handler', 'webhook', 'handler', 'webhook'])
  })

  it('after a mock, later handlers do not run but later notifications are still delivered', async () => {
    let laterHandler = 0
    const result = await run([
      { id: 'mock', type: 'beforeToolCall', handler: (event) => void event.mock!('from the fixture') },
      { id: 'later-handler', type: 'beforeToolCall', handler: () => void laterHandler++ },
      { id: 'later-webhook', type: 'beforeToolCall', webhook: { url: url('/after-mock-notify') } },
    ])
    expect(result.toolCalls[0]).toMatchObject({ output: 'from the fixture', mocked: true })
    expect(laterHandler).toBe(0)
    expect(received('/after-mock-notify')).toHaveLength(1)
  })

  it('notifications are awaited within the event\'s hook budget', async () => {
    routes['/slow-notify'] = async (_req, res) => {
      await sleep(500)
      res.writeHead(204).end()
    }
    const error = await run([{ id: 'slow', type: 'UserPromptSubmit', webhook: { url: url('/slow-notify') } }], { hookTimeoutMs: 100 }).catch((e) => e)
    expect(error).toMatchObject({ code: 'HOOK_TIMEOUT', message: 'Hook UserPromptSubmit exceeded 100ms' })
  })

  it('a webhook after the last handler still gets the whole event', async () => {
    const handled: string[] = []
    await run([
      { id: 'first', type: 'afterToolCall', handler: (event) => void handled.push(String(event.toolName)) },
      { id: 'later', type: 'afterToolCall', webhook: { url: url('/later') } },
    ])
    expect(handled).toEqual(['fs/read'])
    expect(received('/later')[0].body).toMatchObject({ event: 'PostToolUse', toolName: 'fs/read', toolInput: { path: 'a.txt' }, hookId: 'later' })
  })
})

describe('result controls: every answer, before and after the tool, under both onError values', () => {
  const respond: Record<string, (req: Recorded, res: ServerResponse) => void | Promise<void>> = {
    '204': raw(204, ''),
    empty: raw(200, ''),
    'non-JSON': raw(200, 'notification accepted'),
    'JSON without decision': json(202, { accepted: true }),
    allow: json(200, { decision: 'allow', reason: 'ignored', updatedInput: { path: 'evil' } }),
    'deny with reason': json(200, { decision: 'deny', reason: '禁止执行该操作' }),
    'deny without reason': json(200, { decision: 'deny' }),
    'deny with empty reason': json(200, { decision: 'deny', reason: '' }),
    'invalid decision': json(200, { decision: 'block' }),
    '500': json(500, { decision: 'allow' }),
    redirect: (_req, res) => void res.writeHead(302, { location: url('/elsewhere') }).end(),
    '64 KiB + 1 byte': raw(200, JSON.stringify({ decision: 'allow', pad: 'x'.repeat(65537 - 29) })),
    'invalid UTF-8': raw(200, Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
    'slow past the timeout': async (_req, res) => {
      await sleep(1500)
      if (!res.destroyed) res.writeHead(200).end(JSON.stringify({ decision: 'allow' }))
    },
  }
  // What each answer does: 'run' (the tool runs), a denial text, or 'error' (onError decides).
  const expected: Record<string, string> = {
    '204': 'run',
    empty: 'run',
    'non-JSON': 'run',
    'JSON without decision': 'run',
    allow: 'run',
    'deny with reason': '禁止执行该操作',
    'deny without reason': 'Blocked by beforeToolCall hook.',
    'deny with empty reason': 'Blocked by beforeToolCall hook.',
    'invalid decision': 'error',
    '500': 'error',
    redirect: 'error',
    '64 KiB + 1 byte': 'error',
    'invalid UTF-8': 'error',
    'slow past the timeout': 'error',
    'connection refused': 'error',
  }
  for (const phase of ['beforeToolCall', 'afterToolCall'] as const) {
    for (const [answer, outcome] of Object.entries(expected)) {
      for (const onError of ['continue', 'block'] as const) {
        it(`${phase}: ${answer}, onError ${onError}`, async () => {
          const path = `/${phase}-${Object.keys(expected).indexOf(answer)}`
          if (respond[answer]) routes[path] = respond[answer]
          const hook = control(phase, path, { onError, ...(answer === 'connection refused' ? { url: 'http://127.0.0.1:9/hook' } : {}) })
          const result = await run([hook])
          const call = result.toolCalls[0]
          const passes = outcome === 'run' || (outcome === 'error' && onError === 'continue')
          // Before: a denial means the tool never ran. After: it ran, and its result is replaced.
          expect(executed).toBe(phase === 'afterToolCall' || passes ? 1 : 0)
          if (passes) {
            expect(call).toMatchObject({ status: 'success', output: 'SECRET_CONTENT of a.txt', input: { path: 'a.txt' } })
          } else if (outcome === 'error') {
            expect(call).toMatchObject({ status: 'error', output: 'hook_control_error', classification: 'hook_control_error' })
          } else {
            expect(call).toMatchObject({ status: 'error', output: outcome.replace('beforeToolCall', phase), classification: 'hook_denied' })
          }
          if (answer !== 'connection refused') expect(received(path)).toHaveLength(1)
        })
      }
    }
  }

  it('the control sees the final input, after PreToolUse rewrites and permission', async () => {
    await run([{ id: 'rewrite', type: 'PreToolUse', handler: () => ({ action: 'continue', modifiedInput: { path: 'rewritten.txt' } }) }, control('beforeToolCall', '/final')], {
      permission: () => ({ behavior: 'allow', updatedInput: { mode: 'ro' } }),
    })
    expect(received('/final')[0].body).toMatchObject({ toolInput: { path: 'rewritten.txt', mode: 'ro' }, hookId: 'beforeToolCall-/final', hookType: 'beforeToolCall' })
  })

  it('does not run for a call that was mocked, skipped or denied', async () => {
    await run([{ id: 'mock', type: 'beforeToolCall', handler: (event) => void event.mock!('mocked') }, control('beforeToolCall', '/never')])
    await run([{ id: 'skip', type: 'PreToolUse', handler: () => ({ action: 'skip' }) }, control('beforeToolCall', '/never')])
    await run([control('beforeToolCall', '/never')], { permission: 'plan' })
    expect(received('/never')).toHaveLength(0)
  })

  it('runs controls in order: allows fall through, the first deny wins, later controls are not asked', async () => {
    routes['/allow'] = json(200, { decision: 'allow' })
    routes['/deny-1'] = json(200, { decision: 'deny', reason: 'first' })
    routes['/deny-2'] = json(200, { decision: 'deny', reason: 'second' })
    const result = await run([control('beforeToolCall', '/allow'), control('beforeToolCall', '/deny-1'), control('beforeToolCall', '/deny-2')])
    expect(result.toolCalls[0].output).toBe('first')
    expect(receiver.requests.map((req) => req.url)).toEqual(['/allow', '/deny-1'])
  })
})

describe('result controls, after the tool', () => {
  it('a denial replaces the result before the model, messages, the stream or any notification sees it', async () => {
    routes['/after'] = json(200, { decision: 'deny', reason: 'result withheld' })
    const failures: unknown[] = []
    let modelSaw: unknown
    const agent = await createAgent({
      model: scriptedModel(({ turn, messages }) => (turn === 1 ? { toolCalls: [{ id: 'c1', name: 'fs/read', input: { path: 'a.txt' } }] } : ((modelSaw = messages.at(-1)), { text: 'ok' }))),
      tools,
      advanced: {
        hooks: [
          control('afterToolCall', '/after'),
          { id: 'notice', type: 'onToolCallError', webhook: { url: url('/notice') } },
          { id: 'local', type: 'PostToolUseFailure', handler: (event) => void failures.push(event.toolOutput) },
        ],
      },
    })
    const response = await agent.send('go')
    const result = await response.result()
    expect(executed).toBe(1)
    expect(result.toolCalls[0]).toMatchObject({ status: 'error', output: 'result withheld', classification: 'hook_denied' })
    expect(modelSaw).toEqual({ role: 'tool', tool_call_id: 'c1', content: 'result withheld' })
    const everything = JSON.stringify([agent.messages, result, received('/notice'), failures])
    for await (const event of response.stream()) expect(JSON.stringify(event)).not.toContain('SECRET_CONTENT')
    expect(everything).not.toContain('SECRET_CONTENT')
    expect(failures).toEqual(['result withheld'])
    // The control itself saw the full result.
    expect(received('/after')[0].body.result).toEqual({ content: 'SECRET_CONTENT of a.txt', success: true })
    await agent.close()
  })

  it('an empty denial reason becomes "Blocked by afterToolCall hook."; errors follow onError', async () => {
    routes['/after-empty'] = json(200, { decision: 'deny' })
    expect((await run([control('afterToolCall', '/after-empty')])).toolCalls[0].output).toBe('Blocked by afterToolCall hook.')
    routes['/after-500'] = json(500, {})
    expect((await run([control('afterToolCall', '/after-500', { onError: 'continue' })])).toolCalls[0].output).toBe('SECRET_CONTENT of a.txt')
    expect((await run([control('afterToolCall', '/after-500', { onError: 'block' })])).toolCalls[0]).toMatchObject({ output: 'hook_control_error', status: 'error' })
  })

  it('a header variable unset at send time is a delivery error of the control: it follows onError', async () => {
    routes['/tok-control'] = json(200, { decision: 'allow' })
    const withToken = (onError: 'block' | 'continue') =>
      control('beforeToolCall', '/tok-control', { onError, headers: { Authorization: 'Bearer ${HOOK_TOKEN}' }, allowedEnvVars: ['HOOK_TOKEN'] })
    const blocked = await run([withToken('block')])
    expect(blocked.toolCalls[0]).toMatchObject({ output: 'hook_control_error', status: 'error' })
    expect(executed).toBe(0)
    const continued = await run([withToken('continue')])
    expect(continued.toolCalls[0]).toMatchObject({ output: 'SECRET_CONTENT of a.txt', status: 'success' })
    expect(executed).toBe(1)
    expect(received('/tok-control')).toHaveLength(0)
  })

  it('a control cancelled by an abort blocks: the tool never runs, even with onError continue', async () => {
    let asked!: () => void
    const waiting = new Promise<void>((resolve) => (asked = resolve))
    let allowed!: () => void
    const answered = new Promise<void>((resolve) => (allowed = resolve))
    routes['/slow-control'] = async (req, res) => {
      asked()
      await sleep(300)
      json(200, { decision: 'allow' })(req, res)
      allowed()
    }
    executed = 0
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ name: 'fs/read', input: { path: 'a' } }] }, { text: 'x' }]),
      tools,
      advanced: { hooks: [control('beforeToolCall', '/slow-control', { onError: 'continue', timeout: 2 })] },
    })
    const response = await agent.send('go')
    await waiting
    const reason = new Error('stopped while asking')
    agent.abort(reason)
    await expect(response.result()).rejects.toBe(reason)
    // The control's allow arrives after the abort; give it a moment to (wrongly) start the tool.
    await answered
    await sleep(20)
    expect(executed).toBe(0)
    await agent.close()
  })

  it('also controls mocked results', async () => {
    routes['/after-mock'] = json(200, { decision: 'deny', reason: 'no mocks today' })
    const result = await run([{ id: 'mock', type: 'beforeToolCall', handler: (event) => void event.mock!('mocked') }, control('afterToolCall', '/after-mock')])
    expect(result.toolCalls[0]).toMatchObject({ output: 'no mocks today', mocked: true })
  })
})

describe('the whole pipeline', () => {
  it('runs every stage of a run in the contract order', async () => {
    const order: string[] = []
    const note = (stage: string) => () => (order.push(stage), { action: 'continue' as const })
    const answer = (stage: string) => (req: Recorded, res: ServerResponse) => (order.push(stage), json(200, { decision: 'allow' })(req, res))
    routes['/order-before'] = answer('before-control')
    routes['/order-after'] = answer('after-control')
    await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'fs/read', input: { path: 'a' } }] }, { text: 'done' }]),
      tools: [defineTool({ name: 'fs/read', execute: () => (order.push('execute'), 'read') })],
      advanced: {
        permission: () => (order.push('permission'), 'allow'),
        hooks: [
          { id: 'prompt', type: 'UserPromptSubmit', handler: note('UserPromptSubmit') },
          { id: 'step-start', type: 'beforeStep', handler: note('StepStart') },
          { id: 'pre', type: 'beforeToolCall', handler: note('PreToolUse') },
          { id: 'ask', type: 'PermissionRequest', handler: note('PermissionRequest') },
          control('beforeToolCall', '/order-before'),
          control('afterToolCall', '/order-after'),
          { id: 'post', type: 'afterToolCall', handler: note('PostToolUse') },
          { id: 'step-end', type: 'afterStep', handler: note('StepEnd') },
          { id: 'done', type: 'onComplete', handler: note('TaskCompleted') },
        ],
      },
    })
    expect(order).toEqual([
      'UserPromptSubmit',
      'StepStart',
      'PreToolUse',
      'PermissionRequest',
      'permission',
      'before-control',
      'execute',
      'after-control',
      'PostToolUse',
      'StepEnd',
      'StepStart',
      'StepEnd',
      'TaskCompleted',
    ])
  })
})

describe('environment hooks', () => {
  it('run after the caller hooks, send the token as a bearer, and are read at each send', async () => {
    routes['/caller'] = json(200, { decision: 'allow' })
    routes['/env'] = json(200, { decision: 'deny', reason: 'env says no' })
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ name: 'fs/read', input: { path: 'a' } }] }, { text: 'x' }, { toolCalls: [{ name: 'fs/read', input: { path: 'b' } }] }, { text: 'y' }]),
      tools,
      advanced: { hooks: [control('beforeToolCall', '/caller')] },
    })
    Object.assign(process.env, { AGENT_HOOK_WEBHOOK_URL: url('/env'), AGENT_HOOK_WEBHOOK_TOKEN: 'env-secret', AGENT_HOOK_WEBHOOK_EVENTS: 'beforeToolCall, afterStep', AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING: 'toolCall' })
    const first = await (await agent.send('one')).result()
    expect(first.toolCalls[0].output).toBe('env says no')
    const order = receiver.requests.map((req) => req.url)
    expect(order.slice(0, 2)).toEqual(['/caller', '/env'])
    const envRequests = received('/env')
    expect(envRequests[0].headers.authorization).toBe('Bearer env-secret')
    expect(envRequests[0].body).toMatchObject({ hookId: 'env-webhook:beforeToolCall', hookType: 'beforeToolCall' })
    expect(envRequests.some((req) => req.body.hookType === 'afterStep')).toBe(true)
    // Removed from the environment: the next run has no environment hook.
    delete process.env.AGENT_HOOK_WEBHOOK_URL
    receiver.requests.length = 0
    const second = await (await agent.send('two')).result()
    expect(second.toolCalls[0].status).toBe('success')
    expect(received('/env')).toHaveLength(0)
    await agent.close()
  })

  it('apply to runs, not to SessionStart or SessionEnd', async () => {
    Object.assign(process.env, { AGENT_HOOK_WEBHOOK_URL: url('/env-life'), AGENT_HOOK_WEBHOOK_TOKEN: 't', AGENT_HOOK_WEBHOOK_EVENTS: 'SessionStart, SessionEnd, afterStep' })
    const agent = await createAgent({ model: scriptedModel([{ text: 'x' }]) })
    await (await agent.send('go')).result()
    await agent.close()
    expect(received('/env-life').map((req) => req.body.event)).toEqual(['StepEnd'])
  })

  it('an invalid environment fails the run with a ConfigError naming the variable, never its value', async () => {
    Object.assign(process.env, { AGENT_HOOK_WEBHOOK_URL: url('/env'), AGENT_HOOK_WEBHOOK_TOKEN: 'super-secret-token', AGENT_HOOK_WEBHOOK_EVENTS: 'afterStep', AGENT_HOOK_WEBHOOK_ON_ERROR: 'super-secret-token' })
    const error = await run([]).catch((e) => e)
    expect(error).toBeInstanceOf(ConfigError)
    expect(error.message).toBe('Invalid agent hook environment: AGENT_HOOK_WEBHOOK_ON_ERROR must be continue or block')
    expect(JSON.stringify(error)).not.toContain('super-secret')
  })
})

describe('critical delivery', () => {
  it('a failing fallback:none webhook throws CriticalHookDeliveryError after its siblings ran', async () => {
    routes['/down'] = json(503, {})
    const agent = await createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: {
        hooks: [
          { id: 'critical', type: 'UserPromptSubmit', webhook: { url: url('/down'), fallback: 'none', headers: { 'x-key': '${HOOK_TOKEN}' }, allowedEnvVars: ['HOOK_TOKEN'] } },
          { id: 'sibling', type: 'UserPromptSubmit', webhook: { url: url('/sibling') } },
        ],
      },
    })
    process.env.HOOK_TOKEN = 'never-show-me'
    const error = await (await agent.send('go')).text().catch((e) => e)
    expect(error).toBeInstanceOf(CriticalHookDeliveryError)
    expect(error).toMatchObject({ code: 'CRITICAL_HOOK_DELIVERY', hookId: 'critical', message: 'Critical webhook delivery failed: critical' })
    expect(error.cause.message).toBe('Hook HTTP request failed: http_error (status 503)')
    expect(received('/sibling')).toHaveLength(1)
    expect(JSON.stringify([error, error.cause.message, agent.messages])).not.toContain('never-show-me')
    await agent.close()
  })

  it('when two critical webhooks fail, the error names the first; both were tried', async () => {
    routes['/down-1'] = json(503, {})
    routes['/down-2'] = json(503, {})
    const error = await run([
      { id: 'c1', type: 'UserPromptSubmit', webhook: { url: url('/down-1'), fallback: 'none' } },
      { id: 'c2', type: 'UserPromptSubmit', webhook: { url: url('/down-2'), fallback: 'none' } },
    ]).catch((e) => e)
    expect(error).toBeInstanceOf(CriticalHookDeliveryError)
    expect(error).toMatchObject({ hookId: 'c1', message: 'Critical webhook delivery failed: c1' })
    expect([received('/down-1').length, received('/down-2').length]).toEqual([1, 1])
  })

  it('a failing critical webhook on a lifecycle event fails the run with CriticalHookDeliveryError', async () => {
    routes['/step-down'] = json(503, {})
    const error = await run([{ id: 'crit-step', type: 'afterStep', webhook: { url: url('/step-down'), fallback: 'none' } }]).catch((e) => e)
    expect(error).toBeInstanceOf(CriticalHookDeliveryError)
    expect(error).toMatchObject({ hookId: 'crit-step', message: 'Critical webhook delivery failed: crit-step' })
  })

  it('a failing ordinary webhook on a lifecycle event is logged and the run goes on', async () => {
    const result = await run([{ id: 'gone', type: 'afterStep', webhook: { url: 'http://127.0.0.1:9/gone' } }])
    expect(result.content).toBe('done')
  })

  it('a critical webhook that fails on a tool event fails the call', async () => {
    routes['/tool-down'] = json(500, {})
    const result = await run([{ id: 'crit-tool', type: 'beforeToolCall', webhook: { url: url('/tool-down'), fallback: 'none' } }])
    expect(result.toolCalls[0]).toMatchObject({ status: 'error', output: 'Tool execution failed: Critical webhook delivery failed: crit-tool' })
    expect(executed).toBe(0)
  })
})
