// Many workers on one PostgreSQL database (SPEC §8.3, with §8.1–8.2), end to end across REAL
// processes: every worker is its own Node process (helpers/workers.ts) driving the same session
// through `advanced.store: { postgres }`, the way a careless or hostile integrator's fleet would.
// Covered:
//   1. two, then four workers racing `send` on one session: exactly one run is accepted, every
//      other `send` rejects SESSION_LEASED (also after the losers closed their agents, while the
//      winner still runs); the store gains one prompt and one tool run; the model saw exactly the
//      stored conversation plus the winner's prompt;
//   2. a worker SIGKILLed inside a non_idempotent tool (leaseTtlMs 500): its lease is still live
//      right after the kill (SESSION_LEASED), expires after the TTL, and the next resumeAgent finds
//      the call as an outcome_unknown approval; approving it runs the tool exactly once more
//      (the kill → recovered result time is printed);
//   3. a stale worker (SIGSTOPped past its leaseTtlMs 400 while its tool runs; three rounds):
//      another worker takes the session over and completes a turn; once continued, the stale run
//      stops with SESSION_LEASED and nothing it writes reaches the store (the new conversation is
//      intact, and goes on in a fourth worker);
//   4. two processes deciding the same paused call at once: exactly one decision is taken, the
//      other rejects APPROVAL_NOT_PENDING, and the resumed run follows the winner.
// The file creates its own database (dropped afterwards); with no server at ARH_TEST_POSTGRES_URL
// (default postgres://postgres@127.0.0.1:5432/postgres) it is skipped with a printed line.
// Written from the contract (SPEC §8.3), not the implementation.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { resumeAgent, scriptedModel, type Message, type PendingApproval } from '../index.js'
import { fingerprintOf } from './helpers/canonical.js'
import { effects, ended, killLiveWorkers, publish, runWorker, startWorker, type Worker } from './helpers/workers.js'

// ---------------------------------------------------------------------------------------------
// The database: one per file, created and dropped here; skipped, with a printed line, without a server.
const admin = new URL(process.env.ARH_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
const database = `arh_workers_${process.pid}_${Date.now()}`
const psql = (sql: string, at = admin.toString()) =>
  execFileSync('psql', [at, '-v', 'ON_ERROR_STOP=1', '-qAtc', sql], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 }).toString()
const pgUrl = (() => {
  const target = new URL(admin.toString())
  target.pathname = `/${database}`
  return target.toString()
})()

let noServer = ''
try {
  psql('SELECT 1')
} catch (error) {
  const stderr = String((error as { stderr?: unknown }).stderr ?? '').trim()
  noServer = (stderr || (error instanceof Error ? error.message : String(error))).split('\n')[0]
  console.warn(`skipping many-worker tests (workers.test.ts): no PostgreSQL server at ${admin.host} (${noServer}); set ARH_TEST_POSTGRES_URL to test against one`)
}
const available = noServer === ''

// ---------------------------------------------------------------------------------------------
const REJECTED = (reason: string) => `Tool execution aborted: User rejected execution: ${reason}`
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))

// ---------------------------------------------------------------------------------------------
// One temp dir per test: the effects file and the files workers wait on.
const dirs: string[] = []
let dir = ''
let base: Record<string, string | undefined> = {}
const fx = () => join(dir, 'effects.jsonl')
const file = (name: string) => join(dir, name)

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'arh-workers-'))
  dirs.push(dir)
  base = { PG: pgUrl, EFFECTS: fx() }
  // Environment hooks of the test runner's environment must not reach the workers.
  for (const name of ['AGENT_HOOK_WEBHOOK_URL', 'AGENT_HOOK_WEBHOOK_TOKEN', 'AGENT_HOOK_WEBHOOK_EVENTS', 'AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING', 'AGENT_HOOK_WEBHOOK_ON_ERROR']) base[name] = undefined
})
afterEach(() => killLiveWorkers())
afterAll(() => {
  for (const path of dirs) rmSync(path, { recursive: true, force: true })
})

/** What a fresh `resumeAgent` in this process finds in the store. */
async function stored(sessionId: string): Promise<{ messages: Message[]; pending: PendingApproval[] }> {
  const agent = await resumeAgent({ model: scriptedModel(() => ({ text: 'reader: never sent' })), advanced: { store: { postgres: pgUrl } }, sessionId })
  try {
    return { messages: agent.messages, pending: agent.pendingApprovals }
  } finally {
    await agent.close()
  }
}

/** The four messages one completed `prompt` adds with the scripted model of the workers. */
function turnOf(prompt: string, output = `done ${prompt}`) {
  return [
    { role: 'user', content: prompt },
    { role: 'assistant', tool_calls: [{ id: `call_${prompt}`, type: 'function', function: { name: 'Work', arguments: JSON.stringify({ who: prompt }) } }] },
    { role: 'tool', tool_call_id: `call_${prompt}`, content: output },
    { role: 'assistant', content: `answer ${prompt}: call_${prompt}=${output}` },
  ]
}
/** Checks `messages` is exactly turnOf(...) (the tool-call turn's text and argument spacing aside). */
function expectTurns(messages: any[], prompts: string[]) {
  expect(messages.map((m) => m.role)).toEqual(prompts.flatMap(() => ['user', 'assistant', 'tool', 'assistant']))
  prompts.forEach((prompt, i) => {
    const [user, call, result, answer] = messages.slice(i * 4, i * 4 + 4)
    const [eUser, eCall, eResult, eAnswer] = turnOf(prompt) as any[]
    expect(user).toEqual(eUser)
    expect(call.tool_calls).toHaveLength(1)
    expect(call.tool_calls[0]).toMatchObject({ id: eCall.tool_calls[0].id, type: 'function', function: { name: 'Work' } })
    expect(JSON.parse(call.tool_calls[0].function.arguments)).toEqual({ who: prompt })
    expect(result).toEqual(eResult)
    expect(answer).toMatchObject(eAnswer)
  })
}

/** A creator process: a new agent whose first run ('init') completes; returns the session id. */
async function createSession(prompt = 'init', extra: Record<string, string | undefined> = {}): Promise<{ sessionId: string; creator: Worker }> {
  const creator = await runWorker(
    'creator',
    `const agent = await createAgent(options)
     emit('SESSION', agent.sessionId)
     emit('RESULT', await settled(await agent.send(env.PROMPT)))
     emit('MESSAGES', agent.messages)
     await agent.close()`,
    { ...base, PROMPT: prompt, ...extra },
  )
  return { sessionId: creator.one('SESSION'), creator }
}

// =============================================================================================
describe.skipIf(!available)('many workers on one PostgreSQL database (SPEC §8.3)', () => {
  beforeAll(() => {
    psql(`CREATE DATABASE ${database}`)
  })
  afterAll(async () => {
    await killLiveWorkers()
    psql(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
  })

  // -------------------------------------------------------------------------------------------
  it('1. two, then four workers race send on one session: exactly one run is accepted, every other send is SESSION_LEASED; the store gains one prompt and one tool run', async () => {
    const { sessionId, creator } = await createSession('init')
    expect(creator.one('RESULT')).toMatchObject({ ok: true, stopReason: 'done', result: 'answer init: call_init=done init' })
    let conversation: Message[] = (await stored(sessionId)).messages
    expectTurns(conversation, ['init'])

    const winners: string[] = []
    for (const [round, count] of [
      ['r1', 2],
      ['r2', 4],
    ] as const) {
      const go = file(`go-${round}`)
      const hold = file(`hold-${round}`) // the winner's tool waits for it: the race overlaps the whole run
      const prompts = Array.from({ length: count }, (_, i) => `${round}w${i + 1}`)
      const racers = prompts.map((prompt) => startWorker(prompt, `await race()`, { ...base, SESSION: sessionId, PROMPT: prompt, GO: go, HOLD: hold }))
      await Promise.all(racers.map((racer) => racer.waitFor('READY')))
      publish(go, String(Date.now()))
      const sends = await Promise.all(racers.map((racer) => racer.waitFor('SEND')))
      const report = JSON.stringify(Object.fromEntries(prompts.map((prompt, i) => [prompt, sends[i]])))

      // Exactly one send resolved; every other rejected with SESSION_LEASED (an SdkError).
      const accepted = racers.filter((_, i) => sends[i].ok)
      expect(accepted.map((racer) => racer.name), `${round}: ${report}`).toHaveLength(1)
      const winner = accepted[0]
      const losers = racers.filter((racer) => racer !== winner)
      for (const loser of losers) expect(loser.one('SEND'), `${round} ${loser.name}: ${report}`).toMatchObject({ ok: false, name: 'SdkError', code: 'SESSION_LEASED' })

      // The losers close their agents; the winner's run still holds the session: a late worker is refused too.
      await Promise.all(losers.map(async (loser) => (await loser.exited, ended(loser))))
      expect(await winner.waitFor('STARTED')).toBe(winner.name)
      const late = await runWorker(`${round}late`, `await race()`, { ...base, SESSION: sessionId, PROMPT: `${round}late`, GO: go, HOLD: hold })
      expect(late.one('SEND'), late.describe()).toMatchObject({ ok: false, code: 'SESSION_LEASED' })
      expect(winner.all('RESULT'), 'the winner finished while its tool was held').toEqual([])

      publish(hold)
      await winner.exited
      ended(winner)
      const p = winner.name
      winners.push(p)
      expect(winner.one('RESULT')).toMatchObject({ ok: true, stopReason: 'done', result: `answer ${p}: call_${p}=done ${p}`, toolCalls: [{ id: `call_${p}`, output: `done ${p}`, isError: false }] })

      // One tool run in the whole round, by the winner's process.
      const ran = effects(fx()).filter((entry) => entry.who.startsWith(round))
      expect(ran.map((entry) => [entry.who, entry.pid]), report).toEqual([[p, winner.one('PID')]])
      // Only the winner's model was asked anything, and first with exactly the stored conversation plus its prompt.
      for (const other of [...losers, late]) expect(other.all('MODEL'), other.name).toEqual([])
      const asked = winner.all('MODEL')
      expect(asked).toHaveLength(2)
      expect(asked[0].messages).toEqual([...conversation, { role: 'user', content: p }])
      expect(asked[1].messages.slice(0, conversation.length + 1)).toEqual([...conversation, { role: 'user', content: p }])
      expect(asked[1].messages.slice(conversation.length + 2)).toEqual([{ role: 'tool', tool_call_id: `call_${p}`, content: `done ${p}` }])

      // The store: the previous conversation, then exactly one new prompt and its turn.
      const after = await stored(sessionId)
      expect(after.pending).toEqual([])
      expect(after.messages.slice(0, conversation.length)).toEqual(conversation)
      expectTurns(after.messages.slice(conversation.length), [p])
      expect(after.messages.filter((m) => m.role === 'user')).toHaveLength(conversation.filter((m) => m.role === 'user').length + 1)
      conversation = after.messages
    }
    expectTurns(conversation, ['init', ...winners])
    expect(effects(fx()).map((entry) => entry.who)).toEqual(['init', ...winners])
  }, 25_000)

  // -------------------------------------------------------------------------------------------
  it('2. a worker SIGKILLed inside a non_idempotent tool: its lease is still live right after (SESSION_LEASED), expires after leaseTtlMs 500, and the next resumeAgent finds outcome_unknown; approving runs the tool exactly once more', async () => {
    const TTL = 500
    const AFTER = 600 // the recovering worker opens the session this long after the kill
    const k = startWorker(
      'K',
      `const agent = await createAgent(options)
       emit('SESSION', agent.sessionId)
       const response = await agent.send('k')
       emit('SENT')
       emit('RESULT', await settled(response))`,
      { ...base, LEASE_TTL_MS: String(TTL), HOLD: file('never'), HOLD_MAX_MS: '60000' },
    )
    const sessionId: string = await k.waitFor('SESSION')
    expect(await k.waitFor('STARTED')).toBe('k')
    const env = { ...base, SESSION: sessionId, LEASE_TTL_MS: String(TTL), GO: file('killed') }
    // B has the session open (read while K was alive) and sends the moment K is dead.
    const b = startWorker(
      'B',
      `const agent = await open()
       ready()
       const killedAt = await go()
       const sentAt = Date.now()
       const sent = await outcome(agent.send('b'))
       emit('SEND', { ...(sent.ok ? { ok: true } : sent), sentAfterKillMs: sentAt - killedAt, settledAfterKillMs: Date.now() - killedAt })
       if (sent.ok) emit('RESULT', await settled(sent.value))
       await agent.close()`,
      env,
    )
    // C loads the package now and opens the session AFTER ms after the kill: past the TTL.
    const c = startWorker(
      'C',
      `ready()
       const killedAt = await go()
       await sleep(killedAt + Number(env.AFTER) - Date.now())
       emit('OPENING', Date.now() - killedAt)
       const agent = await open()
       emit('OPENED', Date.now() - killedAt)
       for (const p of agent.pendingApprovals) await agent.approve(p.toolCallId)
       const resumed = await outcome(agent.resume())
       emit('RESUMED', resumed.ok ? await settled(resumed.value) : resumed)
       emit('RECOVERED_AFTER_KILL_MS', Date.now() - killedAt)
       emit('MESSAGES', agent.messages)
       await agent.close()`,
      { ...env, AFTER: String(AFTER) },
    )
    await Promise.all([b.waitFor('READY'), c.waitFor('READY')])
    expect(k.all('RESULT'), k.describe()).toEqual([])

    const killedAt = Date.now()
    k.signal('SIGKILL')
    await k.exited
    publish(file('killed'), String(killedAt))
    await Promise.all([b.exited, c.exited])
    ended(b)
    ended(c)
    expect(k.all('SENT')).toHaveLength(1)
    expect(effects(fx()).map((entry) => [entry.who, entry.pid])).toEqual([
      ['k', k.one('PID')],
      ['k', c.one('PID')],
    ])

    // Right after the kill the dead worker's lease is still live: B is refused and runs nothing.
    const send = b.one('SEND')
    console.log(`workers: B sent ${send.sentAfterKillMs} ms after the SIGKILL (leaseTtlMs ${TTL}) → ${send.ok ? 'accepted' : send.code}`)
    expect(send.sentAfterKillMs, 'B was not quick enough for the check to mean anything').toBeLessThan(TTL / 2)
    expect(send).toMatchObject({ ok: false, name: 'SdkError', code: 'SESSION_LEASED' })
    expect(b.all('MODEL')).toEqual([])

    // Past the TTL, the next resumeAgent finds the call started without a result: outcome_unknown.
    expect(c.one('OPENING')).toBeGreaterThanOrEqual(AFTER)
    expect(c.all('PENDING')[0], c.describe()).toEqual([{ toolCallId: 'call_k', toolName: 'Work', input: { who: 'k' }, fingerprint: fingerprintOf('Work', { who: 'k' }), reason: 'outcome_unknown', agentPath: [] }])
    expect(c.one('RESUMED'), c.describe()).toMatchObject({ ok: true, stopReason: 'done', result: 'answer k: call_k=done k', toolCalls: [{ id: 'call_k', output: 'done k', isError: false }] })
    const asked = c.all('MODEL')
    expect(asked).toHaveLength(1)
    expect(asked[0].messages.map((m: any) => m.role)).toEqual(['user', 'assistant', 'tool'])
    expect(asked[0].messages[2]).toEqual({ role: 'tool', tool_call_id: 'call_k', content: 'done k' })
    const recovered: number = c.one('RECOVERED_AFTER_KILL_MS')
    console.log(`workers: recovery after SIGKILL: ${recovered} ms from the kill to the recovered run's result (leaseTtlMs ${TTL}; resumeAgent called at +${c.one('OPENING')} ms, resolved at +${c.one('OPENED')} ms)`)

    const after = await stored(sessionId)
    expect(after.pending).toEqual([])
    expectTurns(after.messages, ['k'])
    expect(after.messages).toEqual(c.one('MESSAGES'))
  }, 20_000)

  // -------------------------------------------------------------------------------------------
  it('3. a stale worker (SIGSTOPped past leaseTtlMs 400 in its tool) is taken over: B completes its turn; continued, A’s run ends SESSION_LEASED and nothing it writes reaches the store', async () => {
    const TTL = 400
    // Three rounds, each on a session of its own: the outcome must not depend on which of A's
    // paths (its renewal, its tool's result) notices first that the session was taken over.
    for (const round of [1, 2, 3]) {
      writeFileSync(fx(), '') // each round counts its own tool runs
      const a = startWorker(
        `A${round}`,
        `const agent = await createAgent(options)
         emit('SESSION', agent.sessionId)
         const response = await agent.send('a')
         emit('SENT')
         emit('RESULT', await settled(response))
         const events = []
         for await (const event of response.stream()) events.push({ type: event.type, code: event.code })
         emit('EVENTS', events)
         emit('MESSAGES', agent.messages)
         await agent.close()`,
        { ...base, LEASE_TTL_MS: String(TTL), HOLD: file(`release-a-${round}`) },
      )
      const sessionId: string = await a.waitFor('SESSION')
      const b = startWorker(
        `B${round}`,
        `ready()
         const stoppedAt = await go()
         await sleep(stoppedAt + Number(env.AFTER) - Date.now())
         const agent = await open()
         emit('OPENED', Date.now() - stoppedAt)
         const waiting = agent.pendingApprovals
         // What the dead run left: decided here (a careful integrator would ask a person).
         for (const p of waiting) await agent.reject(p.toolCallId, { reason: 'worker A stopped answering', stop: true })
         if (waiting.length > 0) emit('CLEARED', await outcome(agent.resume()).then((r) => (r.ok ? settled(r.value) : r)))
         emit('BEFORE_SEND', agent.messages)
         const sent = await outcome(agent.send('b'))
         emit('SEND', sent.ok ? { ok: true } : sent)
         if (sent.ok) emit('RESULT', await settled(sent.value))
         emit('MESSAGES', agent.messages)
         emit('DONE_AFTER_STOP_MS', Date.now() - stoppedAt)
         await agent.close()`,
        { ...base, SESSION: sessionId, GO: file(`stopped-${round}`), AFTER: String(TTL + 150) },
      )
      await b.waitFor('READY')
      expect(await a.waitFor('STARTED')).toBe('a')

      const stoppedAt = Date.now()
      a.signal('SIGSTOP')
      try {
        publish(file(`stopped-${round}`), String(stoppedAt))
        // B works while A is stopped (bounded: A is continued after 8 s whatever B does).
        await Promise.race([b.exited, sleep(8000)])
        await sleep(stoppedAt + 1200 - Date.now())
      } finally {
        publish(file(`release-a-${round}`)) // A's tool returns as soon as A runs again
        a.signal('SIGCONT')
      }
      const continuedAt = Date.now()
      await b.exited
      ended(b)
      expect(b.one('DONE_AFTER_STOP_MS'), 'B could not finish while A was stopped').toBeLessThan(continuedAt - stoppedAt)
      await a.exited
      ended(a)
      console.log(`workers: round ${round}: A stopped for ${continuedAt - stoppedAt} ms (leaseTtlMs ${TTL}); B took over ${b.one('OPENED')} ms after the stop and finished at +${b.one('DONE_AFTER_STOP_MS')} ms`)

      // B: the dead run's call waited as outcome_unknown; B decided it, then its own turn went through.
      expect(b.all('PENDING')[0], b.describe()).toEqual([{ toolCallId: 'call_a', toolName: 'Work', input: { who: 'a' }, fingerprint: fingerprintOf('Work', { who: 'a' }), reason: 'outcome_unknown', agentPath: [] }])
      expect(b.one('CLEARED'), b.describe()).toMatchObject({ ok: true, stopReason: 'interrupted' })
      expect(b.one('SEND'), b.describe()).toEqual({ ok: true })
      expect(b.one('RESULT'), b.describe()).toMatchObject({ ok: true, stopReason: 'done', result: 'answer b: call_b=done b' })
      const beforeSend: Message[] = b.one('BEFORE_SEND')
      expect(beforeSend.filter((m) => m.role === 'tool')).toEqual([{ role: 'tool', tool_call_id: 'call_a', content: REJECTED('worker A stopped answering') }])
      expect(b.all('MODEL')[0].messages).toEqual([...beforeSend, { role: 'user', content: 'b' }])
      const bMessages: Message[] = b.one('MESSAGES')
      expect(bMessages.slice(0, beforeSend.length)).toEqual(beforeSend)
      expectTurns(bMessages.slice(beforeSend.length), ['b'])

      // A, continued: its tool ended, but its run was stopped with SESSION_LEASED and the model was not asked again.
      expect(a.all('FINISHED')).toEqual(['a'])
      expect(a.one('RESULT'), a.describe()).toMatchObject({ ok: false, name: 'SdkError', code: 'SESSION_LEASED' })
      expect(a.one('EVENTS').at(-1), JSON.stringify(a.one('EVENTS'))).toEqual({ type: 'error', code: 'SESSION_LEASED' })
      expect(a.one('EVENTS').filter((event: any) => event.type === 'result')).toEqual([])
      expect(a.all('MODEL'), 'A asked its model again after it lost the session').toHaveLength(1)
      expect(effects(fx()).map((entry) => [entry.who, entry.pid])).toEqual([
        ['a', a.one('PID')],
        ['b', b.one('PID')],
      ])

      // The store: B's conversation intact, nothing of A's late result anywhere in the database.
      const after = await stored(sessionId)
      expect(after.pending).toEqual([])
      expect(after.messages).toEqual(bMessages)
      const dump = execFileSync('pg_dump', ['--data-only', pgUrl], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 }).toString()
      expect(dump).toContain('done b')
      expect(dump.includes('done a'), 'A’s tool output, produced after it lost the lease, reached the store').toBe(false)

      // The session goes on in a fourth worker: its model is sent B's conversation and the new prompt.
      const d = await runWorker(`D${round}`, `const agent = await open(); const sent = await agent.send('d'); emit('RESULT', await settled(sent)); await agent.close()`, { ...base, SESSION: sessionId })
      expect(d.one('RESULT')).toMatchObject({ ok: true, stopReason: 'done', result: 'answer d: call_d=done d' })
      expect(d.all('MODEL')[0].messages).toEqual([...bMessages, { role: 'user', content: 'd' }])
    }
  }, 25_000)

  // -------------------------------------------------------------------------------------------
  it('4. two processes decide the same paused call at once: exactly one decision is taken, the other is APPROVAL_NOT_PENDING; the resumed run follows the winner', async () => {
    const rounds = [
      { prompt: 'p1', X: `approve('call_p1', { updatedInput: { who: 'X' } })`, Y: `approve('call_p1', { updatedInput: { who: 'Y' } })` },
      { prompt: 'p2', X: `approve('call_p2', { updatedInput: { who: 'X' } })`, Y: `reject('call_p2', { reason: 'Y says no' })` },
    ]
    for (const round of rounds) {
      const { sessionId, creator } = await createSession(round.prompt, { PERMISSION: 'default' })
      expect(creator.one('RESULT')).toMatchObject({
        ok: true,
        stopReason: 'interrupted',
        pendingApprovals: [{ toolCallId: `call_${round.prompt}`, toolName: 'Work', input: { who: round.prompt }, reason: 'ask' }],
      })
      const go = file(`go-${round.prompt}`)
      const deciders = (['X', 'Y'] as const).map((name) =>
        startWorker(
          name,
          `const agent = await open()
           ready()
           await go()
           emit('DECIDE', await outcome(agent.${round[name]}))
           await agent.close()`,
          { ...base, SESSION: sessionId, PERMISSION: 'default', GO: go },
        ),
      )
      await Promise.all(deciders.map((decider) => decider.waitFor('READY')))
      publish(go, String(Date.now()))
      await Promise.all(deciders.map((decider) => decider.exited))
      deciders.forEach(ended)
      for (const decider of deciders) expect(decider.all('PENDING')[0].map((p: PendingApproval) => p.toolCallId)).toEqual([`call_${round.prompt}`])
      const outcomes = Object.fromEntries(deciders.map((decider) => [decider.name, decider.one('DECIDE')]))
      const winners = Object.keys(outcomes).filter((name) => outcomes[name].ok)
      expect(winners, `${round.prompt}: ${JSON.stringify(outcomes)}`).toHaveLength(1)
      const winner = winners[0]
      const loser = winner === 'X' ? 'Y' : 'X'
      expect(outcomes[loser]).toMatchObject({ ok: false, name: 'SdkError', code: 'APPROVAL_NOT_PENDING' })

      // The stored decision is the winner's: the resumed run follows it, the tool runs at most once.
      const r = await runWorker(
        'R',
        `const agent = await open()
         emit('AGAIN', await outcome(agent.approve(env.CALL)))
         const resumed = await outcome(agent.resume())
         emit('RESUMED', resumed.ok ? await settled(resumed.value) : resumed)
         await agent.close()`,
        { ...base, SESSION: sessionId, PERMISSION: 'default', CALL: `call_${round.prompt}` },
      )
      expect(r.all('PENDING')[0]).toEqual([])
      expect(r.one('AGAIN')).toMatchObject({ ok: false, code: 'APPROVAL_NOT_PENDING' })
      const approved = round[winner as 'X' | 'Y'].startsWith('approve')
      const output = approved ? `done ${winner}` : REJECTED('Y says no')
      expect(r.one('RESUMED'), `${round.prompt} won by ${winner}\n${r.describe()}`).toMatchObject({ ok: true, stopReason: 'done', result: `answer ${round.prompt}: call_${round.prompt}=${output}` })
      expect(r.all('MODEL')).toHaveLength(1)
      expect(r.one('MODEL').messages.at(-1)).toEqual({ role: 'tool', tool_call_id: `call_${round.prompt}`, content: output })
      expect(effects(fx()).filter((entry) => entry.who === 'X' || entry.who === 'Y').map((entry) => entry.who)).toEqual(approved ? [winner] : [])
      writeFileSync(fx(), '') // the next round counts its own runs
      console.log(`workers: decision race ${round.prompt}: ${winner} won (${JSON.stringify(outcomes[loser].code)} for ${loser})`)
    }
  }, 20_000)
})
