// What runs is what was approved (SPEC §8.1), tried as an attacker would: whoever relays a pending
// approval and its token tries to change the input; whoever can write the store edits the paused
// input after the person approved it, recomputes its fingerprint, or writes a decision row nobody
// took. Each attempt must run nothing. The SQLite file is edited with Python's sqlite3 module
// between the pause and the resume, the way anyone with the file would.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeEach, describe, expect, it } from 'vitest'
import { approvalToken, createAgent, defineTool, resumeAgent, scriptedModel, SdkError, type AgentOptions, type JsonObject } from '../index.js'
import { fingerprintOf, tokenOf } from './helpers/canonical.js'

const secret = 'correct horse battery staple'
const transfers: JsonObject[] = []
beforeEach(() => void (transfers.length = 0))

const transfer = defineTool<{ to: string; amount: number }>({
  name: 'transfer',
  kind: 'execute',
  parameters: { type: 'object', properties: { to: { type: 'string' }, amount: { type: 'number' } }, required: ['to', 'amount'] },
  execute: (input) => (transfers.push(input), `sent ${input.amount} to ${input.to}`),
})
const ASKED = { to: 'alice', amount: 5 }
const STOLEN = { to: 'mallory', amount: 5000 }

/** Asks for one transfer to alice, then repeats what the tool said. */
const model = () =>
  scriptedModel(({ messages }) => {
    const last = messages.at(-1)
    return last?.role === 'tool' ? { text: `tool said: ${last.content}` } : { toolCalls: [{ id: 'call_pay', name: 'transfer', input: ASKED }] }
  })

const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})
function sqliteFile() {
  const dir = mkdtempSync(join(tmpdir(), 'arh-approval-'))
  dirs.push(dir)
  return join(dir, 'sessions.db')
}

const options = (extra: NonNullable<AgentOptions['advanced']> = {}): AgentOptions => ({
  model: model(),
  tools: [transfer],
  advanced: { permission: 'default', ...extra },
})

async function expectCode(promise: Promise<unknown>, code: string, message?: RegExp) {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(SdkError)
  expect((error as SdkError).code).toBe(code)
  if (message) expect((error as SdkError).message).toMatch(message)
}

/** Runs SQL statements on the SQLite file, as anyone holding the file could. */
function tamper(file: string, statements: { sql: string; params: (string | null)[] }[]) {
  const script = `
import json, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for step in json.loads(sys.argv[2]):
    db.execute(step['sql'], step['params'])
db.commit()
`
  execFileSync('python3', ['-c', script, file, JSON.stringify(statements)])
}
/** The stored paused turn (`sessions.paused`), read back as JSON. */
function storedPause(file: string, sessionId: string): any {
  const script = `
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
print(db.execute('SELECT paused FROM sessions WHERE session_id = ?', (sys.argv[2],)).fetchone()[0])
`
  return JSON.parse(execFileSync('python3', ['-c', script, file, sessionId], { encoding: 'utf8' }))
}
/** Puts `input` (and, when given, `fingerprint`) in place of the paused call's, in both places the store keeps it. */
function editPausedInput(file: string, sessionId: string, input: JsonObject, fingerprint?: string) {
  const paused = storedPause(file, sessionId)
  paused.pending[0].input = input
  if (fingerprint) paused.pending[0].fingerprint = fingerprint
  tamper(file, [
    { sql: 'UPDATE sessions SET paused = ? WHERE session_id = ?', params: [JSON.stringify(paused), sessionId] },
    { sql: 'UPDATE pending_calls SET input = ? WHERE session_id = ?', params: [JSON.stringify(input), sessionId] },
    ...(fingerprint ? [{ sql: 'UPDATE pending_calls SET fingerprint = ? WHERE session_id = ?', params: [fingerprint, sessionId] }] : []),
  ])
}

describe('a relayed token binds the input that runs', () => {
  it("the pending approval's token with another updatedInput is refused (APPROVAL_TOKEN_INVALID) and nothing runs", async () => {
    const agent = await createAgent(options({ approvalSecret: secret }))
    const paused = await (await agent.send('pay alice')).result()
    const [pending] = paused.pendingApprovals!
    expect(pending.input).toEqual(ASKED)
    await expectCode(agent.approve('call_pay', { token: pending.token, updatedInput: STOLEN }), 'APPROVAL_TOKEN_INVALID', /does not match its updatedInput/)
    expect(agent.pendingApprovals.map((p) => p.toolCallId)).toEqual(['call_pay'])
    await expectCode(agent.resume(), 'APPROVALS_PENDING')
    expect(transfers).toEqual([])
    await agent.close()
  })

  it('an updatedInput runs with the token over its own fingerprint, which approvalToken makes (and only the secret does)', async () => {
    const agent = await createAgent(options({ approvalSecret: secret }))
    await (await agent.send('pay alice')).result()
    const edited = { to: 'alice', amount: 4 }
    const token = approvalToken({ secret, sessionId: agent.sessionId, toolCallId: 'call_pay', toolName: 'transfer', input: edited })
    // The SPEC's token, computed independently: HMAC over [sessionId, toolCallId, fingerprint of { input, toolName }].
    expect(token).toBe(tokenOf(secret, agent.sessionId, 'call_pay', fingerprintOf('transfer', edited)))
    const guessed = approvalToken({ secret: 'guess', sessionId: agent.sessionId, toolCallId: 'call_pay', toolName: 'transfer', input: edited })
    await expectCode(agent.approve('call_pay', { token: guessed, updatedInput: edited }), 'APPROVAL_TOKEN_INVALID')
    await agent.approve('call_pay', { token, updatedInput: edited })
    const done = await (await agent.resume()).result()
    expect(transfers).toEqual([edited])
    expect(done.content).toBe('tool said: sent 4 to alice')
    await agent.close()
  })

  it('approvalToken names what is wrong with its arguments', () => {
    expect(() => approvalToken({ secret, sessionId: 's', toolCallId: 'c', toolName: 't', input: [] as unknown as JsonObject })).toThrow(/input must be an object \(got an array\)/)
    expect(() => approvalToken({ secret: '', sessionId: 's', toolCallId: 'c', toolName: 't', input: {} })).toThrow(/secret must be a non-empty string/)
    expect(() => approvalToken({ secret, sessionId: 1 as unknown as string, toolCallId: 'c', toolName: 't', input: {} })).toThrow(/sessionId must be a string \(got number\)/)
  })
})

describe('the store is not trusted with what runs', () => {
  const REFUSED_EDIT = 'Tool execution aborted: Approval refused: the stored call does not match its fingerprint'
  const REFUSED_TOKEN = 'Tool execution aborted: Approval refused: its approval token does not match the input to run'

  /** Pauses on the transfer in a SQLite session, optionally approves it, and closes. */
  async function pauseStored(file: string, extra: NonNullable<AgentOptions['advanced']>, approve: boolean) {
    const agent = await createAgent(options({ ...extra, store: { sqlite: file } }))
    const paused = await (await agent.send('pay alice')).result()
    expect(paused.stopReason).toBe('interrupted')
    if (approve) await agent.approve('call_pay', { token: paused.pendingApprovals![0].token })
    await agent.close()
    return agent.sessionId
  }
  /** resumeAgent then resume(): what the run did. */
  async function resumeStored(file: string, sessionId: string, extra: NonNullable<AgentOptions['advanced']>) {
    const agent = await resumeAgent({ ...options({ ...extra, store: { sqlite: file } }), sessionId })
    try {
      return await (await agent.resume()).result()
    } finally {
      await agent.close()
    }
  }

  it('an input edited in the store after the approval does not run (no secret): the call fails, the model is told', async () => {
    const file = sqliteFile()
    const sessionId = await pauseStored(file, {}, true)
    editPausedInput(file, sessionId, STOLEN)
    const result = await resumeStored(file, sessionId, {})
    expect(transfers).toEqual([])
    expect(result.toolCalls).toHaveLength(1)
    expect(result.toolCalls[0]).toMatchObject({ id: 'call_pay', isError: true, output: REFUSED_EDIT })
    expect(result.content).toBe(`tool said: ${REFUSED_EDIT}`)
  })

  it('an input edited with its fingerprint recomputed does not run under approvalSecret: the token does not cover it', async () => {
    const file = sqliteFile()
    const sessionId = await pauseStored(file, { approvalSecret: secret }, true)
    editPausedInput(file, sessionId, STOLEN, fingerprintOf('transfer', STOLEN))
    const result = await resumeStored(file, sessionId, { approvalSecret: secret })
    expect(transfers).toEqual([])
    expect(result.toolCalls[0]).toMatchObject({ id: 'call_pay', isError: true, output: REFUSED_TOKEN })
  })

  it('a decision row written into the store, without the secret, is never acted on', async () => {
    for (const decision of [{ action: 'approve' }, { action: 'approve', token: '0'.repeat(64) }, { action: 'approve', updatedInput: STOLEN, token: tokenOf('guess', 's', 'call_pay', fingerprintOf('transfer', STOLEN)) }]) {
      const file = sqliteFile()
      const sessionId = await pauseStored(file, { approvalSecret: secret }, false)
      tamper(file, [{ sql: 'UPDATE pending_calls SET decision = ? WHERE session_id = ?', params: [JSON.stringify(decision), sessionId] }])
      const result = await resumeStored(file, sessionId, { approvalSecret: secret })
      expect(transfers).toEqual([])
      expect(result.toolCalls[0]).toMatchObject({ id: 'call_pay', isError: true, output: REFUSED_TOKEN })
    }
  })

  it('the decision taken with the token is kept with it: the approved call runs in the process that resumes', async () => {
    const file = sqliteFile()
    const sessionId = await pauseStored(file, { approvalSecret: secret }, true)
    const result = await resumeStored(file, sessionId, { approvalSecret: secret })
    expect(transfers).toEqual([ASKED])
    expect(result.content).toBe('tool said: sent 5 to alice')
  })

  it('a paused turn whose shape does not hold together is a STORE_ERROR, not a crash', async () => {
    const file = sqliteFile()
    const sessionId = await pauseStored(file, {}, true)
    const paused = storedPause(file, sessionId)
    paused.pending[0].index = 7
    tamper(file, [{ sql: 'UPDATE sessions SET paused = ? WHERE session_id = ?', params: [JSON.stringify(paused), sessionId] }])
    await expectCode(resumeAgent({ ...options({ store: { sqlite: file } }), sessionId }), 'STORE_ERROR', /read the paused turn.*waiting call call_pay is not call 7 of its turn/)
    expect(transfers).toEqual([])
  })
})
