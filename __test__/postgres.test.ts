// The PostgreSQL store from Node, as a deployment would use it: a pause written by one agent,
// found by `resumeAgent` (a new agent object, as another process would), approved and resumed;
// the tool runs once and the model sees its result. The test creates its own database and drops
// it; with no server at ARH_TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres)
// it is skipped with a printed line.
import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAgent, defineTool, resumeAgent, scriptedModel, SdkError, type AgentOptions } from '../index.js'

const admin = new URL(process.env.ARH_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')
const database = `arh_js_${process.pid}_${Date.now()}`
const psql = (sql: string, at = admin.toString()) =>
  execFileSync('psql', [at, '-v', 'ON_ERROR_STOP=1', '-qAtc', sql], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 }).toString()

let available = false
beforeAll(() => {
  try {
    psql(`CREATE DATABASE ${database}`)
    available = true
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error)
    process.stderr.write(`skipping PostgreSQL store tests from Node: no server or psql at ${admin.host} (${reason}); set ARH_TEST_POSTGRES_URL to test against one\n`)
  }
})
afterAll(() => {
  if (available) psql(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
})

function url() {
  const target = new URL(admin.toString())
  target.pathname = `/${database}`
  return target.toString()
}

describe('PostgreSQL store', () => {
  it('a pause in one agent is approved and resumed through resumeAgent; the tool runs once', async (context) => {
    if (!available) return context.skip()
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
})
