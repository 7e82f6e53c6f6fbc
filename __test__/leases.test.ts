// Leases from the outside (SPEC §8.3), on one SQLite file: two agents of one stored session, as two
// processes of one machine would hold it (the multi-process and PostgreSQL cases are in
// workers.test.ts). A run holds the session while it runs and gives it up when it settles —
// done, paused, failed or aborted — so the other agent is refused exactly while a run is at
// work, is served at once afterwards, and goes on from what the other agent's run left.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { createAgent, defineTool, resumeAgent, scriptedModel, SdkError, type Agent, type AgentOptions, type ScriptRequest, type ScriptedTurn } from '../index.js'

const dirs: string[] = []
let db = ''
beforeEach(() => {
  const dir = mkdtempSync(join(tmpdir(), 'arh-leases-'))
  dirs.push(dir)
  db = join(dir, 'sessions.db')
})
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** A tool that waits until `release()` is called (or its signal aborts). */
function gate() {
  let open: () => void = () => {}
  let entered: () => void = () => {}
  const inside = new Promise<void>((resolve) => (entered = resolve))
  const tool = defineTool({
    name: 'wait',
    kind: 'readonly',
    execute: (_input, { signal }) =>
      new Promise<string>((resolve, reject) => {
        entered()
        open = () => resolve('opened')
        signal.addEventListener('abort', () => reject(signal.reason), { once: true })
      }),
  })
  return { tool, inside, release: () => open() }
}

/** The model: `wait` once per prompt starting with "wait", "fail" throws, anything else is answered; it records what it was sent. */
function model(seen: ScriptRequest[]) {
  return scriptedModel((request): ScriptedTurn => {
    seen.push(structuredClone(request))
    const last = request.messages.at(-1)!
    if (last.role === 'tool') return { text: `done ${String(last.content)}` }
    const prompt = String(last.content)
    if (prompt.startsWith('fail')) throw new Error('the model is down')
    if (prompt.startsWith('wait')) return { toolCalls: [{ id: `w-${request.messages.length}`, name: 'wait', input: {} }] }
    if (prompt.startsWith('write')) return { toolCalls: [{ id: `p-${request.messages.length}`, name: 'pay', input: {} }] }
    return { text: `answer to ${prompt}` }
  })
}
const pay = defineTool({ name: 'pay', kind: 'execute', execute: () => 'paid' })

async function pair() {
  const seenA: ScriptRequest[] = []
  const seenB: ScriptRequest[] = []
  const door = gate()
  const options = (seen: ScriptRequest[]): AgentOptions => ({ model: model(seen), tools: [door.tool, pay], advanced: { permission: 'default', store: { sqlite: db } } })
  const a = await createAgent(options(seenA))
  await (await a.send('hello')).result()
  const b = await resumeAgent({ ...options(seenB), sessionId: a.sessionId })
  return { a, b, door, seenA, seenB }
}

async function rejection(promise: Promise<unknown>): Promise<SdkError> {
  try {
    await promise
  } catch (error) {
    return error as SdkError
  }
  throw new Error('expected a rejection')
}

async function closeAll(...agents: Agent[]) {
  for (const agent of agents) await agent.close()
}

describe('a run holds its session while it runs, and only then', () => {
  it('while A runs, B’s send and resume reject SESSION_LEASED naming the session; once A is done, B sends at once and its model sees A’s turn', async () => {
    const { a, b, door, seenB } = await pair()
    const running = await a.send('wait for it')
    await door.inside
    const refused = await rejection(b.send('me too'))
    expect(refused).toBeInstanceOf(SdkError)
    expect(refused.code).toBe('SESSION_LEASED')
    expect(refused.message).toMatch(new RegExp(`^Session ${a.sessionId} is driven by another agent \\(its lease expires in \\d+ ms unless renewed\\): try again once its run has settled$`))
    expect((await rejection(b.resume())).code).toBe('SESSION_LEASED')
    door.release()
    expect((await running.result()).content).toBe('done opened')
    expect((await (await b.send('next')).result()).content).toBe('answer to next')
    // B read the session again: its model saw A's whole turn before B's prompt.
    expect(seenB.at(-1)!.messages.filter((message) => message.role !== 'system').map((message) => [message.role, message.content])).toEqual([
      ['user', 'hello'],
      ['assistant', 'answer to hello'],
      ['user', 'wait for it'],
      ['assistant', null],
      ['tool', 'opened'],
      ['assistant', 'done opened'],
      ['user', 'next'],
    ])
    await closeAll(a, b)
  })

  it('an aborted run gives the session up: the other agent is served at once', async () => {
    const { a, b, door } = await pair()
    const controller = new AbortController()
    const running = await a.send('wait for it', { signal: controller.signal })
    await door.inside
    controller.abort(new Error('enough'))
    await rejection(running.result())
    expect((await (await b.send('after the abort')).result()).content).toBe('answer to after the abort')
    await closeAll(a, b)
  })

  it('a failed run gives the session up: the other agent is served at once', async () => {
    const { a, b } = await pair()
    const failed = await rejection((await a.send('fail now')).result())
    expect(failed.message).toContain('the model is down')
    expect((await (await b.send('after the failure')).result()).content).toBe('answer to after the failure')
    await closeAll(a, b)
  })

  it('a paused run gives the session up: the other agent decides and resumes at once; A, asked to resume after, has nothing left to resume', async () => {
    const { a, b } = await pair()
    const paused = await (await a.send('write it')).result()
    expect(paused.stopReason).toBe('interrupted')
    const [call] = paused.pendingApprovals!
    await b.approve(call.toolCallId)
    expect((await (await b.resume()).result()).content).toBe('done paid')
    // A's copy still shows the pause; its claim reads the session again and finds it resumed.
    expect((await rejection(a.resume())).code).toBe('NOTHING_TO_RESUME')
    await closeAll(a, b)
  })

  it('closing an agent whose run is at work gives the session up', async () => {
    const { a, b, door } = await pair()
    const running = await a.send('wait for it')
    await door.inside
    await a.close()
    await rejection(running.result())
    expect((await (await b.send('after the close')).result()).content).toBe('answer to after the close')
    await b.close()
  })
})
