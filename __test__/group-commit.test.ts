// Group commit on SQLite (docs/store.md): concurrent sessions' writes share one transaction and
// one fsync. What must hold, tested as a process that dies: a write the caller was answered for
// is on disk. A child process runs many sessions at once, printing a line each time a pause or a
// decision is acknowledged (the promise resolved), and is SIGKILLed while the rest are still
// writing; a new process then finds every acknowledged pause and decision in the file.
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { defineTool, resumeAgent, scriptedModel, type AgentOptions } from '../index.js'
import { childEnv } from './helpers/child.js'

const dir = mkdtempSync(join(tmpdir(), 'arh-group-commit-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const SESSIONS = 60

// Each session pauses on one write call; every even one is then approved. A line is printed only
// once the store has answered.
const CHILD = `
const { createAgent, defineTool, scriptedModel } = require(process.env.ENTRY)
const tool = defineTool({ name: 'write', kind: 'write', execute: () => 'ok' })
const store = { sqlite: process.env.DB }
async function session(i) {
  const agent = await createAgent({ model: scriptedModel([{ toolCalls: [{ id: 'w0', name: 'write', input: { i } }] }]), tools: [tool], advanced: { permission: 'default', store } })
  const result = await (await agent.send('go')).result()
  if (result.stopReason !== 'interrupted') throw new Error('session ' + i + ' did not pause: ' + result.stopReason)
  process.stdout.write('PAUSED ' + agent.sessionId + '\\n')
  if (i % 2 === 0) {
    process.stdout.write('APPROVING ' + agent.sessionId + '\\n')
    await agent.approve('w0')
    process.stdout.write('APPROVED ' + agent.sessionId + '\\n')
  }
}
// Sessions keep starting until the parent kills this process.
let i = 0
const next = () => session(i++).then(next, (e) => { process.stderr.write(String(e.stack) + '\\n'); process.exit(3) })
for (let k = 0; k < 16; k++) next()
`

/** Runs the child until it has acknowledged `pauses` pauses, then SIGKILLs it at once. */
function killedAfter(db: string, pauses: number): Promise<{ paused: string[]; approving: string[]; approved: string[]; stderr: string; signal: string | null }> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['-e', CHILD], { env: childEnv({ ENTRY: resolve(__dirname, '..', 'index.js'), DB: db }) })
    const paused: string[] = []
    const approving: string[] = []
    const approved: string[] = []
    let stdout = ''
    let stderr = ''
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      fail(new Error(`the child acknowledged ${paused.length} pauses in 30 s: ${stderr}`))
    }, 30_000)
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString()
      const lines = stdout.split('\n')
      stdout = lines.pop() ?? ''
      for (const line of lines) {
        const [what, id] = line.split(' ')
        if (what === 'PAUSED' && id) paused.push(id)
        if (what === 'APPROVING' && id) approving.push(id)
        if (what === 'APPROVED' && id) approved.push(id)
      }
      if (paused.length >= pauses) child.kill('SIGKILL')
    })
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
    child.on('exit', (_code, signal) => {
      clearTimeout(timer)
      done({ paused, approving, approved, stderr, signal })
    })
  })
}

describe('group commit on SQLite: nothing acknowledged is lost when the process dies', () => {
  it(`a process killed while ${SESSIONS}+ sessions write leaves every acknowledged pause and decision in the file`, async () => {
    const db = join(dir, 'sessions.db')
    const run = await killedAfter(db, SESSIONS)
    expect(run.signal, run.stderr).toBe('SIGKILL')
    expect(run.paused.length).toBeGreaterThanOrEqual(SESSIONS)
    expect(run.approved.length).toBeGreaterThan(0)

    let executions = 0
    const tool = defineTool({ name: 'write', kind: 'write', execute: () => (executions++, 'ok') })
    const options = (): AgentOptions => ({
      model: scriptedModel([{ text: 'done' }]),
      tools: [tool],
      advanced: { permission: 'default', store: { sqlite: db } },
    })
    const approved = new Set(run.approved)
    // Asked but not answered when the process died: the decision may or may not have been kept.
    const inFlight = new Set(run.approving.filter((id) => !approved.has(id)))
    let resumed = 0
    for (const sessionId of run.paused) {
      const agent = await resumeAgent({ ...options(), sessionId })
      try {
        const waiting = agent.pendingApprovals.map((entry) => entry.toolCallId)
        // A decided call no longer waits; one never decided still does.
        if (approved.has(sessionId)) expect(waiting, `session ${sessionId} (approval acknowledged)`).toEqual([])
        else if (!inFlight.has(sessionId)) expect(waiting, `session ${sessionId} (never approved)`).toEqual(['w0'])
        if (waiting.length === 0) {
          const result = await (await agent.resume()).result()
          expect(result.stopReason, `session ${sessionId}`).toBe('done')
          expect(result.content).toBe('done')
          resumed++
        } else {
          await expect(agent.resume(), `session ${sessionId}`).rejects.toMatchObject({ code: 'APPROVALS_PENDING' })
        }
      } finally {
        await agent.close()
      }
    }
    expect(resumed).toBeGreaterThanOrEqual(approved.size)
    expect(executions).toBe(resumed)
  }, 120_000)
})
