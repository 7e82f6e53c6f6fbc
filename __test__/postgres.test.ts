// The PostgreSQL store from Node, as a deployment would use it: a pause written by one agent,
// found by `resumeAgent` (a new agent object, as another process would), approved and resumed;
// the tool runs once and the model sees its result. The test creates its own database and drops
// it; with no server at ARH_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres)
// it is skipped with a printed line.
import { createServer, connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { createAgent, defineTool, resumeAgent, scriptedModel, SdkError, type AgentOptions, type HookObject } from '../index.js'
import { adminUrl as admin, psql, scratchDatabase } from './helpers/postgres.js'

const database = scratchDatabase('arh_js', 'PostgreSQL store tests from Node')
const url = database.url

describe('PostgreSQL store', () => {
  it('a pause in one agent is approved and resumed through resumeAgent; the tool runs once', async (context) => {
    if (!database.available()) return context.skip()
    let runs = 0
    const deploy = defineTool({ name: 'deploy', kind: 'execute', execute: () => (runs++, 'deployed') })
    const model = () =>
      scriptedModel((request) => {
        const result = request.messages.find((message) => message.role === 'tool')
        return result ? { text: `saw ${String(result.content)}` } : { toolCalls: [{ id: 'd1', name: 'deploy', input: { env: 'prod' } }] }
      })
    const options = (): AgentOptions => ({ model: model(), tools: [deploy], advanced: { permission: 'default', store: { postgres: url() } } })
    const first = await createAgent(options())
    const paused = await (await first.send('ship it')).result()
    expect(paused.pendingApprovals?.map((approval) => approval.toolCallId)).toEqual(['d1'])
    const sessionId = first.sessionId
    await first.close()

    const later = await resumeAgent({ ...options(), sessionId })
    expect(later.pendingApprovals.map((approval) => approval.toolName)).toEqual(['deploy'])
    await later.approve('d1')
    const done = await (await later.resume()).result()
    expect(done.content).toBe('saw deployed')
    expect(runs).toBe(1)
    await later.close()
    // What PostgreSQL holds: the session, no call still pending, the ledger's finished entry.
    expect(psql(`SELECT count(*) FROM agent_runtime_hooks.sessions WHERE session_id = '${sessionId}'`, url()).trim()).toBe('1')
    expect(psql(`SELECT decision IS NOT NULL FROM agent_runtime_hooks.pending_calls WHERE session_id = '${sessionId}'`, url()).trim()).toBe('')
    expect(psql(`SELECT status FROM agent_runtime_hooks.effects WHERE session_id = '${sessionId}' AND tool_call_id = 'd1'`, url()).trim()).toBe('finished')
  })

  it('a bad URL is a ConfigError naming the option, without the password', async () => {
    const error = await createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { store: { postgres: 'mysql://u:hunter2@h/db' } } }).catch((failure) => failure)
    expect(error).toBeInstanceOf(SdkError)
    expect(error.message).toContain('advanced.store.postgres')
    expect(error.message).not.toContain('hunter2')
  })

  it("a run's last save goes with its release: a claim lost before the final answer is kept fails the run with SESSION_LEASED and keeps nothing of it", async (context) => {
    if (!database.available()) return context.skip()
    const held = (id: string) => psql(`SELECT released FROM agent_runtime_hooks.leases WHERE session_id = '${id}'`, url()).trim()
    let id = ''
    const agent = await createAgent({
      model: scriptedModel(() => {
        // Taken over while the model answers: the claim is gone before the answer is kept.
        expect(held(id)).toBe('f')
        psql(`UPDATE agent_runtime_hooks.leases SET released = TRUE, token = token + 1, owner = 'another' WHERE session_id = '${id}'`, url())
        return { text: 'the answer' }
      }),
      advanced: { store: { postgres: url() } },
    })
    id = agent.sessionId
    const failure = await (await agent.send('question')).result().catch((error) => error)
    expect(failure).toBeInstanceOf(SdkError)
    expect(failure.code).toBe('SESSION_LEASED')
    expect(psql(`SELECT count(*) FROM agent_runtime_hooks.sessions WHERE session_id = '${id}'`, url()).trim()).toBe('0')
    // The other holder's claim is left as it was.
    expect(psql(`SELECT token, owner, released FROM agent_runtime_hooks.leases WHERE session_id = '${id}'`, url()).trim()).toBe('2|another|t')
    await agent.close()
  })

  it('a pause is kept before HumanInterventionRequest sees it, and with the release when no such hook is registered', async (context) => {
    if (!database.available()) return context.skip()
    const stored = (id: string) =>
      psql(`SELECT s.paused IS NOT NULL, l.released FROM agent_runtime_hooks.sessions s JOIN agent_runtime_hooks.leases l USING (session_id) WHERE session_id = '${id}'`, url()).trim()
    const deploy = defineTool({ name: 'deploy', kind: 'execute', execute: () => 'deployed' })
    const options = (hooks: HookObject<'beforeHumanIntervention'>[]): AgentOptions => ({
      model: scriptedModel([{ toolCalls: [{ id: 'd1', name: 'deploy', input: {} }] }]),
      tools: [deploy],
      advanced: { permission: 'default', hooks, store: { postgres: url() } },
    })
    const seen: string[] = []
    let id = ''
    const announced = await createAgent(options([{ id: 'request', type: 'beforeHumanIntervention', handler: () => void seen.push(stored(id)) }]))
    id = announced.sessionId
    expect((await (await announced.send('ship it')).result()).stopReason).toBe('interrupted')
    // Seen kept (the claim still held while the hook ran), then released.
    expect(seen).toEqual(['t|f'])
    expect(stored(id)).toBe('t|t')
    await announced.close()

    const quiet = await createAgent(options([]))
    expect((await (await quiet.send('ship it')).result()).pendingApprovals?.map((approval) => approval.toolCallId)).toEqual(['d1'])
    expect(stored(quiet.sessionId)).toBe('t|t')
    await quiet.close()
  })

  it("an agent's own release lost by a database crash is not another agent's claim: its next send is served", async (context) => {
    if (!database.available()) return context.skip()
    const agent = await createAgent({ model: scriptedModel((request) => ({ text: `answer ${request.messages.length}` })), advanced: { store: { postgres: url() } } })
    expect((await (await agent.send('one')).result()).content).toBe('answer 1')
    const id = agent.sessionId
    const lease = (sql: string) => psql(sql, url()).trim()
    expect(lease(`SELECT token, released FROM agent_runtime_hooks.leases WHERE session_id = '${id}'`)).toBe('1|t')
    // The release lost: the row as it was before it, live, this agent's owner and token.
    lease(`UPDATE agent_runtime_hooks.leases SET released = FALSE, expires_at = expires_at + 60000 WHERE session_id = '${id}'`)
    expect((await (await agent.send('two')).result()).content).toBe('answer 3')
    expect(lease(`SELECT token, released FROM agent_runtime_hooks.leases WHERE session_id = '${id}'`)).toBe('2|t')
    // Another agent's live lease still refuses it.
    lease(`UPDATE agent_runtime_hooks.leases SET released = FALSE, owner = 'another', expires_at = expires_at + 60000 WHERE session_id = '${id}'`)
    const refused = await agent.send('three').catch((failure) => failure)
    expect(refused).toBeInstanceOf(SdkError)
    expect(refused.code).toBe('SESSION_LEASED')
    expect(refused.message).toMatch(/^Session .* is driven by another agent \(its lease expires in \d+ ms unless renewed\)/)
    await agent.close()
  })

  it('a store that goes silent mid-run stops the run about one lease TTL after its last renewal', async (context) => {
    if (!database.available()) return context.skip()
    // A proxy that, on cue, forwards nothing more either way and keeps its sockets open.
    let silent = false
    const sockets: Socket[] = []
    const proxy = createServer((client) => {
      const server = connect(Number(admin.port || 5432), admin.hostname)
      sockets.push(client, server)
      client.on('data', (chunk) => silent || server.write(chunk))
      server.on('data', (chunk) => silent || client.write(chunk))
      client.on('error', () => {})
      server.on('error', () => {})
    })
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
    const through = new URL(url())
    through.hostname = '127.0.0.1'
    through.port = String((proxy.address() as { port: number }).port)
    through.search = '?sslmode=disable'
    let entered: () => void = () => {}
    const inside = new Promise<void>((resolve) => (entered = resolve))
    let runs = 0
    const wait = defineTool({
      name: 'wait',
      kind: 'readonly',
      execute: (_input, { signal }) =>
        new Promise<string>((_resolve, reject) => {
          runs++
          entered()
          signal.addEventListener('abort', () => reject(signal.reason), { once: true })
        }),
    })
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'w1', name: 'wait', input: {} }] }]),
      tools: [wait],
      advanced: { leaseTtlMs: 3000, store: { postgres: through.toString() } },
    })
    try {
      const response = await agent.send('wait')
      await inside
      silent = true
      const since = Date.now()
      const failure = await response.result().catch((error) => error)
      const took = Date.now() - since
      expect(failure).toBeInstanceOf(SdkError)
      expect(failure.code).toBe('SESSION_LEASED')
      expect(failure.message).toBe(
        `Session ${agent.sessionId} could not be kept: its lease expired while the store could not be reached to renew it: the run stopped`,
      )
      expect(runs).toBe(1)
      // The last renewal answered at most a third of the TTL before the silence.
      expect(took).toBeGreaterThanOrEqual(1900)
      expect(took).toBeLessThan(4000)
    } finally {
      for (const socket of sockets) socket.destroy()
      proxy.close()
      await agent.close()
    }
  }, 30_000)
})
