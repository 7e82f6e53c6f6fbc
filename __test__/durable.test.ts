// Durable sessions (SPEC §8.2, with §8.1's approvals) across REAL processes: every step runs in
// its own Node child against one SQLite file in a temp dir, and a loopback HTTP server in this
// process plays webhook receivers and before-controls. Covered: a pause taken in one process,
// decided in a second and resumed in a third (the tool runs once, the model sees the whole
// turn, the conversation goes on); SESSION_NOT_FOUND / STORE_ERROR; hook lifetime (stored webhook
// hooks come back first, environment hooks come from the resuming process); secrets never in the
// file; a SIGKILL at each point of a pause and its resume (the effects ledger, outcome_unknown);
// and peer-bug regressions (decisions kept across a crash, two approvers, a run that fails to
// start). The in-process approval rules are in approvals.test.ts and are not repeated here.
// Written from the contract, not the implementation.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import type { ServerResponse } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { resumeAgent, scriptedModel, SdkError, type PendingApproval } from '../index.js'
import { fingerprintOf } from './helpers/canonical.js'
import { child, childKilledAt, effects, type Child } from './helpers/durable.js'
import { startServer, until, type ModelServer, type Recorded } from './helpers/server.js'
import { psql, scratchDatabase } from './helpers/postgres.js'

// ---------------------------------------------------------------------------------------------
// One temp dir per test: the SQLite file, the side-effect file, and files children wait on.
const dirs: string[] = []
let dir = ''
let env: Record<string, string | undefined> = {}
const READ = { id: 'call_read', name: 'Read', input: { file: 'a.txt' } }
const WRITE = { id: 'call_write', name: 'Write', input: { content: 'x' } }
const db = () => join(dir, 'sessions.db')
const fx = () => join(dir, 'effects.jsonl')
const writes = () => effects(fx()).filter((entry) => entry.name === 'Write')

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'arh-durable-'))
  dirs.push(dir)
  env = { DB: db(), EFFECTS: fx(), CALLS: JSON.stringify([WRITE]) }
  for (const name of ['AGENT_HOOK_WEBHOOK_URL', 'AGENT_HOOK_WEBHOOK_TOKEN', 'AGENT_HOOK_WEBHOOK_EVENTS', 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING', 'AGENT_HOOK_WEBHOOK_ON_ERROR']) env[name] = undefined
})
afterAll(() => {
  for (const path of dirs) rmSync(path, { recursive: true, force: true })
})

/** A child that must have run to its end (prints its output when it did not). */
function ran(result: Child): Child {
  expect(result.timedOut, `child timed out\n${result.stdout}\n${result.stderr}`).toBe(false)
  expect(result.all('FAILED'), `child failed\n${result.stdout}\n${result.stderr}`).toEqual([])
  expect(result.all('END'), `child did not end\n${result.stdout}\n${result.stderr}`).toHaveLength(1)
  return result
}
/** Process A: a new agent whose first run pauses; returns the session id and what A saw. */
async function pauseInA(extraEnv: Record<string, string | undefined> = {}) {
  const a = ran(await child(`const agent = await pause(); await agent.close()`, { ...env, ...extraEnv }))
  const sessionId: string = a.one('SESSION')
  env.SESSION = sessionId
  return { a, sessionId, pending: a.one('PENDING') as PendingApproval[], messages: a.one('MESSAGES') as any[] }
}
const toolTail = (messages: any[]) => messages.filter((message) => message.role === 'tool').map((message) => [message.tool_call_id, message.content])
const REJECTED = (reason: string) => `Tool execution aborted: User rejected execution: ${reason}`

// A crash after a resumed turn was answered: B approves (`approve`), the tool runs, and B is
// killed while the model, shown the result, is asked again. What C then finds depends on whether
// the answered turn was kept at once or left to the run's next write (`Run::quiet_resume`).
async function killedWhileModelAsked(output: string, approve = `agent.approve('call_write')`) {
  const b = await childKilledAt(`const agent = await open(); await ${approve}; await go(agent)`, { ...env, HANG_IN_MODEL: '1' }, 'ANSWERING')
  expect(b.killedAtMarker, b.stdout + b.stderr).toBe(true)
  expect(toolTail(b.one('MODEL'))).toEqual([['call_write', output]])
  expect(writes()).toHaveLength(1)
  return b
}
/** C when the answered turn was kept at once: it stands, nothing waits, resume has nothing to do. */
async function expectTurnKept(output: string) {
  const c = ran(await child(`const agent = await open(); emit('AGAIN', await outcome(agent.resume())); await agent.close()`, env))
  expect(c.all('PENDING')[0]).toEqual([])
  expect(c.one('AGAIN')).toMatchObject({ ok: false, code: 'NOTHING_TO_RESUME' })
  expect(toolTail(c.all('MESSAGES')[0])).toEqual([['call_write', output]])
  expect(writes()).toHaveLength(1)
}
/** C when the answered turn was left to the next write: the decided pause came back (it is
 * resumed, not sent past), and the ledger answers the call, which does not run again. */
async function expectTurnReplayed() {
  const c = ran(await child(`const agent = await open(); emit('SEND', await outcome(agent.send('next'))); await go(agent); await agent.close()`, env))
  expect(c.all('PENDING')[0]).toEqual([])
  expect(c.one('SEND')).toMatchObject({ ok: false, code: 'APPROVALS_PENDING', message: 'A paused run waits to be resumed: call resume() before send()' })
  expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
  expect(toolTail(c.one('MODEL'))).toEqual([['call_write', 'wrote x']])
  expect(writes()).toHaveLength(1)
}

// ---------------------------------------------------------------------------------------------
// The loopback receiver: routes by path; unrouted requests get 204 (a notification).
let receiver: ModelServer
const routes: Record<string, (req: Recorded, res: ServerResponse) => void> = {}
beforeAll(async () => {
  receiver = await startServer()
  receiver.reply((req, res) => {
    const route = routes[req.url.split('?')[0]]
    if (route) return route(req, res)
    res.writeHead(204).end()
  })
})
afterAll(() => receiver.close())
beforeEach(() => {
  receiver.requests.length = 0
  for (const key of Object.keys(routes)) delete routes[key]
})
const answer = (res: ServerResponse, body: unknown) => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body))
const at = (path: string) => receiver.requests.filter((req) => req.url.split('?')[0] === path)

async function rejection(promise: Promise<unknown>): Promise<SdkError> {
  try {
    await promise
  } catch (error) {
    return error as SdkError
  }
  throw new Error('expected the promise to reject')
}

// =============================================================================================
describe('a pause survives its process: paused in A, decided in B, resumed in C', () => {
  it('B sees the same pendingApprovals and SessionStart isResume; C runs the tool once, the model sees the turn in call order, the conversation goes on', async () => {
    env.CALLS = JSON.stringify([READ, WRITE])
    const { a, sessionId, pending, messages } = await pauseInA()
    expect(a.all('SessionStart')).toEqual([{ isResume: false }])
    expect(a.one('RESULT')).toMatchObject({ stopReason: 'interrupted' })
    const expected = [{ toolCallId: 'call_write', toolName: 'Write', input: WRITE.input, fingerprint: fingerprintOf('Write', WRITE.input), reason: 'ask', agentPath: [] }]
    expect(a.one('RESULT').pendingApprovals).toEqual(expected)
    expect(pending).toEqual(expected)
    // The turn's other call ran in A; the paused one did not.
    expect(effects(fx()).map((entry) => entry.name)).toEqual(['Read'])
    const pidA = effects(fx())[0].pid

    // B: a new process sees the same pause (same fingerprints), SessionStart says isResume, and approves.
    const b = ran(await child(`const agent = await open(); await agent.approve('call_write'); emit('AFTER', agent.pendingApprovals); await agent.close()`, env))
    expect(b.all('SessionStart')).toEqual([{ isResume: true }])
    expect(b.all('PENDING')[0]).toEqual(expected)
    expect(b.one('AFTER')).toEqual([])
    expect(b.all('MESSAGES')[0]).toEqual(messages)
    expect(b.all('MODEL')).toEqual([]) // deciding calls no model
    expect(effects(fx())).toHaveLength(1) // approving runs nothing

    // C: resumes; the approved call runs exactly once, Read is not redone, the model sees both results in call order.
    const c = ran(await child(`const agent = await open(); await go(agent); await agent.close()`, env))
    expect(c.all('SessionStart')).toEqual([{ isResume: true }])
    expect(c.all('PENDING')[0]).toEqual([])
    const resumed = c.one('RESUMED')
    expect(resumed).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_read=read a.txt | call_write=wrote x' })
    expect(effects(fx()).map((entry) => [entry.name, entry.pid === pidA ? 'A' : 'later'])).toEqual([
      ['Read', 'A'],
      ['Write', 'later'],
    ])
    expect(writes()).toHaveLength(1)
    expect(writes()[0].input).toEqual(WRITE.input)
    const [seen] = c.all('MODEL')
    expect(c.all('MODEL')).toHaveLength(1)
    expect(seen.map((message: any) => message.role)).toEqual(['assistant', 'tool', 'tool'])
    expect(seen[0].tool_calls.map((call: any) => call.id)).toEqual(['call_read', 'call_write'])
    expect(toolTail(seen)).toEqual([
      ['call_read', 'read a.txt'],
      ['call_write', 'wrote x'],
    ])
    // The conversation continues the stored one: A's messages are its beginning.
    const final = c.all('MESSAGES').at(-1)
    expect(final.slice(0, messages.length)).toEqual(messages)
    expect(final.slice(1, 2)[0].tool_calls.map((call: any) => call.id)).toEqual(['call_read', 'call_write'])
    expect(final.slice(2).map((message: any) => [message.role, message.tool_call_id ?? message.content])).toEqual([
      ['tool', 'call_read'],
      ['tool', 'call_write'],
      ['assistant', 'saw: call_read=read a.txt | call_write=wrote x'],
    ])

    // D: the finished session reopens with that conversation and nothing to resume.
    const d = ran(await child(`const agent = await open(); emit('RESUME', await outcome(agent.resume())); await agent.close()`, env))
    expect(d.all('PENDING')[0]).toEqual([])
    expect(d.all('MESSAGES')[0]).toEqual(final)
    expect(d.one('RESUME')).toMatchObject({ ok: false, code: 'NOTHING_TO_RESUME' })
    expect(effects(fx())).toHaveLength(2)
    expect(sessionId).toBeTruthy()
  })

  it('resumeAgent of an unknown id rejects SESSION_NOT_FOUND (a new file, and a file with other sessions)', async () => {
    const options = { model: scriptedModel(() => ({ text: 'never' })), advanced: { store: { sqlite: db() } } }
    const fresh = await rejection(resumeAgent({ ...options, sessionId: 'no-such-session' }))
    expect(fresh).toBeInstanceOf(SdkError)
    expect(fresh.code).toBe('SESSION_NOT_FOUND')
    await pauseInA()
    const other = await rejection(resumeAgent({ ...options, sessionId: 'still-no-such-session' }))
    expect(other).toBeInstanceOf(SdkError)
    expect(other.code).toBe('SESSION_NOT_FOUND')
  })

  it('a store that cannot be opened or read is STORE_ERROR, never "not found" and never an empty session', async () => {
    // A path under a regular file, and a file that is not a database.
    writeFileSync(join(dir, 'plain-file'), 'not a directory')
    writeFileSync(join(dir, 'garbage.db'), 'this is not an SQLite database '.repeat(200))
    for (const sqlite of [join(dir, 'plain-file', 'sessions.db'), join(dir, 'garbage.db')]) {
      const options = { model: scriptedModel(() => ({ text: 'never' })), advanced: { store: { sqlite } } }
      const error = await rejection(resumeAgent({ ...options, sessionId: 'any' }))
      expect(error, sqlite).toBeInstanceOf(SdkError)
      expect(error.code, `${sqlite}: ${error.message}`).toBe('STORE_ERROR')
      expect(error.message).not.toMatch(/not found/i)
    }
    // In a child too (a real process opening a bad path), and a pause that cannot be stored is not announced as one.
    const c = ran(
      await child(
        `emit('RESUME', await outcome(resumeAgent({ ...options, sessionId: 'any' })))
         const made = await outcome(createAgent(options))
         emit('CREATE', made)
         if (made.ok) emit('RUN', await outcome(made.value.send('go').then((r) => r.result()).then(summary)))`,
        { ...env, DB: join(dir, 'plain-file', 'sessions.db'), CALLS: JSON.stringify([WRITE]) },
      ),
    )
    expect(c.one('RESUME')).toMatchObject({ ok: false, code: 'STORE_ERROR' })
    const made = c.one('CREATE')
    if (made.ok) expect(c.one('RUN')).toMatchObject({ ok: false, code: 'STORE_ERROR' })
    else expect(made).toMatchObject({ ok: false, code: 'STORE_ERROR' })
    expect(writes()).toEqual([])
  })
})

// =============================================================================================
describe('hook lifetime across processes (§8.2)', () => {
  it('a beforeToolCall control stored at pause time in A governs the approved call resumed in C, though B and C give no hooks: it denies, the tool does not run, the denial is the result', async () => {
    routes['/gate'] = (_req, res) => answer(res, { decision: 'deny', reason: 'stored control says no' })
    const gate = { id: 'gate', type: 'beforeToolCall', matcher: '^Write$', webhook: { url: `${receiver.url}/gate`, responseHandling: 'toolCall', timeout: 5 } }
    await pauseInA({ HOOKS: JSON.stringify([gate]) })
    expect(at('/gate')).toHaveLength(0) // the paused call never reached its controls in A
    ran(await child(`const agent = await open(); await agent.approve('call_write'); await agent.close()`, { ...env, BARE: '1' }))
    expect(at('/gate')).toHaveLength(0)

    const c = ran(await child(`const agent = await open(); await go(agent); await agent.close()`, { ...env, BARE: '1' }))
    expect(at('/gate').map((req) => [req.body.toolCallId, req.body.toolName, req.body.hookId])).toEqual([['call_write', 'Write', 'gate']])
    expect(writes()).toEqual([])
    const resumed = c.one('RESUMED')
    expect(resumed).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=stored control says no' })
    expect(resumed.toolCalls).toEqual([{ id: 'call_write', output: 'stored control says no', isError: true }])
    expect(toolTail(c.one('MODEL'))).toEqual([['call_write', 'stored control says no']])
  })

  it('stored webhook hooks come back first, then the inline callbacks given to resumeAgent now; given the same options again, a stored webhook fires once, not twice', async () => {
    const seen: string[] = []
    routes['/seen'] = (_req, res) => answer(res, seen)
    routes['/stored-control'] = (req, res) => {
      seen.push(`/stored-control:${req.body.toolCallId}`)
      answer(res, { decision: 'allow' })
    }
    routes['/stored-post'] = (req, res) => {
      seen.push(`/stored-post:${req.body.toolCallId}`)
      res.writeHead(204).end()
    }
    const hooks = [
      { id: 'stored-control', type: 'beforeToolCall', matcher: '^Write$', webhook: { url: `${receiver.url}/stored-control`, responseHandling: 'toolCall', timeout: 5 } },
      { id: 'stored-post', type: 'PostToolUse', matcher: '^Write$', webhook: { url: `${receiver.url}/stored-post`, timeout: 5 } },
    ]
    await pauseInA({ HOOKS: JSON.stringify(hooks) })
    expect(seen).toEqual([])
    // C is given the same options (the documented `{ ...options, sessionId }`) plus an inline
    // PostToolUse callback that asks the receiver what it has seen so far.
    const c = ran(
      await child(
        `const inlinePost = { id: 'inline-post', type: 'PostToolUse', handler: async (e) => void emit('INLINE', { toolCallId: e.toolCallId, seen: await (await fetch(env.RECEIVER + '/seen')).json() }) }
         const agent = await open({ advanced: { ...options.advanced, hooks: [...options.advanced.hooks, inlinePost] } })
         await agent.approve('call_write'); await go(agent); await agent.close()`,
        { ...env, HOOKS: JSON.stringify(hooks), RECEIVER: receiver.url },
      ),
    )
    expect(c.all('SessionStart')).toEqual([{ isResume: true }]) // an inline callback of the options given now
    expect(c.all('INLINE')).toEqual([{ toolCallId: 'call_write', seen: ['/stored-control:call_write', '/stored-post:call_write'] }])
    expect(seen).toEqual(['/stored-control:call_write', '/stored-post:call_write'])
    expect(c.one('RESUMED')).toMatchObject({ ok: true, result: 'saw: call_write=wrote x' })
    expect(writes()).toHaveLength(1)
  })

  it('environment hooks come from the resuming process: one present in A and removed in C does not fire in C; one added only in C fires there', async () => {
    env.CALLS = JSON.stringify([READ, WRITE])
    const envHook = (path: string, token: string) => ({ AGENT_HOOK_WEBHOOK_URL: `${receiver.url}${path}`, AGENT_HOOK_WEBHOOK_TOKEN: token, AGENT_HOOK_WEBHOOK_EVENTS: 'PostToolUse' })
    await pauseInA(envHook('/env-a', 'token-a'))
    // In A it is live: the Read that ran there was notified, with A's token.
    expect(at('/env-a').map((req) => [req.body.toolCallId, req.headers.authorization])).toEqual([['call_read', 'Bearer token-a']])
    ran(await child(`const agent = await open(); await agent.approve('call_write'); await agent.close()`, env))
    receiver.requests.length = 0

    const c = ran(await child(`const agent = await open(); await go(agent); await agent.close()`, { ...env, ...envHook('/env-c', 'token-c') }))
    expect(c.one('RESUMED')).toMatchObject({ ok: true, result: 'saw: call_read=read a.txt | call_write=wrote x' })
    expect(at('/env-a')).toEqual([])
    expect(at('/env-c').map((req) => [req.body.toolCallId, req.body.hookType, req.headers.authorization])).toEqual([['call_write', 'PostToolUse', 'Bearer token-c']])
  })
})

// =============================================================================================
describe('secrets never reach the store', () => {
  it('the SQLite file and its -wal hold no apiKey, connection header, resolved header template or environment hook token/URL (the template text may be there)', async () => {
    const marks = {
      API_KEY: 'sk-MARKapikey1111',
      CONN_HEADER: 'MARKconnheader2222',
      TOKEN: 'MARKenvtemplate3333',
      AGENT_HOOK_WEBHOOK_TOKEN: 'MARKenvhooktoken4444',
    }
    const envHookPath = '/env-hook-MARKurl5555'
    const notify = {
      id: 'notify',
      type: 'PostToolUse',
      webhook: { url: `${receiver.url}/templated`, headers: { Authorization: 'Bearer ${TOKEN}' }, allowedEnvVars: ['TOKEN'], timeout: 5 },
    }
    const secretEnv = { ...marks, HOOKS: JSON.stringify([notify]), AGENT_HOOK_WEBHOOK_URL: `${receiver.url}${envHookPath}`, AGENT_HOOK_WEBHOOK_EVENTS: 'PostToolUse,TaskCompleted' }
    env.CALLS = JSON.stringify([READ, WRITE])
    const files = () => readdirSync(dir).filter((name) => name.startsWith('sessions.db'))
    let sawWal = false
    const scan = (when: string) => {
      const names = files()
      if (names.includes('sessions.db-wal')) sawWal = true
      const bytes = Buffer.concat(names.map((name) => readFileSync(join(dir, name))))
      for (const [name, value] of Object.entries(marks)) expect(bytes.includes(Buffer.from(value)), `${when}: ${name} found in ${names}`).toBe(false)
      expect(bytes.includes(Buffer.from('MARKurl5555')), `${when}: the environment hook's URL found in ${names}`).toBe(false)
      return bytes
    }

    // A pauses and is killed at once: the file and its WAL stay as the pause left them.
    const a = await childKilledAt(`await pause(); await forever()`, { ...env, ...secretEnv }, 'PAUSED')
    expect(a.killedAtMarker, a.stdout + a.stderr).toBe(true)
    env.SESSION = a.one('SESSION')
    scan('after the pause')
    // The secrets were really in use: the Read's PostToolUse reached both receivers with them.
    expect(at('/templated').map((req) => req.headers.authorization)).toEqual([`Bearer ${marks.TOKEN}`])
    expect(at(envHookPath).map((req) => req.headers.authorization)).toContain(`Bearer ${marks.AGENT_HOOK_WEBHOOK_TOKEN}`)

    // B decides and resumes to the end, then is killed (WAL left behind again).
    const b = await childKilledAt(`const agent = await open(); await agent.approve('call_write'); await go(agent); emit('HOLD'); await forever()`, { ...env, ...secretEnv }, 'HOLD')
    expect(b.killedAtMarker, b.stdout + b.stderr).toBe(true)
    expect(b.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done' })
    const bytes = scan('after the resumed run')
    expect(sawWal, `the WAL file was never there to scan: ${files()}`).toBe(true)
    // The stored hook keeps its template, unresolved.
    expect(bytes.includes(Buffer.from('${TOKEN}'))).toBe(true)

    // A clean exit (checkpoint) leaves no secret either.
    ran(await child(`const agent = await open(); await agent.close()`, { ...env, ...secretEnv }))
    scan('after a clean exit')
  })
})

// =============================================================================================
describe('kill matrix: SIGKILL at each point, then resume in a new process', () => {
  it('(a) right after the pause is stored: the new process has the same pause; approving runs the tool once', async () => {
    const a = await childKilledAt(`await pause(); await forever()`, env, 'PAUSED')
    expect(a.killedAtMarker, a.stdout + a.stderr).toBe(true)
    env.SESSION = a.one('SESSION')
    const pending = a.one('PENDING')
    const b = ran(await child(`const agent = await open(); await agent.approve('call_write'); await go(agent); await agent.close()`, env))
    expect(b.all('PENDING')[0]).toEqual(pending)
    expect(pending).toEqual([{ toolCallId: 'call_write', toolName: 'Write', input: WRITE.input, fingerprint: fingerprintOf('Write', WRITE.input), reason: 'ask', agentPath: [] }])
    expect(b.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
    expect(writes()).toHaveLength(1)
  })

  it('(b) right after approve resolved: the decision is kept (nothing waits, approving again is APPROVAL_NOT_PENDING) and resume runs the tool once', async () => {
    await pauseInA()
    const b = await childKilledAt(`const agent = await open(); await agent.approve('call_write'); emit('APPROVED'); await forever()`, env, 'APPROVED')
    expect(b.killedAtMarker, b.stdout + b.stderr).toBe(true)
    const c = ran(await child(`const agent = await open(); emit('AGAIN', await outcome(agent.approve('call_write'))); await go(agent); await agent.close()`, env))
    expect(c.all('PENDING')[0]).toEqual([])
    expect(c.one('AGAIN')).toMatchObject({ ok: false, code: 'APPROVAL_NOT_PENDING' })
    expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
    expect(writes()).toHaveLength(1)
  })

  describe('(c) while the approved tool runs (started, not finished)', () => {
    async function crashInTool(sideEffect: string) {
      env.SIDE_EFFECT = sideEffect
      const { pending } = await pauseInA()
      const b = await childKilledAt(`const agent = await open(); await agent.approve('call_write'); await go(agent)`, { ...env, HANG_IN_TOOL: '1' }, 'STARTED')
      expect(b.killedAtMarker, b.stdout + b.stderr).toBe(true)
      expect(writes()).toHaveLength(1)
      return pending as PendingApproval[]
    }

    it('non_idempotent: it is not run again silently but waits as outcome_unknown (resume alone is APPROVALS_PENDING); approving runs it again', async () => {
      const [paused] = await crashInTool('non_idempotent')
      const c = await child(
        `const agent = await open()
         emit('EARLY', await outcome(agent.resume().then((r) => r.result()).then(summary)))
         emit('EARLY_WRITES', fs.readFileSync(env.EFFECTS, 'utf8').split('\\n').filter(Boolean).length)
         await agent.approve('call_write'); await go(agent); await agent.close()`,
        env,
      )
      // Not run again silently: it waits, and resume without a decision is refused and runs nothing.
      expect(c.all('PENDING')[0]).toEqual([{ toolCallId: 'call_write', toolName: 'Write', input: WRITE.input, fingerprint: paused.fingerprint, reason: 'outcome_unknown', agentPath: [] }])
      expect(c.one('EARLY')).toMatchObject({ ok: false, code: 'APPROVALS_PENDING' })
      expect(c.one('EARLY').message).toContain('call_write')
      expect(c.one('EARLY_WRITES')).toBe(1)
      // Approving it (SPEC §8.3: "Approving an outcome_unknown call runs it again").
      ran(c)
      expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
      expect(writes()).toHaveLength(2) // once before the crash, once more after the new approval
    })

    it('non_idempotent: rejecting the outcome_unknown call tells the model, and the tool does not run again', async () => {
      await crashInTool('non_idempotent')
      const c = await child(`const agent = await open(); await agent.reject('call_write', { reason: 'may have run' }); await go(agent); await agent.close()`, env)
      expect(c.all('PENDING')[0].map((p: PendingApproval) => p.reason)).toEqual(['outcome_unknown'])
      ran(c)
      expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: `saw: call_write=${REJECTED('may have run')}` })
      expect(toolTail(c.one('MODEL'))).toEqual([['call_write', REJECTED('may have run')]])
      expect(writes()).toHaveLength(1)
    })

    for (const sideEffect of ['pure', 'idempotent'])
      it(`${sideEffect}: it is run again silently (nothing waits for a decision)`, async () => {
        await crashInTool(sideEffect)
        const c = ran(await child(`const agent = await open(); await go(agent); await agent.close()`, env))
        expect(c.all('PENDING')[0]).toEqual([])
        expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
        expect(writes()).toHaveLength(2)
      })
  })

  it('(d) after the tool finished, before the turn completed (a PostToolUse hook hangs): the call is not run again and its result reaches the model', async () => {
    await pauseInA()
    const b = await childKilledAt(`const agent = await open(); await agent.approve('call_write'); await go(agent)`, { ...env, HANG_IN_POST: '1' }, 'POSTTOOL')
    expect(b.killedAtMarker, b.stdout + b.stderr).toBe(true)
    expect(writes()).toHaveLength(1)
    const c = ran(await child(`const agent = await open(); await go(agent); await agent.close()`, env))
    expect(c.all('PENDING')[0]).toEqual([])
    expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
    expect(writes()).toHaveLength(1)
  })
  it('(d2) after the resumed turn was answered, while the model is asked again (no hook hears of the result): the call is not run again and its result reaches the model', async () => {
    await pauseInA()
    await killedWhileModelAsked('wrote x')
    await expectTurnReplayed()
  })
  // (d3) Where a replay could differ from what was seen, the answered turn is kept at once: the
  // crash finds it kept, nothing is replayed (resume has nothing to do) and nothing runs again.
  const keptAtOnce: { name: string; hooks?: object[]; approve: string; output: string; check?: () => void }[] = [
    {
      name: 'a result control on the call (its denial stands, asked once)',
      hooks: [{ id: 'after', type: 'afterToolCall', matcher: '^Write$', webhook: { url: '/after', responseHandling: 'toolCall', timeout: 5 } }],
      approve: `agent.approve('call_write')`,
      output: 'after control says no',
      check: () => expect(at('/after')).toHaveLength(1),
    },
    { name: 'an approval with updatedInput (the ledger holds the paused input)', approve: `agent.approve('call_write', { updatedInput: { content: 'y' } })`, output: 'wrote y' },
    { name: 'a StepStart hook (it fires before the next write)', hooks: [{ id: 'steps', type: 'StepStart', webhook: { url: '/steps' } }], approve: `agent.approve('call_write')`, output: 'wrote x' },
  ]
  for (const { name, hooks, approve, output, check } of keptAtOnce)
    it(`(d3) the same crash with ${name}: the answered turn was kept at once, so it stands and nothing is replayed`, async () => {
      routes['/after'] = (_req, res) => answer(res, { decision: 'deny', reason: 'after control says no' })
      if (hooks) env.HOOKS = JSON.stringify(hooks.map((hook: any) => ({ ...hook, webhook: { ...hook.webhook, url: `${receiver.url}${hook.webhook.url}` } })))
      await pauseInA()
      await killedWhileModelAsked(output, approve)
      await expectTurnKept(output)
      check?.()
    })
  it('(e) during the first run, while an allowed tool runs and before any pause: that call waits as outcome_unknown; the call that never started goes through the pipeline again (asks again); each tool runs once more at most, with an approval', async () => {
    env.CALLS = JSON.stringify([READ, WRITE])
    const a = await childKilledAt(`const agent = await createAgent(options); emit('SESSION', agent.sessionId); await agent.send('go'); await forever()`, { ...env, HANG_IN_READ: '1' }, 'STARTED')
    expect(a.killedAtMarker, a.stdout + a.stderr).toBe(true)
    env.SESSION = a.one('SESSION')
    expect(effects(fx()).map((entry) => entry.name)).toEqual(['Read'])
    // Approve whatever waits, resume, until the run stops pausing (bounded).
    const c = ran(
      await child(
        `const agent = await open()
         for (let round = 0; round < 3; round++) {
           for (const p of agent.pendingApprovals) await agent.approve(p.toolCallId)
           const run = await go(agent)
           emit('WAITING', agent.pendingApprovals)
           if (!run.ok || run.value.stopReason !== 'interrupted') break
         }
         await agent.close()`,
        env,
      ),
    )
    const first: PendingApproval[] = c.all('PENDING')[0]
    expect(first.find((p) => p.toolCallId === 'call_read')).toEqual({ toolCallId: 'call_read', toolName: 'Read', input: READ.input, fingerprint: fingerprintOf('Read', READ.input), reason: 'outcome_unknown', agentPath: [] })
    expect(first.filter((p) => p.toolCallId === 'call_write' && p.reason === 'outcome_unknown')).toEqual([])
    expect(c.all('RESUMED').at(-1)).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_read=read a.txt | call_write=wrote x' })
    expect(effects(fx()).map((entry) => entry.name)).toEqual(['Read', 'Read', 'Write'])
  })
})

// =============================================================================================
describe('peer-bug regressions', () => {
  it('decisions given in B survive B’s crash: C finds nothing waiting, cannot decide again, and resumes with them (approved runs once, rejected tells the model)', async () => {
    env.CALLS = JSON.stringify([
      { id: 'w1', name: 'Write', input: { content: 'one' } },
      { id: 'w2', name: 'Write', input: { content: 'two' } },
    ])
    const { pending } = await pauseInA()
    expect(pending.map((p) => p.toolCallId)).toEqual(['w1', 'w2'])
    const b = await childKilledAt(`const agent = await open(); await agent.approve('w1'); await agent.reject('w2', { reason: 'not two' }); emit('DECIDED'); await forever()`, env, 'DECIDED')
    expect(b.killedAtMarker, b.stdout + b.stderr).toBe(true)
    const c = ran(
      await child(
        `const agent = await open()
         emit('AGAIN', [await outcome(agent.approve('w1')), await outcome(agent.approve('w2'))])
         await go(agent); await agent.close()`,
        env,
      ),
    )
    expect(c.all('PENDING')[0]).toEqual([])
    expect(c.one('AGAIN').map((o: any) => o.code)).toEqual(['APPROVAL_NOT_PENDING', 'APPROVAL_NOT_PENDING'])
    expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: `saw: w1=wrote one | w2=${REJECTED('not two')}` })
    expect(writes().map((entry) => entry.input)).toEqual([{ content: 'one' }])
  })

  it('two processes approving the same call at once: exactly one succeeds, the other gets APPROVAL_NOT_PENDING; the winner’s input runs once', async () => {
    await pauseInA()
    const racer = (name: string) =>
      child(
        `const agent = await open()
         fs.writeFileSync(env.READY, '')
         while (!fs.existsSync(env.GO)) await new Promise((r) => setTimeout(r, 2))
         emit('APPROVE', await outcome(agent.approve('call_write', { updatedInput: { content: '${name}' } })))
         await agent.close()`,
        { ...env, READY: join(dir, `ready-${name}`), GO: join(dir, 'go') },
      )
    const both = Promise.all([racer('X'), racer('Y')])
    await until(() => existsSync(join(dir, 'ready-X')) && existsSync(join(dir, 'ready-Y')), 9000)
    writeFileSync(join(dir, 'go'), '')
    const [x, y] = (await both).map(ran)
    const outcomes = { X: x.one('APPROVE'), Y: y.one('APPROVE') }
    const winners = Object.entries(outcomes).filter(([, o]) => o.ok)
    const losers = Object.entries(outcomes).filter(([, o]) => !o.ok)
    expect(winners, JSON.stringify(outcomes)).toHaveLength(1)
    expect(losers.map(([, o]) => o.code)).toEqual(['APPROVAL_NOT_PENDING'])

    const c = ran(await child(`const agent = await open(); await go(agent); await agent.close()`, env))
    const winner = winners[0][0]
    expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: `saw: call_write=wrote ${winner}` })
    expect(writes().map((entry) => entry.input)).toEqual([{ content: winner }])
  })

  const BAD_ENV = `Object.assign(process.env, { AGENT_HOOK_WEBHOOK_URL: '${'${RECEIVER}'}/env', AGENT_HOOK_WEBHOOK_TOKEN: 't', AGENT_HOOK_WEBHOOK_EVENTS: 'NoSuchEvent' })`
  const FIX_ENV = `delete process.env.AGENT_HOOK_WEBHOOK_URL; delete process.env.AGENT_HOOK_WEBHOOK_TOKEN; delete process.env.AGENT_HOOK_WEBHOOK_EVENTS`
  const badEnv = () => BAD_ENV.replace('${RECEIVER}', receiver.url)

  it('an approval is not lost when the resumed run fails to start (invalid environment hook): a later process resumes it and the tool runs once', async () => {
    await pauseInA()
    const b = ran(await child(`const agent = await open(); await agent.approve('call_write'); ${badEnv()}; await go(agent); await agent.close()`, env))
    const failed = b.one('RESUMED')
    expect(failed).toMatchObject({ ok: false, code: 'CONFIG_ERROR' })
    expect(failed.message).toContain('AGENT_HOOK_WEBHOOK_EVENTS')
    expect(failed.message).not.toContain('NoSuchEvent') // the variable is named, never its value
    expect(writes()).toEqual([])

    const c = ran(await child(`const agent = await open(); emit('AGAIN', await outcome(agent.approve('call_write'))); await go(agent); await agent.close()`, env))
    expect(c.all('PENDING')[0]).toEqual([])
    expect(c.one('AGAIN')).toMatchObject({ ok: false, code: 'APPROVAL_NOT_PENDING' })
    expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
    expect(writes()).toHaveLength(1)
  })

  it('… and in the same process: fix the environment, resume again, the approval is still there and the tool runs once', async () => {
    await pauseInA()
    const b = ran(
      await child(
        `const agent = await open(); await agent.approve('call_write'); ${badEnv()}
         await go(agent)
         emit('BETWEEN', agent.pendingApprovals)
         ${FIX_ENV}
         await go(agent); await agent.close()`,
        env,
      ),
    )
    const [failed, done] = b.all('RESUMED')
    expect(failed).toMatchObject({ ok: false, code: 'CONFIG_ERROR' })
    expect(b.one('BETWEEN')).toEqual([])
    expect(done).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
    expect(writes()).toHaveLength(1)
  })
})

// =============================================================================================
// The same kill on PostgreSQL, whose resumeAgent reads the session, its pending calls and what
// the effects ledger says of them in one statement: the new process must still see the call as
// started and never finished, or as finished with its result.
describe('kill matrix on PostgreSQL: SIGKILL while the approved tool runs, and after it ran', () => {
  const database = scratchDatabase('arh_durable', 'the PostgreSQL kill test')

  it('non_idempotent: the new process finds it outcome_unknown and runs nothing until it is approved again', async (context) => {
    if (!database.available()) return context.skip()
    env.PG = database.url()
    env.SIDE_EFFECT = 'non_idempotent'
    const { pending } = await pauseInA()
    const b = await childKilledAt(`const agent = await open(); await agent.approve('call_write'); await go(agent)`, { ...env, HANG_IN_TOOL: '1' }, 'STARTED')
    expect(b.killedAtMarker, b.stdout + b.stderr).toBe(true)
    expect(writes()).toHaveLength(1)
    const c = ran(await child(`const agent = await open(); emit('EARLY', await outcome(agent.resume().then((r) => r.result()).then(summary))); await agent.approve('call_write'); await go(agent); await agent.close()`, env))
    expect(c.all('PENDING')[0]).toEqual([{ ...pending[0], reason: 'outcome_unknown' }])
    expect(c.one('EARLY')).toMatchObject({ ok: false, code: 'APPROVALS_PENDING' })
    expect(c.one('RESUMED')).toMatchObject({ ok: true, stopReason: 'done', result: 'saw: call_write=wrote x' })
    expect(writes()).toHaveLength(2)
  }, 60_000)

  it('(d2) killed while the model is asked again after the resumed turn: the decided pause and the ledger on PostgreSQL answer the call, which does not run again', async (context) => {
    if (!database.available()) return context.skip()
    env.PG = database.url()
    await pauseInA()
    await killedWhileModelAsked('wrote x')
    await expectTurnReplayed()
  }, 60_000)

  it('(d4) the same crash when the ledger refused the result (a trigger raises on it): the answered turn was kept at once, so the result stands and nothing waits', async (context) => {
    if (!database.available()) return context.skip()
    env.PG = database.url()
    await pauseInA()
    // A fault from outside: the database refuses to mark any ledger entry finished.
    psql(
      `CREATE FUNCTION agent_runtime_hooks.refuse_result() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'the ledger refuses a result'; END $$;
       CREATE TRIGGER refuse_result BEFORE UPDATE ON agent_runtime_hooks.effects FOR EACH ROW WHEN (NEW.status = 'finished') EXECUTE FUNCTION agent_runtime_hooks.refuse_result();`,
      database.url(),
    )
    const b = await killedWhileModelAsked('wrote x').finally(() =>
      psql(`DROP TRIGGER refuse_result ON agent_runtime_hooks.effects; DROP FUNCTION agent_runtime_hooks.refuse_result();`, database.url()),
    )
    expect(b.stderr).toContain("The tool's result could not be recorded in the effects ledger")
    // Had the turn waited for the next write, the ledger's unfinished entry would make the call
    // outcome_unknown here, waiting for a decision again.
    await expectTurnKept('wrote x')
  }, 60_000)
})
