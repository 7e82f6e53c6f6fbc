// TodoWrite, EnterPlanMode, ExitPlanMode and AskUserQuestion, checked from the outside: a real
// agent whose scripted model calls them, what that model is sent back, what the confirmation
// handler is asked, and plan mode really switched (a Write after EnterPlanMode refused with
// Blade's plan-mode text, allowed again after ExitPlanMode).
//
// Written from research/blade-sessions-builtins.md §B.3 and Blade's own tests of these tools
// (askUserQuestion.test.ts, ExitPlanModeTool.test.ts, TodoManager.test.ts): the texts are Blade's.
import { existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import {
  createAgent,
  scriptedModel,
  type Agent,
  type AgentAdvancedOptions,
  type ConfirmationRequest,
  type ConfirmationResult,
  type JsonObject,
  type ScriptRequest,
  type ScriptedTurn,
  type StreamEvent,
} from '../index.js'

const PLAN_DENIAL =
  'Tool execution aborted: Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)'
const ENTER_UNCONFIRMED =
  'Plan mode requested but no interactive confirmation available.\n\nProceeding with research phase. Use read-only tools to explore the codebase, then call ExitPlanMode with your implementation plan when ready.'
const EXIT_UNCONFIRMED = '✅ Plan mode exit requested. No interactive confirmation available.\nProceeding with implementation.'
const EXIT_APPROVED = '✅ Plan approved by user. Plan mode exited; you can proceed to code changes.'
const NO_HANDLER = 'No confirmation handler available. Cannot ask user questions in non-interactive mode.'
const CANCELLED = 'User cancelled the question prompt without providing answers.'

// ---------------------------------------------------------------------------------------------
// helpers

const dirs: string[] = []
function workspace(): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'arh-system-')))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

const open: Agent[] = []
afterEach(async () => {
  await Promise.all(open.splice(0).map((agent) => agent.close()))
})

/** A model that plays `turns` one model call after another (across sends), and what it was sent. */
function script(turns: ScriptedTurn[]) {
  const requests: ScriptRequest[] = []
  const model = scriptedModel((request) => {
    requests.push(request)
    return turns[requests.length - 1] ?? { text: 'end' }
  })
  /** The tool messages the model had been sent by its `index`th call. */
  const toolMessages = (index = requests.length - 1): string[] =>
    requests[index]!.messages.flatMap((message) => (message.role === 'tool' ? [message.content] : []))
  return { model, requests, toolMessages }
}

let ids = 0
const call = (name: string, input: JsonObject = {}): ScriptedTurn => ({ toolCalls: [{ id: `c${++ids}`, name, input }] })
const write = (file: string) => call('Write', { file_path: file, content: 'x' })

/** An agent in a fresh workspace whose model plays `turns`. */
async function agentWith(turns: ScriptedTurn[], advanced: AgentAdvancedOptions = {}) {
  const dir = workspace()
  const played = script(turns)
  const agent = await createAgent({ model: played.model, filesystem: { roots: [dir], cwd: dir }, advanced })
  open.push(agent)
  return { agent, dir, ...played }
}

/** A confirmation handler answering with `answer`, keeping what it is asked. */
function handler(answer: (request: ConfirmationRequest) => ConfirmationResult) {
  const asked: ConfirmationRequest[] = []
  return {
    asked,
    confirmationHandler: {
      requestConfirmation(request: ConfirmationRequest) {
        asked.push(request)
        return answer(request)
      },
    },
  }
}

const questions = [
  {
    question: 'Which framework?',
    header: 'Framework',
    multiSelect: false,
    options: [
      { label: 'React', description: 'Popular UI library' },
      { label: 'Vue', description: 'Progressive framework' },
    ],
  },
]

// ---------------------------------------------------------------------------------------------

describe('offered', () => {
  it('the four tools are offered with their schemas', async () => {
    const { agent, requests } = await agentWith([{ text: 'hi' }])
    await (await agent.send('hi')).result()
    const tools = new Map(requests[0]!.tools.map((tool) => [tool.name, tool.parameters as any]))
    expect(tools.get('TodoWrite')?.required).toEqual(['todos'])
    expect(tools.get('EnterPlanMode')?.properties).toEqual({})
    expect(tools.get('ExitPlanMode')?.required).toEqual(['plan'])
    expect(tools.get('AskUserQuestion')?.required).toEqual(['questions'])
  })
})

describe('plan mode', () => {
  it('with nobody to confirm: EnterPlanMode blocks the next Write with Blade’s text, ExitPlanMode allows it again', async () => {
    const { agent, dir, toolMessages } = await agentWith([
      call('EnterPlanMode'),
      write('planned.txt'),
      call('Read', { file_path: 'planned.txt' }),
      call('ExitPlanMode', { plan: '# Plan\n\n1. Write done.txt' }),
      write('done.txt'),
      { text: 'done' },
    ])
    const result = await (await agent.send('plan, then do it')).result()
    expect(toolMessages()).toEqual([
      ENTER_UNCONFIRMED,
      PLAN_DENIAL,
      expect.stringMatching(/^File not found: .*planned\.txt$/),
      EXIT_UNCONFIRMED,
      expect.stringContaining('"size": 1'),
    ])
    expect(result.toolCalls.map((call) => call.isError)).toEqual([false, true, true, false, false])
    expect(existsSync(join(dir, 'planned.txt'))).toBe(false)
    expect(existsSync(join(dir, 'done.txt'))).toBe(true)
  })

  it('plan mode entered in one send holds for the next, until setPermissionMode', async () => {
    const { agent, dir } = await agentWith([call('EnterPlanMode'), { text: 'planning' }, write('a.txt'), { text: 'no' }, write('b.txt'), { text: 'ok' }])
    await (await agent.send('plan')).result()
    expect((await (await agent.send('write')).result()).toolCalls[0]).toMatchObject({ name: 'Write', output: PLAN_DENIAL, isError: true })
    await agent.setPermissionMode('yolo')
    expect((await (await agent.send('write')).result()).toolCalls[0]?.isError).toBe(false)
    expect([existsSync(join(dir, 'a.txt')), existsSync(join(dir, 'b.txt'))]).toEqual([false, true])
  })

  it('the confirmation handler is asked with type enterPlanMode; declined, nothing changes', async () => {
    const { asked, confirmationHandler } = handler(() => ({ approved: false }))
    const { agent, dir } = await agentWith([call('EnterPlanMode'), write('a.txt'), { text: 'end' }], { confirmationHandler })
    const result = await (await agent.send('go')).result()
    expect(result.toolCalls[0]?.output).toMatch(/^⚠️ User declined to enter Plan mode\.\n\n/)
    expect(result.toolCalls[1]?.isError).toBe(false)
    expect(existsSync(join(dir, 'a.txt'))).toBe(true)
    expect(asked).toHaveLength(1)
    expect(asked[0]).toMatchObject({
      type: 'enterPlanMode',
      toolName: 'EnterPlanMode',
      kind: 'readonly',
      details: 'Plan mode enables systematic research before implementation',
    })
    expect(asked[0]?.message).toMatch(/Do you want to enter Plan mode\?$/)
    expect(asked[0]?.abortSignal).toBeInstanceOf(AbortSignal)
  })

  it('approved, the plan is shown to the handler and the run goes on in the targetMode', async () => {
    const { asked, confirmationHandler } = handler((request) =>
      request.type === 'exitPlanMode' ? { approved: true, targetMode: 'autoEdit' } : { approved: true },
    )
    const { agent, dir, toolMessages } = await agentWith(
      [call('EnterPlanMode'), write('early.txt'), call('ExitPlanMode', { plan: '1. Write late.txt' }), write('late.txt'), { text: 'end' }],
      { confirmationHandler, permission: 'default' },
    )
    await (await agent.send('go')).result()
    expect(toolMessages()[0]).toMatch(/^✅ User approved entering Plan mode\.\n\nYou are now in PLAN MODE\./)
    expect(toolMessages().slice(1, 3)).toEqual([PLAN_DENIAL, EXIT_APPROVED])
    // autoEdit lets the Write run without asking: the handler saw the two plan requests only.
    expect(asked.map((request) => request.type)).toEqual(['enterPlanMode', 'exitPlanMode'])
    expect(asked[1]?.planContent).toBe('1. Write late.txt')
    expect([existsSync(join(dir, 'early.txt')), existsSync(join(dir, 'late.txt'))]).toEqual([false, true])
  })

  it('rejected, the run stops with the feedback and plan mode stays', async () => {
    const { confirmationHandler } = handler((request) =>
      request.type === 'exitPlanMode' ? { approved: false, feedback: 'Use SQLite.' } : { approved: true },
    )
    const { agent, requests } = await agentWith(
      [call('EnterPlanMode'), call('ExitPlanMode', { plan: '1. Add a cache' }), write('a.txt'), { text: 'end' }],
      { confirmationHandler },
    )
    const result = await (await agent.send('go')).result()
    const rejected =
      '⚠️ Plan rejected by user. Awaiting user feedback.\n\nUse SQLite.\n\nThe agent has stopped and control is returned to the user. The user can now provide additional information or clarification.'
    expect(result.stopReason).toBe('interrupted')
    expect(result.result).toBe(rejected)
    expect(result.toolCalls[1]?.output).toBe(rejected)
    expect(requests).toHaveLength(2)
    expect((await (await agent.send('write it')).result()).toolCalls[0]?.output).toBe(PLAN_DENIAL)
  })

  it('ExitPlanMode without a plan is a tool error naming the field', async () => {
    const { agent } = await agentWith([call('ExitPlanMode', { plan: 42 }), { text: 'end' }])
    expect((await (await agent.send('go')).result()).toolCalls[0]).toMatchObject({
      output: 'Invalid input for ExitPlanMode: plan must be a string (got a number)',
      isError: true,
    })
  })
})

describe('AskUserQuestion', () => {
  const asking = () => [call('AskUserQuestion', { questions } as unknown as JsonObject), { text: 'end' }]

  it('answered: the model gets `User answers:` with one line per header', async () => {
    const { asked, confirmationHandler } = handler(() => ({ approved: true, answers: { Framework: 'React', Extras: ['TypeScript', 'ESLint'] } }))
    const { agent, toolMessages } = await agentWith(asking(), { confirmationHandler })
    await (await agent.send('ask')).result()
    expect(toolMessages()).toEqual(['User answers:\nFramework: React\nExtras: TypeScript, ESLint'])
    expect(asked[0]).toMatchObject({ type: 'askUserQuestion', message: 'Please answer the following questions:', questions })
  })

  it('cancelled, without a handler, and with a handler that throws: Blade’s texts', async () => {
    const cancelled = await agentWith(asking(), { confirmationHandler: handler(() => ({ approved: false })).confirmationHandler })
    await (await cancelled.agent.send('ask')).result()
    expect(cancelled.toolMessages()).toEqual([CANCELLED])

    const nobody = await agentWith(asking())
    const result = await (await nobody.agent.send('ask')).result()
    expect(result.toolCalls[0]).toMatchObject({ output: NO_HANDLER, isError: true })

    const throwing = await agentWith(asking(), {
      confirmationHandler: {
        requestConfirmation() {
          throw new Error('Handler failed')
        },
      },
    })
    await (await throwing.agent.send('ask')).result()
    expect(throwing.toolMessages()).toEqual(['Failed to ask user questions: Handler failed'])
  })

  it('bad questions are a tool error naming the field, and nobody is asked', async () => {
    const { asked, confirmationHandler } = handler(() => ({ approved: true }))
    const bad = [{ ...questions[0], options: [{ label: 'Only', description: 'one' }] }]
    const { agent, toolMessages } = await agentWith([call('AskUserQuestion', { questions: bad } as unknown as JsonObject), { text: 'end' }], { confirmationHandler })
    await (await agent.send('ask')).result()
    expect(toolMessages()).toEqual(['Invalid input for AskUserQuestion: questions[0].options must be an array of 2 to 4 items (got an array)'])
    expect(asked).toEqual([])
  })
})

describe('TodoWrite', () => {
  const item = (content: string, status: string) => ({ content, status, activeForm: `${content}ing` })

  it('the model gets the sorted list and counts; two tool_progress events show it updated', async () => {
    const { agent, toolMessages } = await agentWith([
      call('TodoWrite', { todos: [item('Test', 'pending'), item('Build', 'in_progress'), item('Plan', 'completed')] }),
      { text: 'end' },
    ])
    const response = await agent.send('plan')
    const progress: unknown[] = []
    for await (const event of response.stream() as AsyncIterable<StreamEvent>) if (event.type === 'tool_progress') progress.push(event.progress)
    const sent = JSON.parse(toolMessages()[0]!)
    expect(sent.todos.map((todo: any) => [todo.content, todo.status, todo.priority])).toEqual([
      ['Plan', 'completed', 'medium'],
      ['Build', 'in_progress', 'medium'],
      ['Test', 'pending', 'medium'],
    ])
    expect(sent.stats).toEqual({ total: 3, completed: 1, inProgress: 1, pending: 1 })
    expect(toolMessages()[0]).toMatch(/^\{\n {2}"todos": \[\n/)
    expect(progress).toEqual([
      { kind: 'progress', message: 'Updating TODO list...', data: { total: 3 } },
      { kind: 'progress', message: 'TODO list updated (1/3 completed)', completed: 1, total: 3 },
    ])
  })

  it('two items in progress: `Update failed: …` and the list unchanged; an empty list names the field', async () => {
    const { agent, toolMessages } = await agentWith([
      call('TodoWrite', { todos: [item('A', 'in_progress')] }),
      call('TodoWrite', { todos: [item('A', 'in_progress'), item('B', 'in_progress')] }),
      call('TodoWrite', { todos: [] }),
      call('TodoWrite', { todos: [item('A', 'done')] }),
      { text: 'end' },
    ])
    const result = await (await agent.send('go')).result()
    expect(toolMessages().slice(1)).toEqual([
      'Update failed: 同时只能有一个任务处于 in_progress 状态',
      'Invalid input for TodoWrite: todos must be an array of at least one item (got an array)',
      'Invalid input for TodoWrite: todos[0].status must be one of pending, in_progress, completed (got a string)',
    ])
    expect(result.toolCalls.map((call) => call.isError)).toEqual([false, true, true, true])
  })

  it('the list is the session’s: an item named again keeps its id across sends', async () => {
    const { agent, toolMessages } = await agentWith([
      call('TodoWrite', { todos: [item('Build', 'in_progress')] }),
      { text: 'one' },
      call('TodoWrite', { todos: [item('Build', 'completed'), item('Ship', 'pending')] }),
      { text: 'two' },
    ])
    await (await agent.send('start')).result()
    const first = JSON.parse(toolMessages()[0]!).todos[0]
    await (await agent.send('go on')).result()
    const second = JSON.parse(toolMessages()[1]!).todos
    expect(second[0]).toMatchObject({ id: first.id, content: 'Build', status: 'completed', startedAt: first.startedAt, createdAt: first.createdAt })
    expect(second[0].completedAt).toEqual(expect.any(String))
    expect(second[1].id).not.toBe(first.id)
  })
})
