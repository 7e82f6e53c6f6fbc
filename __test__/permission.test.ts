// advanced.permission: presets, the function form, its request and decisions, and how it
// combines with PermissionRequest hooks.
import { describe, expect, it } from 'vitest'
import { createAgent, defineTool, HookTimeoutError, prompt, scriptedModel, type AgentOptions, type AgentPermissionRequest, type ScriptedToolCall } from '../index.js'
import { onceSettled, sleep, untilAborted } from './helpers/server.js'

const ran: string[] = []
const tools = [
  defineTool({ name: 'Read', kind: 'readonly', execute: ({ file_path }) => (ran.push('Read'), `read ${file_path}`) }),
  defineTool({ name: 'Write', kind: 'write', execute: ({ content }) => (ran.push('Write'), `wrote ${content}`) }),
  defineTool({ name: 'Bash', execute: ({ command }) => (ran.push('Bash'), `ran ${command}`) }),
]
const calls: ScriptedToolCall[] = [
  { id: 'r', name: 'Read', input: { file_path: 'a.txt' } },
  { id: 'w', name: 'Write', input: { file_path: 'b.txt', content: 'x' } },
  { id: 'b', name: 'Bash', input: { command: 'ls' } },
]

async function runAll(advanced: AgentOptions['advanced']) {
  ran.length = 0
  return prompt('go', { model: scriptedModel([{ toolCalls: calls }, { text: 'end' }]), tools, advanced })
}

describe('presets', () => {
  const outputs = async (preset: any) => (await runAll({ permission: preset })).toolCalls.map((call) => call.output)

  const paused = async (preset: any) => {
    const result = await runAll({ permission: preset })
    return { stopReason: result.stopReason, outputs: result.toolCalls.map((call) => call.output), waiting: result.pendingApprovals?.map((call) => call.toolName) }
  }

  it('default allows readonly tools and asks (pauses for a person) for the rest', async () => {
    expect(await paused('default')).toEqual({ stopReason: 'interrupted', outputs: ['read a.txt'], waiting: ['Write', 'Bash'] })
    expect(ran).toEqual(['Read'])
  })

  it('accept-edits allows readonly and write tools and asks for execute tools', async () => {
    expect(await paused('accept-edits')).toEqual({ stopReason: 'interrupted', outputs: ['read a.txt', 'wrote x'], waiting: ['Bash'] })
  })

  it('plan allows readonly tools and denies the rest', async () => {
    expect(await outputs('plan')).toEqual([
      'read a.txt',
      'Tool execution aborted: Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)',
      'Tool execution aborted: Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)',
    ])
  })

  it('bypass-permissions allows everything, as does no permission option', async () => {
    expect(await outputs('bypass-permissions')).toEqual(['read a.txt', 'wrote x', 'ran ls'])
    expect((await runAll({})).toolCalls.map((call) => call.status)).toEqual(['success', 'success', 'success'])
  })
})

describe('the permission function', () => {
  it('receives the request with kind, input, affected paths, ids and a signal', async () => {
    const requests: AgentPermissionRequest[] = []
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [calls[1]] }, { text: 'end' }]),
      tools,
      advanced: { permission: (request) => (requests.push(request), 'allow') },
    })
    await (await agent.send('go')).result()
    expect(requests).toHaveLength(1)
    const { signal, ...rest } = requests[0]
    expect(rest).toEqual({ toolName: 'Write', input: { file_path: 'b.txt', content: 'x' }, kind: 'write', affectedPaths: ['b.txt'], sessionId: agent.sessionId, toolCallId: 'w' })
    expect(signal).toBeInstanceOf(AbortSignal)
    expect(signal.aborted).toBe(false)
    await agent.close()
  })

  it('string and object decisions: deny texts, updatedInput, ask', async () => {
    const decide = async (decision: any) => (await runAll({ permission: async (request) => (request.toolName === 'Bash' ? decision : 'allow') })).toolCalls[2]
    expect((await decide('deny')).output).toBe('Tool execution aborted: Denied by permission policy')
    expect((await decide({ behavior: 'deny', message: 'no shells' })).output).toBe('Tool execution aborted: no shells')
    // An 'ask' nobody answers pauses the call: it is not among the finished ones.
    expect(await decide('ask')).toBeUndefined()
    expect(await decide({ behavior: 'ask', message: 'really?' })).toBeUndefined()
    const updated = await decide({ behavior: 'allow', updatedInput: { command: 'ls -la' } })
    expect(updated).toMatchObject({ status: 'success', output: 'ran ls -la', input: { command: 'ls -la' } })
  })

  it('deny with interrupt ends the run after the turn with stopReason interrupted', async () => {
    let modelCalls = 0
    const result = await prompt('go', {
      model: scriptedModel(() => (modelCalls++ === 0 ? { toolCalls: calls } : { text: 'never' })),
      tools,
      advanced: { permission: (request) => (request.toolName === 'Bash' ? { behavior: 'deny', message: 'Stop everything', interrupt: true } : 'allow') },
    })
    expect(result).toMatchObject({
      stopReason: 'interrupted',
      result: 'Tool execution aborted: Stop everything',
      content: 'Tool execution aborted: Stop everything',
      turnsCount: 1,
      turns: 1,
    })
    expect(result.toolCalls.map((call) => call.output)).toEqual(['read a.txt', 'wrote x', 'Tool execution aborted: Stop everything'])
    expect(modelCalls).toBe(1)
  })

  it('a permission function that throws, times out or answers nonsense denies', async () => {
    const outputFor = async (permission: any, hookTimeoutMs?: number) => (await runAll({ permission, hookTimeoutMs })).toolCalls.map((call) => call.output)
    expect(await outputFor(() => { throw new Error('policy offline') })).toEqual(Array(3).fill('Tool execution aborted: Permission check failed: policy offline'))
    expect(await outputFor(() => 42)).toEqual(
      Array(3).fill("Tool execution aborted: Permission check failed: the permission function returned 42; expected 'allow', 'deny', 'ask' or { behavior, … }"),
    )
    const timedOut = await outputFor((request: AgentPermissionRequest) => untilAborted(request.signal), 40)
    expect(timedOut).toEqual(Array(3).fill('Tool execution aborted: Permission check failed: Hook PermissionRequest exceeded 40ms'))
    expect(ran).toEqual([])
  })
})

describe('cancellation', () => {
  it('an abort while the permission function decides never grants: the tool does not run, even if it then allows', async () => {
    ran.length = 0
    let deciding!: () => void
    const asked = new Promise<void>((resolve) => (deciding = resolve))
    let allow!: (decision: 'allow') => void
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [calls[2]] }, { text: 'end' }]),
      tools,
      advanced: { permission: () => (deciding(), new Promise((resolve) => (allow = resolve))) },
    })
    const response = await agent.send('go')
    await asked
    const reason = new Error('stop deciding')
    agent.abort(reason)
    await expect(response.result()).rejects.toBe(reason)
    // The function allows only after the abort; give that a moment to (wrongly) start the tool.
    allow('allow')
    await sleep(20)
    expect(ran).toEqual([])
    await agent.close()
  })
})

describe('fail closed', () => {
  it('while a permission function that outlived its budget still runs, later calls are denied without asking', async () => {
    ran.length = 0
    let release!: () => void
    let asked = 0
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [calls[2]] }, { toolCalls: [calls[2]] }, { text: 'end' }]),
      tools,
      advanced: { hookTimeoutMs: 30, permission: () => (asked++, new Promise((resolve) => (release = () => resolve('allow')))) },
    })
    const result = await (await agent.send('go')).result()
    expect(result.toolCalls.map((call) => call.output)).toEqual([
      'Tool execution aborted: Permission check failed: Hook PermissionRequest exceeded 30ms',
      'Tool execution aborted: Permission check failed: A permission callback is still cleaning up',
    ])
    expect([asked, ran.length]).toEqual([1, 0])
    release()
    await onceSettled(() => agent.close())
  })
})

describe("the permission function's signal", () => {
  it('aborts at hookTimeoutMs with a HookTimeoutError, and with the reason of agent.abort()', async () => {
    let signal: AbortSignal | undefined
    await runAll({ hookTimeoutMs: 30, permission: (request: AgentPermissionRequest) => ((signal = request.signal), untilAborted(request.signal)) })
    expect(signal!.reason).toBeInstanceOf(HookTimeoutError)
    expect(signal!.reason).toMatchObject({ event: 'PermissionRequest', timeoutMs: 30 })

    let asked!: () => void
    const deciding = new Promise<void>((resolve) => (asked = resolve))
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [calls[2]] }, { text: 'end' }]),
      tools,
      advanced: { permission: (request: AgentPermissionRequest) => ((signal = request.signal), asked(), untilAborted(request.signal)) },
    })
    const response = await agent.send('go')
    await deciding
    const reason = new Error('user left')
    agent.abort(reason)
    await expect(response.result()).rejects.toBe(reason)
    expect(signal!.reason).toBe(reason)
    await agent.close()
  })
})

describe('with PermissionRequest hooks', () => {
  it('hooks run first; their modifiedInput reaches the function and the tool', async () => {
    const seen: unknown[] = []
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [calls[2]] }, { text: 'end' }]),
      tools,
      advanced: {
        hooks: { PermissionRequest: [async (input) => ({ action: 'continue', modifiedInput: { command: `${input.toolInput?.command} --safe` } })] },
        permission: (request) => (seen.push(request.input), 'allow'),
      },
    })
    expect(seen).toEqual([{ command: 'ls --safe' }])
    expect(result.toolCalls[0].output).toBe('ran ls --safe')
  })

  it('a hook skip denies without calling the function; a hook abort also interrupts the run', async () => {
    let asked = 0
    const skip = await runAll({ hooks: { PermissionRequest: [async (input) => (input.toolName === 'Bash' ? { action: 'skip' } : { action: 'continue' })] }, permission: () => (asked++, 'allow') })
    expect(skip.toolCalls[2].output).toBe('Tool execution aborted: Tool "Bash" was blocked by hook')
    expect(skip.stopReason).toBe('done')
    expect(asked).toBe(2)
    const abort = await runAll({ hooks: { PermissionRequest: [async (input) => (input.toolName === 'Bash' ? { action: 'abort', reason: 'halt' } : { action: 'continue' })] } })
    expect(abort).toMatchObject({ stopReason: 'interrupted', result: 'Tool execution aborted: halt', content: 'Tool execution aborted: halt' })
    expect(abort.toolCalls[2].output).toBe('Tool execution aborted: halt')
  })
})
