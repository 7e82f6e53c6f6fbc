// Child processes for the durable-session tests (SPEC §8.2): every child is one shared program
// (CHILD_PRELUDE) plus a few lines of its own (`body`), run against the package with
// `process.env.ENTRY`. A child reports what it saw as lines `<TAG> <json>` on stdout.
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { childEnv, runScript, type ChildResult } from './child.js'

const entry = resolve(__dirname, '..', '..', 'index.js')

/**
 * What every child has. Environment it reads:
 * - DB: the SQLite file (`advanced.store: { sqlite: DB }`), or PG: a PostgreSQL URL (`{ postgres: PG }`,
 *   which wins); EFFECTS: the side-effect file tools append to;
 * - CALLS: the tool calls (JSON) the model asks for when the last user message has no tool result yet;
 * - SESSION: the id `open()` resumes;
 * - HOOKS: webhook hook objects (JSON) for `advanced.hooks`; BARE=1: no `advanced.hooks` at all;
 * - SIDE_EFFECT: `sideEffect` of the Write tool (default non_idempotent);
 * - HANG_IN_TOOL=1 (or =<content>: only the call with that `content`): Write appends its effect,
 *   prints STARTED and never finishes;
 * - HANG_IN_READ=1: the same for Read (readonly, so allowed under `default`, non_idempotent);
 * - HANG_IN_POST=1: a PostToolUse hook on Write prints POSTTOOL and never finishes;
 * - HANG_IN_MODEL=1: the model, shown tool results, prints ANSWERING and never answers;
 * - API_KEY / CONN_HEADER: an `apiKey` and an `advanced.connection.headers` value;
 * - LEASE_TTL_MS: `advanced.leaseTtlMs` (default 1000: a killed child's claim on the session
 *   expires soon after it died, and `childKilledAt` waits that long before it resolves; a live
 *   child renews it every ~330 ms, which a loaded machine keeps up with where 300 ms did not).
 */
/** The children's `advanced.leaseTtlMs` unless `LEASE_TTL_MS` says otherwise. */
export const DEFAULT_LEASE_TTL_MS = 1000

export const CHILD_PRELUDE = String.raw`
const { createAgent, resumeAgent, defineTool, scriptedModel } = require(process.env.ENTRY)
const fs = require('node:fs')
const env = process.env
const emit = (tag, value) => process.stdout.write(tag + (value === undefined ? '' : ' ' + JSON.stringify(value)) + '\n')
const forever = () => new Promise(() => setInterval(() => {}, 1 << 30))
const effect = (name, input) => fs.appendFileSync(env.EFFECTS, JSON.stringify({ name, input, pid: process.pid }) + '\n')
const afterLastUser = (messages) => messages.slice(messages.map((m) => m.role).lastIndexOf('user') + 1)

// The model asks for CALLS once per user message, then answers with the results it was shown.
const model = scriptedModel(({ messages }) => {
  const tail = afterLastUser(messages)
  emit('MODEL', tail)
  const results = tail.filter((m) => m.role === 'tool')
  if (results.length === 0) return { toolCalls: JSON.parse(env.CALLS) }
  if (env.HANG_IN_MODEL) { emit('ANSWERING'); return forever() }
  return { text: 'saw: ' + results.map((m) => m.tool_call_id + '=' + m.content).join(' | ') }
})
const tools = [
  defineTool({
    name: 'Read',
    kind: 'readonly',
    execute: async (input) => {
      effect('Read', input)
      if (env.HANG_IN_READ) { emit('STARTED'); await forever() }
      return 'read ' + input.file
    },
  }),
  defineTool({
    name: 'Write',
    kind: 'write',
    sideEffect: env.SIDE_EFFECT || 'non_idempotent',
    execute: async (input) => {
      effect('Write', input)
      if (env.HANG_IN_TOOL === '1' || env.HANG_IN_TOOL === input.content) { emit('STARTED'); await forever() }
      return 'wrote ' + input.content
    },
  }),
]
const inline = [{ id: 'session-start', type: 'SessionStart', handler: (e) => void emit('SessionStart', { isResume: e.isResume }) }]
if (env.HANG_IN_POST) inline.push({ id: 'hang-post', type: 'PostToolUse', matcher: '^Write$', handler: async () => { emit('POSTTOOL'); await forever() } })
const options = {
  model,
  tools,
  ...(env.API_KEY ? { apiKey: env.API_KEY } : {}),
  advanced: {
    permission: 'default',
    store: env.PG ? { postgres: env.PG } : { sqlite: env.DB },
    leaseTtlMs: Number(env.LEASE_TTL_MS || ${DEFAULT_LEASE_TTL_MS}),
    ...(env.BARE ? {} : { hooks: [...JSON.parse(env.HOOKS || '[]'), ...inline] }),
    ...(env.CONN_HEADER ? { connection: { headers: { 'x-marker': env.CONN_HEADER } } } : {}),
  },
}
const failure = (e) => ({ name: e && e.constructor && e.constructor.name, code: e && e.code, message: String(e && e.message) })
/** { ok: true, value } or { ok: false, name, code, message } */
const outcome = (promise) => Promise.resolve().then(() => promise).then((value) => ({ ok: true, value }), (e) => ({ ok: false, ...failure(e) }))
const summary = (r) => ({ stopReason: r.stopReason, result: r.result, pendingApprovals: r.pendingApprovals, toolCalls: r.toolCalls.map((c) => ({ id: c.id, output: c.output, isError: c.isError })) })
/** Sends 'go' in a new agent: emits SESSION, RESULT, PENDING, MESSAGES, then PAUSED. */
async function pause() {
  const agent = await createAgent(options)
  emit('SESSION', agent.sessionId)
  const result = await (await agent.send('go')).result()
  emit('RESULT', summary(result))
  emit('PENDING', agent.pendingApprovals)
  emit('MESSAGES', agent.messages)
  emit('PAUSED')
  return agent
}
/** resumeAgent(SESSION): emits PENDING and MESSAGES. */
async function open(extra = {}) {
  const agent = await resumeAgent({ ...options, ...extra, sessionId: env.SESSION })
  emit('PENDING', agent.pendingApprovals)
  emit('MESSAGES', agent.messages)
  return agent
}
/** resume(), then emits RESUMED (the result or the failure) and MESSAGES. */
async function go(agent) {
  const run = await outcome(agent.resume().then((response) => response.result()))
  emit('RESUMED', run.ok ? { ok: true, ...summary(run.value) } : run)
  emit('MESSAGES', agent.messages)
  return run
}
`

/** The whole child program: the prelude, then `body` inside an async main. */
export function childProgram(body: string): string {
  return `${CHILD_PRELUDE}
;(async () => {
${body}
})().then(() => emit('END'), (e) => { emit('FAILED', failure(e)); process.exitCode = 1 })
`
}

export interface Child extends ChildResult {
  /** Every `<TAG> <json>` line, in order. */
  lines: { tag: string; value: any }[]
  /** The values of lines tagged `tag`, in order. */
  all(tag: string): any[]
  /** The value of the only, or else last, line tagged `tag` (fails when there is none). */
  one(tag: string): any
}

/** A `<TAG> <json>` line a child printed (`undefined` for any other line); a value that is not
 * JSON stays text. */
export function parseTagged(line: string): { tag: string; value: any } | undefined {
  if (!/^[A-Za-z_]+( |$)/.test(line)) return undefined
  const space = line.indexOf(' ')
  if (space < 0) return { tag: line, value: undefined }
  let value: any = line.slice(space + 1)
  try {
    value = JSON.parse(value)
  } catch {}
  return { tag: line.slice(0, space), value }
}

function parse(result: ChildResult): Child {
  const lines = result.stdout
    .split('\n')
    .map(parseTagged)
    .filter((line): line is { tag: string; value: any } => line !== undefined)
  const all = (tag: string) => lines.filter((line) => line.tag === tag).map((line) => line.value)
  return {
    ...result,
    lines,
    all,
    one(tag) {
      const values = all(tag)
      if (values.length === 0) throw new Error(`the child printed no ${tag} line\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`)
      return values.at(-1)
    },
  }
}

/** Runs `body` in a child to its end (≤ 10 s). */
export async function child(body: string, env: Record<string, string | undefined>): Promise<Child> {
  const result = await runScript(childProgram(body), { timeoutMs: 10000, env: env as Record<string, string> })
  return parse(result)
}

/**
 * Runs `body` in a child spawned here and SIGKILLs it as soon as it prints the line `marker`
 * (bounded: ≤ 10 s). Resolves with what it printed and whether it was killed at the marker, once
 * the dead child's claim on the session has expired (`LEASE_TTL_MS`, default 1000).
 */
export function childKilledAt(body: string, env: Record<string, string | undefined>, marker: string): Promise<Child & { killedAtMarker: boolean }> {
  return new Promise((done) => {
    const proc = spawn(process.execPath, ['-e', childProgram(body)], { env: childEnv({ ...env, ENTRY: entry }), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    let killedAtMarker = false
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      proc.kill('SIGKILL')
    }, 10000)
    proc.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk
      if (!killedAtMarker && stdout.split('\n').slice(0, -1).includes(marker)) {
        killedAtMarker = true
        proc.kill('SIGKILL')
      }
    })
    proc.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    proc.on('close', (code, signal) => {
      clearTimeout(timer)
      const expired = Number(env.LEASE_TTL_MS || DEFAULT_LEASE_TTL_MS) + 50
      setTimeout(() => done({ ...parse({ code: code ?? (signal as any), stdout, stderr, timedOut }), killedAtMarker }), expired)
    })
  })
}

/** The side-effect file as records, `[]` when no tool ever ran. */
export function effects(path: string): { name: string; input: any; pid: number }[] {
  if (!existsSync(path)) return []
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line))
}
