// Approvals across the agent tree (SPEC §8.7), written from the contract as the person deciding,
// the integrator wiring a sub-agent that must ask, and the relay that would like to steer an
// approval: an 'ask' at any depth pauses the whole tree; pendingApprovals and
// HumanInterventionRequest list every waiting call in tree order with agentPath and
// parentToolCallId; one decision decides one call; resume continues every child where it stood
// (nothing runs twice, no child model is asked its first turn again); reject with stop ends only
// that child; signed tokens bind the call's place in the tree; the paused tree survives the process
// on SQLite (and PostgreSQL when a server answers).
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import {
  approvalToken,
  createAgent,
  defineTool,
  scriptedModel,
  type AgentHook,
  type AgentOptions,
  type AgentResponse,
  type HookEventPayload,
  type JsonObject,
  type PendingApproval,
  type ScriptedToolCall,
  type StreamEvent,
} from '../index.js'
import { fingerprintOf, tokenOf, treeTokenOf } from './helpers/canonical.js'
import { childEnv, runScript } from './helpers/child.js'
import { DEFAULT_LEASE_TTL_MS } from './helpers/durable.js'
import { scratchDatabase } from './helpers/postgres.js'

const ran: string[] = []
beforeEach(() => {
  ran.length = 0
})
const tools = [
  defineTool<{ command: string }>({
    name: 'Bash',
    description: 'Runs a command',
    parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    kind: 'execute',
    execute: ({ command }) => (ran.push(command), `ran ${command}`),
  }),
  defineTool<{ file: string }>({
    name: 'Read',
    description: 'Reads a file',
    parameters: { type: 'object', properties: { file: { type: 'string' } }, required: ['file'] },
    kind: 'readonly',
    execute: ({ file }) => (ran.push(`read ${file}`), `read ${file}`),
  }),
]
const agents = {
  worker: { description: 'Does the work', systemPrompt: 'You are worker' },
  manager: { description: 'Delegates', systemPrompt: 'You are manager' },
}
const task = (id: string, subagent_type: string, prompt: string): ScriptedToolCall => ({ id, name: 'Task', input: { subagent_type, prompt } })
const bash = (id: string, command: string): ScriptedToolCall => ({ id, name: 'Bash', input: { command } })
const read = (id: string, file: string): ScriptedToolCall => ({ id, name: 'Read', input: { file } })

/**
 * One model for the whole tree. Each agent is told apart by its system prompt and (for a child)
 * its prompt: `plan['worker:near']` is what a worker asked to do "near" calls. An agent calls its
 * plan's next step when the last user message has no answer yet or when its last results came
 * back and steps are left; otherwise it answers with the results it was shown.
 */
function treeModel(plan: Record<string, ScriptedToolCall[][]>) {
  const asked: string[] = []
  const requests: Array<{ key: string; messages: any[] }> = []
  const model = scriptedModel((request) => {
    const system = request.messages[0]?.role === 'system' ? String(request.messages[0].content) : ''
    const who = system.startsWith('You are ') ? system.slice('You are '.length) : 'root'
    const prompt = String(request.messages.find((message) => message.role === 'user')?.content ?? '')
    const key = who === 'root' ? 'root' : `${who}:${prompt}`
    asked.push(key)
    requests.push({ key, messages: structuredClone(request.messages) })
    const turns = request.messages.filter((message) => message.role === 'assistant').length
    const steps = plan[key] ?? []
    const last = request.messages[request.messages.length - 1]
    const results = request.messages.slice(request.messages.map((message) => message.role).lastIndexOf('assistant') + 1).filter((message) => message.role === 'tool')
    if (turns < steps.length && (turns === 0 || last?.role === 'tool')) return { toolCalls: steps[turns]! }
    return { text: `${key} saw: ${results.map((message) => `${message.tool_call_id}=${String(message.content)}`).join(' | ')}` }
  })
  return { model, asked, requests }
}

function recorder() {
  const fired: Array<{ type: string; payload: Record<string, any> }> = []
  const keep = (type: string) => (event: HookEventPayload) => {
    const { abortSignal: _signal, mock: _mock, ...rest } = event as any
    fired.push({ type, payload: structuredClone(rest) })
  }
  const hooks: AgentHook[] = [
    { id: 'request', type: 'beforeHumanIntervention', handler: keep('HumanInterventionRequest') },
    { id: 'result', type: 'afterHumanIntervention', handler: keep('HumanInterventionResult') },
    { id: 'stop', type: 'onStopByHumanIntervention', handler: keep('HumanInterventionStop') },
    { id: 'start', type: 'beforeCallAgent', handler: keep('SubagentStart') },
  ]
  return { hooks, of: (type: string) => fired.filter((entry) => entry.type === type).map((entry) => entry.payload) }
}

async function drain(response: AgentResponse) {
  const events: StreamEvent[] = []
  for await (const event of response.stream()) events.push(event)
  return { events, result: await response.result() }
}
const toolResults = (events: StreamEvent[]) => events.filter((event): event is Extract<StreamEvent, { type: 'tool_result' }> => event.type === 'tool_result')
async function expectCode(promise: Promise<unknown>, code: string, message?: string) {
  const error: any = await promise.then(
    () => undefined,
    (failure) => failure,
  )
  expect(error, `expected a rejection with ${code}`).toBeDefined()
  expect(error.code).toBe(code)
  if (message !== undefined) expect(error.message).toBe(message)
}
const entry = (toolCallId: string, command: string, agentPath: string[], parentToolCallId?: string): PendingApproval => ({
  toolCallId,
  toolName: 'Bash',
  input: { command },
  fingerprint: fingerprintOf('Bash', { command }),
  reason: 'ask',
  agentPath,
  ...(parentToolCallId ? { parentToolCallId } : {}),
})
const REJECTED = (reason: string) => `Tool execution aborted: User rejected execution: ${reason}`

function options(model: AgentOptions['model'], extra: Partial<NonNullable<AgentOptions['advanced']>> = {}, hooks: AgentHook[] = []): AgentOptions {
  return { model, tools, advanced: { agents, permission: 'default', hooks, ...extra } }
}

describe('an ask inside a sub-agent pauses the whole tree', () => {
  it('depth 1: the child finishes its turn’s other calls and pauses, the root’s other call finishes, the root settles interrupted with the child’s call', async () => {
    const { model, asked, requests } = treeModel({
      root: [[task('task-1', 'worker', 'near'), read('r-read', 'root.txt')]],
      'worker:near': [[bash('w-bash', 'deploy near'), read('w-read', 'near.txt')]],
    })
    const recorded = recorder()
    const agent = await createAgent(options(model, {}, recorded.hooks))
    const first = await drain(await agent.send('go'))
    expect(first.result.stopReason).toBe('interrupted')
    expect(first.result.pendingApprovals).toEqual([entry('w-bash', 'deploy near', ['worker'], 'task-1')])
    expect(agent.pendingApprovals).toEqual(first.result.pendingApprovals)
    // The child's Read and the root's Read ran; the asked-about Bash did not.
    expect(ran.sort()).toEqual(['read near.txt', 'read root.txt'])
    expect(recorded.of('HumanInterventionRequest')).toEqual([
      expect.objectContaining({
        pendingTools: [{ toolCallId: 'w-bash', toolName: 'Bash', apiName: 'Bash', identifier: '', input: { command: 'deploy near' }, agentPath: ['worker'], parentToolCallId: 'task-1' }],
      }),
    ])
    // The waiting Task call is no entry of its own, and nothing can be sent meanwhile.
    await expectCode(agent.approve('task-1'), 'APPROVAL_NOT_PENDING')
    await expectCode(agent.send('hello?'), 'APPROVALS_PENDING')

    ran.length = 0
    await agent.approve('w-bash')
    expect(agent.pendingApprovals).toEqual([])
    const resumed = await drain(await agent.resume())
    expect(ran).toEqual(['deploy near'])
    expect(resumed.result.stopReason).toBe('done')
    expect(resumed.result.content).toBe('root saw: task-1=worker:near saw: w-bash=ran deploy near | w-read=read near.txt | r-read=read root.txt')
    // Nobody's first turn was asked again; the child started once.
    expect(asked).toEqual(['root', 'worker:near', 'worker:near', 'root'])
    expect(recorded.of('SubagentStart')).toHaveLength(1)
    // The child went on with its own conversation: its results in call order after its turn.
    const childAgain = requests[2]!.messages.filter((message) => message.role !== 'system')
    expect(childAgain.map((message) => [message.role, message.tool_call_id ?? null])).toEqual([
      ['user', null],
      ['assistant', null],
      ['tool', 'w-bash'],
      ['tool', 'w-read'],
    ])
    expect(recorded.of('HumanInterventionResult')).toEqual([
      expect.objectContaining({ action: 'approve', toolCallId: 'w-bash', toolName: 'Bash', agentPath: ['worker'], parentToolCallId: 'task-1' }),
    ])
    // The resumed stream shows the child's result with its place, then the Task call's own.
    expect(toolResults(resumed.events).map((event) => [event.id, event.agentPath ?? null])).toEqual([
      ['w-bash', ['worker']],
      ['task-1', null],
    ])
    await agent.close()
  })

  it('depth 2 beside a sibling child and the root’s own call: tree order, one decision per call, every call run once', async () => {
    const { model, asked } = treeModel({
      root: [[task('task-1', 'manager', 'plan'), task('task-2', 'worker', 'near'), bash('r-bash', 'root deploy')]],
      'manager:plan': [[task('m-task', 'worker', 'deep')]],
      'worker:deep': [[bash('wd-bash', 'deploy deep')]],
      'worker:near': [[bash('wn-bash', 'deploy near')]],
    })
    const recorded = recorder()
    const agent = await createAgent(options(model, {}, recorded.hooks))
    const first = await drain(await agent.send('go'))
    expect(first.result.pendingApprovals).toEqual([
      entry('wd-bash', 'deploy deep', ['manager', 'worker'], 'm-task'),
      entry('wn-bash', 'deploy near', ['worker'], 'task-2'),
      entry('r-bash', 'root deploy', []),
    ])
    expect(recorded.of('HumanInterventionRequest')).toHaveLength(1)
    expect(recorded.of('HumanInterventionRequest')[0]!.pendingTools.map((tool: any) => [tool.toolCallId, tool.agentPath, tool.parentToolCallId ?? null])).toEqual([
      ['wd-bash', ['manager', 'worker'], 'm-task'],
      ['wn-bash', ['worker'], 'task-2'],
      ['r-bash', [], null],
    ])
    expect(ran).toEqual([])
    // One decision decides one call: the others still wait, and resume says which.
    await agent.approve('wn-bash')
    expect(agent.pendingApprovals.map((approval) => approval.toolCallId)).toEqual(['wd-bash', 'r-bash'])
    await expectCode(agent.resume(), 'APPROVALS_PENDING', 'Approvals are pending for tool calls wd-bash, r-bash: approve or reject each before resume()')
    await expectCode(agent.approve('m-task'), 'APPROVAL_NOT_PENDING')
    await expectCode(agent.approve('wn-bash'), 'APPROVAL_NOT_PENDING')
    await agent.approve('wd-bash')
    await agent.reject('r-bash', { reason: 'not the root' })
    const resumed = await drain(await agent.resume())
    expect(ran.sort()).toEqual(['deploy deep', 'deploy near'])
    expect(resumed.result.content).toBe(
      `root saw: task-1=manager:plan saw: m-task=worker:deep saw: wd-bash=ran deploy deep | task-2=worker:near saw: wn-bash=ran deploy near | r-bash=${REJECTED('not the root')}`,
    )
    expect(asked.filter((key) => key !== 'root').sort()).toEqual(['manager:plan', 'manager:plan', 'worker:deep', 'worker:deep', 'worker:near', 'worker:near'])
    expect(recorded.of('SubagentStart')).toHaveLength(3)
    await agent.close()
  })

  it('a child that asks again after its resume pauses the tree again; its second call needs its own decision', async () => {
    const { model, asked } = treeModel({
      root: [[task('task-1', 'worker', 'twice')]],
      'worker:twice': [[bash('w-1', 'first')], [bash('w-2', 'second')]],
    })
    const agent = await createAgent(options(model))
    await drain(await agent.send('go'))
    await agent.approve('w-1')
    const again = await drain(await agent.resume())
    expect(again.result.stopReason).toBe('interrupted')
    expect(again.result.pendingApprovals).toEqual([entry('w-2', 'second', ['worker'], 'task-1')])
    expect(ran).toEqual(['first'])
    await agent.approve('w-2')
    const done = await drain(await agent.resume())
    expect(ran).toEqual(['first', 'second'])
    expect(done.result.content).toBe('root saw: task-1=worker:twice saw: w-2=ran second')
    expect(asked).toEqual(['root', 'worker:twice', 'worker:twice', 'worker:twice', 'root'])
    await agent.close()
  })

  it('reject with stop inside a child ends that child there; its Task call fails with the stop text and the root goes on', async () => {
    const { model, asked } = treeModel({
      root: [[task('task-1', 'worker', 'near')]],
      'worker:near': [[bash('w-bash', 'deploy near'), read('w-read', 'near.txt')]],
    })
    const recorded = recorder()
    const agent = await createAgent(options(model, {}, recorded.hooks))
    await drain(await agent.send('go'))
    await agent.reject('w-bash', { reason: 'not today', stop: true })
    const resumed = await drain(await agent.resume())
    expect(ran).toEqual(['read near.txt'])
    // The child's model was not called again; the root's was, and saw the failed Task call.
    expect(asked).toEqual(['root', 'worker:near', 'root'])
    expect(resumed.result.stopReason).toBe('done')
    expect(resumed.result.content).toBe(`root saw: task-1=${REJECTED('not today')}`)
    const taskResult = toolResults(resumed.events).find((event) => event.id === 'task-1')!
    expect([taskResult.output, taskResult.isError]).toEqual([REJECTED('not today'), true])
    expect(recorded.of('HumanInterventionStop')).toEqual([expect.objectContaining({ toolCallId: 'w-bash', agentPath: ['worker'], parentToolCallId: 'task-1' })])
    expect(recorded.of('HumanInterventionResult')).toEqual([])
    await agent.close()
  })

  it('an abort while the tree is paused changes nothing: entries and decisions stay, and resume continues it', async () => {
    const { model } = treeModel({
      root: [[task('t-a', 'worker', 'a'), task('t-b', 'worker', 'b')]],
      'worker:a': [[bash('wa', 'a')]],
      'worker:b': [[bash('wb', 'b')]],
    })
    const agent = await createAgent(options(model))
    await drain(await agent.send('go'))
    await agent.approve('wa')
    agent.abort()
    expect(agent.pendingApprovals).toEqual([entry('wb', 'b', ['worker'], 't-b')])
    await agent.approve('wb')
    const resumed = await drain(await agent.resume())
    expect(ran.sort()).toEqual(['a', 'b'])
    expect(resumed.result.content).toBe('root saw: t-a=worker:a saw: wa=ran a | t-b=worker:b saw: wb=ran b')
    await agent.close()
  })
})

describe('signed approvals bind the call’s place in the tree (as the relay who would move them)', () => {
  const secret = 'tree-secret'
  it('each child’s token is HMAC over [sessionId, agentPath, toolCallId, fingerprint]; none moves to a sibling, the root form or another input', async () => {
    const { model } = treeModel({
      root: [[task('t-a', 'worker', 'a'), task('t-b', 'worker', 'b'), bash('r-bash', 'root')]],
      'worker:a': [[bash('wa', 'a')]],
      'worker:b': [[bash('wb', 'b')]],
    })
    const agent = await createAgent(options(model, { approvalSecret: secret }))
    const first = await drain(await agent.send('go'))
    const [wa, wb, root] = first.result.pendingApprovals!
    expect(wa!.token).toBe(treeTokenOf(secret, agent.sessionId, ['worker'], 'wa', fingerprintOf('Bash', { command: 'a' })))
    expect(wb!.token).toBe(treeTokenOf(secret, agent.sessionId, ['worker'], 'wb', fingerprintOf('Bash', { command: 'b' })))
    // The root's own call keeps the three-element form, so tokens issued before stay valid.
    expect(root!.token).toBe(tokenOf(secret, agent.sessionId, 'r-bash', fingerprintOf('Bash', { command: 'root' })))
    await expectCode(agent.approve('wb', { token: wa!.token! }), 'APPROVAL_TOKEN_INVALID')
    await expectCode(agent.approve('wa', { token: tokenOf(secret, agent.sessionId, 'wa', wa!.fingerprint) }), 'APPROVAL_TOKEN_INVALID')
    await expectCode(agent.approve('wa', { token: treeTokenOf(secret, agent.sessionId, ['manager', 'worker'], 'wa', wa!.fingerprint) }), 'APPROVAL_TOKEN_INVALID')
    await expectCode(agent.approve('wa', { token: wa!.token!, updatedInput: { command: 'rm -rf /' } }), 'APPROVAL_TOKEN_INVALID')
    await expectCode(agent.approve('wa'), 'APPROVAL_TOKEN_INVALID')
    expect(agent.pendingApprovals.map((approval) => approval.toolCallId)).toEqual(['wa', 'wb', 'r-bash'])
    // Whoever holds the secret may change the input, at the call's place.
    const safer = approvalToken({ secret, sessionId: agent.sessionId, toolCallId: 'wa', toolName: 'Bash', input: { command: 'a, safely' }, agentPath: ['worker'] })
    await agent.approve('wa', { token: safer, updatedInput: { command: 'a, safely' } })
    await agent.approve('wb', { token: wb!.token! })
    await agent.approve('r-bash', { token: root!.token! })
    const resumed = await drain(await agent.resume())
    expect(ran.sort()).toEqual(['a, safely', 'b', 'root'])
    expect(resumed.result.stopReason).toBe('done')
    await agent.close()
  })

  it('approvalToken refuses an agentPath that is not an array of strings', () => {
    const made = () => approvalToken({ secret, sessionId: 's', toolCallId: 'c', toolName: 'Bash', input: {}, agentPath: 'worker' as any })
    expect(made).toThrow(expect.objectContaining({ code: 'INVALID_INPUT', message: expect.stringContaining('agentPath must be an array of strings') }))
  })
})

// ---------------------------------------------------------------------------------------------
// Durable: a paused tree stored by one process, listed, decided and resumed by another.
const entryPoint = join(__dirname, '..', 'index.js')
/** The children's claim on a session (`advanced.leaseTtlMs`), the durable tests' own: a killed
 * child's has expired this long after it died. */
const LEASE_TTL_MS = DEFAULT_LEASE_TTL_MS
const CHILD = String.raw`
const { createAgent, resumeAgent, defineTool, scriptedModel } = require(process.env.ENTRY)
const fs = require('node:fs')
const emit = (tag, value) => process.stdout.write(tag + ' ' + JSON.stringify(value) + '\n')
const plan = process.env.PLAN ? JSON.parse(process.env.PLAN) : {
  root: [[{ id: 'task-1', name: 'Task', input: { subagent_type: 'manager', prompt: 'plan' } }, { id: 'r-read', name: 'Read', input: { file: 'root.txt' } }]],
  'manager:plan': [[{ id: 'm-task', name: 'Task', input: { subagent_type: 'worker', prompt: 'deep' } }]],
  'worker:deep': [[{ id: 'wd-bash', name: 'Bash', input: { command: 'deploy deep' } }, { id: 'wd-read', name: 'Read', input: { file: 'deep.txt' } }]],
}
const model = scriptedModel((request) => {
  const system = request.messages[0] && request.messages[0].role === 'system' ? String(request.messages[0].content) : ''
  const who = system.startsWith('You are ') ? system.slice(8) : 'root'
  const prompt = String((request.messages.find((m) => m.role === 'user') || {}).content || '')
  const key = who === 'root' ? 'root' : who + ':' + prompt
  fs.appendFileSync(process.env.EFFECTS, JSON.stringify({ asked: key }) + '\n')
  const turns = request.messages.filter((m) => m.role === 'assistant').length
  const steps = plan[key] || []
  const last = request.messages[request.messages.length - 1]
  if (turns < steps.length && (turns === 0 || last.role === 'tool')) return { toolCalls: steps[turns] }
  const results = request.messages.slice(request.messages.map((m) => m.role).lastIndexOf('assistant') + 1).filter((m) => m.role === 'tool')
  return { text: key + ' saw: ' + results.map((m) => m.tool_call_id + '=' + m.content).join(' | ') }
})
const effect = (name, value) => fs.appendFileSync(process.env.EFFECTS, JSON.stringify({ [name]: value }) + '\n')
const tools = [
  defineTool({ name: 'Bash', kind: 'execute', execute: ({ command }) => (effect('ran', command), 'ran ' + command) }),
  defineTool({ name: 'Read', kind: 'readonly', execute: ({ file }) => (effect('ran', 'read ' + file), 'read ' + file) }),
  // Allowed without asking, and not safe to run twice: after a crash its outcome is unknown.
  defineTool({
    name: 'Charge',
    kind: 'readonly',
    sideEffect: 'non_idempotent',
    execute: async ({ amount }) => {
      effect('ran', 'charge ' + amount)
      if (process.env.HANG) { emit('STARTED', amount); await new Promise(() => setInterval(() => {}, 1 << 30)) }
      return 'charged ' + amount
    },
  }),
]
const options = {
  model,
  tools,
  advanced: {
    permission: 'default',
    approvalSecret: 'durable-secret',
    leaseTtlMs: ${LEASE_TTL_MS},
    store: process.env.PG ? { postgres: process.env.PG } : { sqlite: process.env.DB },
    agents: {
      worker: { description: 'Does the work', systemPrompt: 'You are worker' },
      manager: { description: 'Delegates', systemPrompt: 'You are manager' },
    },
  },
}
;(async () => {
  if (process.env.STEP === 'pause') {
    const agent = await createAgent(options)
    effect('session', agent.sessionId)
    const result = await (await agent.send('go')).result()
    emit('SESSION', agent.sessionId)
    emit('RESULT', result)
    await agent.close()
  } else {
    const agent = await resumeAgent({ ...options, sessionId: process.env.SESSION })
    const pending = agent.pendingApprovals
    emit('PENDING', pending)
    for (const approval of pending) await agent.approve(approval.toolCallId, { token: approval.token })
    const result = await (await agent.resume()).result()
    emit('RESULT', result)
    await agent.close()
  }
})().catch((error) => { emit('FAILED', { code: error.code, message: error.message }); process.exitCode = 1 })
`

/** Runs CHILD and SIGKILLs it once it prints `tag`; whether it was killed there. */
function killedWhen(tag: string, env: Record<string, string>): Promise<boolean> {
  return new Promise((done) => {
    const child = spawn(process.execPath, ['-e', CHILD], { env: childEnv({ ...env, ENTRY: entryPoint }), stdio: ['ignore', 'pipe', 'inherit'] })
    let seen = ''
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000)
    child.stdout.on('data', (chunk) => {
      seen += chunk
      if (seen.split('\n').some((line) => line.startsWith(`${tag} `))) child.kill('SIGKILL')
    })
    child.on('exit', (_code, signal) => {
      clearTimeout(timer)
      done(signal === 'SIGKILL' && seen.includes(`${tag} `))
    })
  })
}
const sessionOf = (logged: any[]) => logged.find((line) => line.session)?.session

function lines(stdout: string, tag: string) {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith(`${tag} `))
    .map((line) => JSON.parse(line.slice(tag.length + 1)))
}

async function pauseThenResumeElsewhere(store: Record<string, string>, dir: string) {
  const effects = join(dir, 'effects.jsonl')
  const env = { ...store, EFFECTS: effects }
  const a = await runScript(CHILD, { env: { ...env, STEP: 'pause' }, timeoutMs: 20_000 })
  expect(a.code, `${a.stdout}\n${a.stderr}`).toBe(0)
  const [sessionId] = lines(a.stdout, 'SESSION')
  const [paused] = lines(a.stdout, 'RESULT')
  const b = await runScript(CHILD, { env: { ...env, STEP: 'resume', SESSION: sessionId }, timeoutMs: 20_000 })
  expect(b.code, `${b.stdout}\n${b.stderr}`).toBe(0)
  const logged = readFileSync(effects, 'utf8').trim().split('\n').map((line) => JSON.parse(line))
  return { sessionId, paused, pending: lines(b.stdout, 'PENDING')[0], resumed: lines(b.stdout, 'RESULT')[0], logged }
}

function expectTreeResumedOnce(outcome: Awaited<ReturnType<typeof pauseThenResumeElsewhere>>) {
  const { sessionId, paused, pending, resumed, logged } = outcome
  const fingerprint = fingerprintOf('Bash', { command: 'deploy deep' })
  expect(paused.stopReason).toBe('interrupted')
  expect(paused.pendingApprovals).toEqual([
    {
      toolCallId: 'wd-bash',
      toolName: 'Bash',
      input: { command: 'deploy deep' },
      fingerprint,
      reason: 'ask',
      agentPath: ['manager', 'worker'],
      parentToolCallId: 'm-task',
      token: treeTokenOf('durable-secret', sessionId, ['manager', 'worker'], 'wd-bash', fingerprint),
    },
  ])
  // Another process lists the same entries, same order, same tokens.
  expect(pending).toEqual(paused.pendingApprovals)
  expect(resumed.stopReason).toBe('done')
  expect(resumed.content).toBe('root saw: task-1=manager:plan saw: m-task=worker:deep saw: wd-bash=ran deploy deep | wd-read=read deep.txt | r-read=read root.txt')
  // Every call ran exactly once across both processes; nobody's first turn was asked again.
  expect(logged.filter((line) => line.ran).map((line) => line.ran).sort()).toEqual(['deploy deep', 'read deep.txt', 'read root.txt'])
  expect(logged.filter((line) => line.asked).map((line) => line.asked)).toEqual(['root', 'manager:plan', 'worker:deep', 'worker:deep', 'manager:plan', 'root'])
}

describe('a paused tree survives the process', () => {
  const dirs: string[] = []
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'arh-tree-'))
    dirs.push(dir)
    return dir
  }

  it('SQLite: paused in one process, listed, approved with its tokens and resumed in another; every call runs once', async () => {
    const dir = tempDir()
    expectTreeResumedOnce(await pauseThenResumeElsewhere({ DB: join(dir, 'tree.db') }, dir))
    expect(existsSync(join(dir, 'tree.db'))).toBe(true)
  }, 60_000)

  it('a crash inside a sub-agent surfaces the sub-agent’s call as outcome_unknown, never the Task call; its finished turn is not asked again', async () => {
    const dir = tempDir()
    const effects = join(dir, 'effects.jsonl')
    const plan = {
      root: [[task('task-1', 'worker', 'deep')]],
      'worker:deep': [[read('w-read', 'deep.txt')], [{ id: 'w-charge', name: 'Charge', input: { amount: 5 } }]],
    }
    const env = { DB: join(dir, 'tree.db'), EFFECTS: effects, PLAN: JSON.stringify(plan) }
    const logged = () => readFileSync(effects, 'utf8').trim().split('\n').map((line) => JSON.parse(line))
    // Process A: killed while the sub-agent's Charge runs (started, not finished).
    const killed = await killedWhen('STARTED', { ...env, STEP: 'pause', HANG: '1' })
    expect(killed, 'the child was killed at STARTED').toBe(true)
    expect(logged().filter((line) => line.ran).map((line) => line.ran)).toEqual(['read deep.txt', 'charge 5'])
    await new Promise((done) => setTimeout(done, LEASE_TTL_MS + 100)) // its claim expires
    const b = await runScript(CHILD, { env: { ...env, STEP: 'resume', SESSION: sessionOf(logged()) }, timeoutMs: 20_000 })
    expect(b.code, `${b.stdout}\n${b.stderr}`).toBe(0)
    const [pending] = lines(b.stdout, 'PENDING')
    const fingerprint = fingerprintOf('Charge', { amount: 5 })
    expect(pending).toEqual([
      {
        toolCallId: 'w-charge',
        toolName: 'Charge',
        input: { amount: 5 },
        fingerprint,
        reason: 'outcome_unknown',
        agentPath: ['worker'],
        parentToolCallId: 'task-1',
        token: treeTokenOf('durable-secret', sessionOf(logged()), ['worker'], 'w-charge', fingerprint),
      },
    ])
    // Approving it runs it again (the person decided); the Read before it does not run again,
    // and the sub-agent's first two model turns are not asked again.
    const [resumed] = lines(b.stdout, 'RESULT')
    expect(resumed.stopReason).toBe('done')
    expect(resumed.content).toBe('root saw: task-1=worker:deep saw: w-charge=charged 5')
    expect(logged().filter((line) => line.ran).map((line) => line.ran)).toEqual(['read deep.txt', 'charge 5', 'charge 5'])
    expect(logged().filter((line) => line.asked).map((line) => line.asked)).toEqual(['root', 'worker:deep', 'worker:deep', 'worker:deep', 'root'])
  }, 60_000)

  describe('PostgreSQL', () => {
    const database = scratchDatabase('arh_tree', 'the PostgreSQL paused-tree test')

    it('the same tree, on a PostgreSQL store', async (context) => {
      if (!database.available()) return context.skip()
      expectTreeResumedOnce(await pauseThenResumeElsewhere({ PG: database.url() }, tempDir()))
    }, 60_000)
  })
})
