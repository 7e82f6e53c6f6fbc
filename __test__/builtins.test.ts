// The built-in tools (Read, Write, Edit, Glob, Grep, Bash, KillShell, TaskOutput, WebFetch,
// NotebookEdit; TodoWrite, the plan tools and AskUserQuestion in builtins-system.test.ts), checked from
// the outside the way a Blade user would notice them: which tools the model is offered, what the
// model is sent back for each call (the `tool` messages the loopback model server receives), what
// is in the workspace afterwards and what the process table holds.
//
// Written from research/blade-sessions-builtins.md §B (and §A.2 for how sessions and agents turn
// the tools on) and the seed's hook examples, not from the implementation. Where the note leaves
// a point open the test says so in a comment and does not pin it.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import {
  createAgent,
  createSession,
  getBuiltinTools,
  HookEvent,
  type Agent,
  type AgentOptions,
  type ISession,
  type SessionOptions,
  type SessionStreamEvent,
} from '../index.js'
import * as local from '../subpaths/local.js'
import * as serverProfile from '../subpaths/server.js'
import { openaiChunks, rawStream, sleep, sse, useServer, type Handler, type Recorded } from './helpers/server.js'
import { drain, ofType, textOf } from './helpers/session.js'

const server = useServer()

// ---------------------------------------------------------------------------------------------
// helpers

const API_KEY = 'sk-builtins-test'
const MODEL = 'builtins-model'
const BUILTINS = ['AskUserQuestion', 'Bash', 'Edit', 'EnterPlanMode', 'ExitPlanMode', 'Glob', 'Grep', 'KillShell', 'NotebookEdit', 'Read', 'TaskOutput', 'TodoWrite', 'WebFetch', 'Write']
const PLAN_DENIAL =
  'Tool execution aborted: Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)'
const NO_FILESYSTEM = 'No filesystem access in the current runtime context.'

/** A streamed chat-completion answer: text and/or tool calls. */
const chat = (text: string, toolCalls: { id: string; name: string; arguments: string }[] = []): Handler => rawStream([sse(openaiChunks(text, toolCalls))])

interface Call {
  name: string
  input?: unknown
  /** Raw argument text instead of `input`. */
  arguments?: string
}
let callCount = 0
/** One model turn calling `list` (ids unique across the file, so conversations never repeat one). */
const calls = (...list: Call[]): Handler =>
  chat(
    '',
    list.map((call) => ({ id: `call_${++callCount}`, name: call.name, arguments: call.arguments ?? JSON.stringify(call.input ?? {}) })),
  )

/** The `tool` messages of a recorded request, in order (the last request holds every earlier one). */
const toolMessagesOf = (request: Recorded): string[] =>
  ((request?.body?.messages ?? []) as any[]).filter((message) => message.role === 'tool').map((message) => String(message.content))
const toolMessages = (): string[] => toolMessagesOf(server.requests.at(-1)!)

/** Tool names offered in request `index`. */
const offered = (index = 0): string[] => ((server.requests[index]?.body?.tools ?? []) as any[]).map((tool) => tool.function?.name ?? tool.name)
/** The JSON schema offered for `name` in request `index`. */
const schemaOf = (name: string, index = 0): any => ((server.requests[index]?.body?.tools ?? []) as any[]).find((tool) => (tool.function?.name ?? tool.name) === name)?.function?.parameters

const results = (events: SessionStreamEvent[]) => ofType(events, 'tool_result')

const dirs: string[] = []
/** A fresh workspace (canonical path) holding `files`. */
function workspace(files: Record<string, string> = {}): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'arh-builtins-')))
  dirs.push(dir)
  for (const [relative, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, relative)), { recursive: true })
    writeFileSync(join(dir, relative), text)
  }
  return dir
}
const filesystemOf = (dir: string) => ({ capabilities: { filesystem: { roots: [dir], cwd: dir } } })

const open: Array<{ close(): Promise<void> }> = []
async function session(extra: Partial<SessionOptions> = {}): Promise<ISession> {
  const created = await createSession({ provider: { type: 'openai-compatible', apiKey: API_KEY, baseUrl: server.url + '/v1' }, model: MODEL, ...extra } as SessionOptions)
  open.push(created)
  return created
}
/** A session whose workspace is `dir`. */
const sessionIn = (dir: string, extra: Partial<SessionOptions> = {}) => session({ defaultContext: filesystemOf(dir), ...extra })
async function agent(extra: Partial<AgentOptions> = {}): Promise<Agent> {
  const created = await createAgent({ provider: 'openai-compatible', apiKey: API_KEY, baseUrl: server.url + '/v1', model: MODEL, ...extra })
  open.push(created)
  return created
}
/** Sends `message` and reads the whole request's stream. */
async function run(target: ISession, message = 'go', onEvent?: (event: SessionStreamEvent) => unknown): Promise<SessionStreamEvent[]> {
  await target.send(message)
  return drain(target, onEvent)
}

// Processes, by a marker string in their command line (/proc/<pid>/cmdline).
let markerCount = 0
const markers: string[] = []
function marker(): string {
  const made = `arhmark${process.pid}x${++markerCount}x${Math.random().toString(36).slice(2, 8)}`
  markers.push(made)
  return made
}
function processesWith(mark: string): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    let cmdline = ''
    try {
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
    } catch {
      continue
    }
    if (cmdline.includes(mark)) pids.push(Number(entry))
  }
  return pids
}
const running = (mark: string) => processesWith(mark).length > 0
async function waitFor(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`still not true after ${timeoutMs} ms: ${what}`)
    await sleep(50)
  }
}
/** Records whether a process with `mark` was ever seen, until `stop()`. */
function watch(mark: string) {
  const state = { seen: false, stop: () => clearInterval(timer) }
  const timer = setInterval(() => {
    if (!state.seen && running(mark)) state.seen = true
  }, 25)
  return state
}
/** A command whose processes ignore SIGTERM: only a SIGKILL of the whole group ends them. */
const stubborn = (mark: string) => `bash -c "trap '' TERM; (exec -a ${mark}-stubborn sleep 60); : ${mark}-shell"`

/** The shell id a background Bash answered with (its shape is not given by the note: JSON or text). */
function shellIdOf(text: string): string | undefined {
  try {
    const value = JSON.parse(text)
    if (value && typeof value === 'object') {
      for (const key of ['shell_id', 'bash_id', 'task_id', 'id']) if (typeof value[key] === 'string' || typeof value[key] === 'number') return String(value[key])
    }
  } catch {}
  return /\b(?:shell_id|bash_id|task_id|shell id|id)\b["'\s:=]+([A-Za-z0-9_.-]+)/i.exec(text)?.[1]
}

afterEach(async () => {
  while (open.length) await open.pop()!.close().catch(() => {})
})
afterAll(() => {
  // Whatever a failed test left running: only processes carrying this file's markers.
  for (const mark of markers) for (const pid of processesWith(mark)) try { process.kill(pid, 'SIGKILL') } catch {}
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

// ---------------------------------------------------------------------------------------------
// §B.0, §A.2

describe('turning the built-in tools on and off', () => {
  it('a session offers all the built-ins', async () => {
    server.reply(chat('hi'))
    const s = await sessionIn(workspace())
    await run(s)
    expect(offered()).toEqual(expect.arrayContaining(BUILTINS))
  })

  it('createAgent with filesystem offers them; profile local and advanced.builtinTools: true too', async () => {
    const dir = workspace()
    server.reply(chat('hi'))
    for (const extra of [{ filesystem: { roots: [dir], cwd: dir } }, { profile: 'local' as const }, { advanced: { builtinTools: true } }]) {
      server.requests.length = 0
      const a = await agent(extra)
      await (await a.send('hi')).text()
      expect(offered(), JSON.stringify(extra)).toEqual(expect.arrayContaining(BUILTINS))
    }
  })

  it('a plain createAgent offers none of them', async () => {
    server.reply(chat('hi'))
    const a = await agent()
    expect(await (await a.send('hi')).text()).toBe('hi')
    expect(offered().filter((name) => BUILTINS.includes(name))).toEqual([])
  })

  it('builtinTools: false (session) and advanced.builtinTools: false (agent with filesystem) offer none', async () => {
    const dir = workspace()
    server.reply(chat('hi'))
    // The same session without the option offers them (so the next checks can fail).
    await run(await sessionIn(dir))
    expect(offered(0)).toContain('Read')
    await run(await sessionIn(dir, { builtinTools: false }))
    expect(offered(1).filter((name) => BUILTINS.includes(name))).toEqual([])
    const a = await agent({ filesystem: { roots: [dir], cwd: dir }, advanced: { builtinTools: false } })
    await (await a.send('hi')).text()
    expect(offered(2).filter((name) => BUILTINS.includes(name))).toEqual([])
  })

  it("agent-runtime-hooks/server's sessions (Blade's server profile) offer none unless builtinTools: true", async () => {
    const dir = workspace()
    server.reply(chat('hi'))
    const make = async (extra: Partial<SessionOptions>) => {
      const created = await serverProfile.createSession({ provider: { type: 'openai-compatible', apiKey: API_KEY, baseUrl: server.url + '/v1' }, model: MODEL, defaultContext: filesystemOf(dir), ...extra } as SessionOptions)
      open.push(created)
      return created
    }
    await run(await make({}))
    expect(offered(0).filter((name) => BUILTINS.includes(name))).toEqual([])
    await run(await make({ builtinTools: true }))
    expect(offered(1)).toEqual(expect.arrayContaining(BUILTINS))
  })

  it("allowedTools: ['Read', 'Glob'] offers exactly those two", async () => {
    server.reply(chat('hi'))
    const s = await sessionIn(workspace(), { allowedTools: ['Read', 'Glob'] })
    await run(s)
    expect(offered().sort()).toEqual(['Glob', 'Read'])
  })

  it("disallowedTools: ['Bash'] offers the others and not Bash", async () => {
    server.reply(chat('hi'))
    const s = await sessionIn(workspace(), { disallowedTools: ['Bash'] })
    await run(s)
    expect(offered()).not.toContain('Bash')
    expect(offered()).toEqual(expect.arrayContaining(BUILTINS.filter((name) => name !== 'Bash')))
  })

  it('the offered schemas require what §B.3 requires, and no defaulted field', async () => {
    server.reply(chat('hi'))
    const s = await sessionIn(workspace())
    await run(s)
    const required = (name: string) => [...(schemaOf(name)?.required ?? [])].sort()
    expect(required('Read')).toEqual(['file_path'])
    expect(required('Write')).toEqual(['content', 'file_path'])
    expect(required('Edit')).toEqual(['file_path', 'new_string', 'old_string'])
    expect(required('Glob')).toEqual(['pattern'])
    expect(required('Grep')).toEqual(['pattern'])
    expect(required('Bash')).toEqual(['command'])
    expect(required('KillShell')).toEqual(['shell_id'])
    // The optional fields are offered, just not required.
    expect(Object.keys(schemaOf('Read').properties)).toEqual(expect.arrayContaining(['file_path', 'offset', 'limit']))
    expect(Object.keys(schemaOf('Bash').properties)).toEqual(expect.arrayContaining(['command', 'timeout', 'run_in_background']))
    expect(Object.keys(schemaOf('Grep').properties)).toEqual(expect.arrayContaining(['pattern', 'path', 'output_mode']))
  })

  it('getBuiltinTools() (root and /local) gives the tools with their kinds', () => {
    for (const tools of [getBuiltinTools(), local.getBuiltinTools()]) {
      expect(tools.map((tool) => tool.name).sort()).toEqual(BUILTINS)
      const kinds = Object.fromEntries(tools.map((tool) => [tool.name, tool.kind]))
      expect(kinds).toEqual({
        Read: 'readonly',
        Glob: 'readonly',
        Grep: 'readonly',
        TaskOutput: 'readonly',
        TodoWrite: 'readonly',
        EnterPlanMode: 'readonly',
        ExitPlanMode: 'readonly',
        AskUserQuestion: 'readonly',
        Write: 'write',
        Edit: 'write',
        Bash: 'execute',
        KillShell: 'execute',
        NotebookEdit: 'write',
        WebFetch: 'execute',
      })
      expect(tools.find((tool) => tool.name === 'Read')?.parameters).toMatchObject({ required: ['file_path'] })
    }
  })

  it('getBuiltinTools() in tools of a plain createAgent offers them, and Read runs (no workspace: the no-filesystem text)', async () => {
    server.reply(calls({ name: 'Read', input: { file_path: '/tmp/anything.txt' } }), chat('done'))
    const a = await agent({ tools: getBuiltinTools().filter((tool) => tool.name === 'Read' || tool.name === 'Glob') })
    const result = await (await a.send('read it')).result()
    expect(offered(0).sort()).toEqual(['Glob', 'Read'])
    expect(toolMessages()).toEqual([NO_FILESYSTEM])
    expect(result.toolCalls[0]).toMatchObject({ name: 'Read', isError: true, output: NO_FILESYSTEM })
  })
})

// ---------------------------------------------------------------------------------------------
// §B.3 Read, §B.2 path rules

describe('Read', () => {
  const NOTES = 'alpha\nbeta\ngamma\ndelta\n'

  it('returns the whole file raw, with no line numbers (absolute and relative paths)', async () => {
    const dir = workspace({ 'notes.txt': NOTES })
    server.reply(calls({ name: 'Read', input: { file_path: join(dir, 'notes.txt') } }, { name: 'Read', input: { file_path: 'notes.txt' } }), chat('done'))
    const events = await run(await sessionIn(dir))
    expect(toolMessages()).toEqual([NOTES, NOTES])
    expect(results(events).map((result) => result.isError)).toEqual([false, false])
  })

  it('offset 1, limit 2 gives numbered lines `     2→beta\\n     3→gamma`', async () => {
    const dir = workspace({ 'notes.txt': NOTES })
    server.reply(calls({ name: 'Read', input: { file_path: join(dir, 'notes.txt'), offset: 1, limit: 2 } }), chat('done'))
    await run(await sessionIn(dir))
    expect(toolMessages()).toEqual(['     2→beta\n     3→gamma'])
  })

  it('a missing file: `File not found: <path>`, an error', async () => {
    const dir = workspace()
    const missing = join(dir, 'missing.txt')
    server.reply(calls({ name: 'Read', input: { file_path: missing } }), chat('done'))
    const events = await run(await sessionIn(dir))
    expect(toolMessages()).toEqual([`File not found: ${missing}`])
    expect(results(events)[0].isError).toBe(true)
  })

  it('a directory: `Cannot read a directory: <path>`', async () => {
    const dir = workspace({ 'src/a.ts': 'x' })
    server.reply(calls({ name: 'Read', input: { file_path: join(dir, 'src') } }), chat('done'))
    const events = await run(await sessionIn(dir))
    expect(toolMessages()).toEqual([`Cannot read a directory: ${join(dir, 'src')}`])
    expect(results(events)[0].isError).toBe(true)
  })

  it('a file outside the roots, and a symlink in the root pointing out of it, are refused (outside authorized roots), nothing leaked', async () => {
    const dir = workspace()
    const outside = workspace({ 'secret.txt': 'TOP-SECRET-OUTSIDE\n' })
    symlinkSync(join(outside, 'secret.txt'), join(dir, 'link.txt'))
    server.reply(
      calls({ name: 'Read', input: { file_path: join(outside, 'secret.txt') } }, { name: 'Read', input: { file_path: join(dir, 'link.txt') } }),
      chat('done'),
    )
    const events = await run(await sessionIn(dir))
    const [direct, viaLink] = toolMessages()
    expect(direct).toMatch(/outside authorized roots/)
    expect(viaLink).toMatch(/outside authorized roots/)
    expect(toolMessages().join('\n')).not.toContain('TOP-SECRET-OUTSIDE')
    expect(results(events).map((result) => result.isError)).toEqual([true, true])
  })

  it('a session with no filesystem roots: `No filesystem access in the current runtime context.`', async () => {
    const dir = workspace({ 'notes.txt': NOTES })
    server.reply(calls({ name: 'Read', input: { file_path: join(dir, 'notes.txt') } }), chat('done'))
    const events = await run(await session())
    expect(toolMessages()).toEqual([NO_FILESYSTEM])
    expect(results(events)[0].isError).toBe(true)
  })
})

// ---------------------------------------------------------------------------------------------
// §B.3 Write and Edit, §B.2 read before write

describe('Write and Edit', () => {
  it('Write creates the file and its missing parents; the model gets pretty JSON with size 11', async () => {
    const dir = workspace()
    const target = join(dir, 'out', 'deep', 'hello.txt')
    server.reply(calls({ name: 'Write', input: { file_path: target, content: 'hello file\n' } }), chat('done'))
    const events = await run(await sessionIn(dir))
    expect(readFileSync(target, 'utf8')).toBe('hello file\n')
    const [message] = toolMessages()
    expect(message).toMatch(/^\{\n {2}"/)
    expect(message).toContain('"size": 11')
    expect(JSON.parse(message)).toMatchObject({ size: 11 })
    expect(String(JSON.parse(message).file_path)).toContain('hello.txt')
    expect(results(events)[0].isError).toBe(false)
  })

  it('Write refuses an existing file not Read in this session (file unchanged), and works after a Read', async () => {
    const dir = workspace({ 'keep.txt': 'original\n' })
    const target = join(dir, 'keep.txt')
    let afterRefusal = ''
    server.reply(
      calls({ name: 'Write', input: { file_path: target, content: 'overwritten\n' } }),
      (req, res) => {
        afterRefusal = readFileSync(target, 'utf8')
        return calls({ name: 'Read', input: { file_path: target } })(req, res)
      },
      calls({ name: 'Write', input: { file_path: target, content: 'overwritten\n' } }),
      chat('done'),
    )
    const events = await run(await sessionIn(dir))
    const [refused, read, written] = toolMessages()
    expect(refused).toMatch(/must use (the|your) Read tool/i)
    expect(afterRefusal).toBe('original\n')
    expect(read).toBe('original\n')
    expect(JSON.parse(written)).toMatchObject({ size: 12 })
    expect(readFileSync(target, 'utf8')).toBe('overwritten\n')
    expect(results(events).map((result) => result.isError)).toEqual([true, false, false])
  })

  it('Edit after a Read replaces the one match: replacements 1', async () => {
    const dir = workspace({ 'a.txt': 'one\ntwo\nthree\n' })
    const target = join(dir, 'a.txt')
    server.reply(
      calls({ name: 'Read', input: { file_path: target } }),
      calls({ name: 'Edit', input: { file_path: target, old_string: 'two', new_string: 'TWO' } }),
      chat('done'),
    )
    await run(await sessionIn(dir))
    const edited = toolMessages()[1]
    expect(edited).toContain('"replacements": 1')
    expect(JSON.parse(edited)).toMatchObject({ replacements: 1 })
    expect(readFileSync(target, 'utf8')).toBe('one\nTWO\nthree\n')
  })

  it('Edit without a Read first is refused (must use the Read tool), file unchanged', async () => {
    const dir = workspace({ 'a.txt': 'one\ntwo\n' })
    const target = join(dir, 'a.txt')
    server.reply(calls({ name: 'Edit', input: { file_path: target, old_string: 'two', new_string: 'TWO' } }), chat('done'))
    await run(await sessionIn(dir))
    expect(toolMessages()[0]).toMatch(/must use (the|your) Read tool/i)
    expect(readFileSync(target, 'utf8')).toBe('one\ntwo\n')
  })

  it('Edit with a string found twice: `old_string matches 2 locations (must be unique)`, `Line 2`, file unchanged', async () => {
    const dir = workspace({ 'dup.txt': 'first\ndup\ndup\n' })
    const target = join(dir, 'dup.txt')
    server.reply(
      calls({ name: 'Read', input: { file_path: target } }),
      calls({ name: 'Edit', input: { file_path: target, old_string: 'dup', new_string: 'once' } }),
      chat('done'),
    )
    const events = await run(await sessionIn(dir))
    const paused = toolMessages()[1]
    expect(paused).toContain('old_string matches 2 locations (must be unique)')
    expect(paused).toContain('Line 2')
    expect(paused).toContain('Line 3')
    expect(results(events)[1].isError).toBe(true)
    expect(readFileSync(target, 'utf8')).toBe('first\ndup\ndup\n')
  })

  it('Edit with a string not there: `String not found in file.`, file unchanged', async () => {
    const dir = workspace({ 'a.txt': 'one\ntwo\n' })
    const target = join(dir, 'a.txt')
    server.reply(
      calls({ name: 'Read', input: { file_path: target } }),
      calls({ name: 'Edit', input: { file_path: target, old_string: 'seventeen', new_string: '17' } }),
      chat('done'),
    )
    const events = await run(await sessionIn(dir))
    expect(toolMessages()[1].startsWith('String not found in file.')).toBe(true)
    expect(results(events)[1].isError).toBe(true)
    expect(readFileSync(target, 'utf8')).toBe('one\ntwo\n')
  })
})

// ---------------------------------------------------------------------------------------------
// §B.3 Glob and Grep

describe('Glob and Grep', () => {
  /** A git repository (where a user's .gitignore applies) with two sources, a README and an ignored build folder. */
  function project(): string {
    const dir = workspace({
      '.gitignore': 'dist/\n',
      'src/a.ts': 'export const needle = 1\n',
      'src/b.ts': 'export const hay = 2\n',
      'README.md': 'nothing here\n',
      'dist/c.ts': 'export const needle = 3\n',
    })
    execFileSync('git', ['init', '-q'], { cwd: dir })
    return dir
  }

  it('Glob lists the matches relative to the workspace, .gitignore respected', async () => {
    const dir = project()
    server.reply(calls({ name: 'Glob', input: { pattern: '**/*.ts' } }), chat('done'))
    const events = await run(await sessionIn(dir))
    const [listing] = toolMessages()
    expect(listing.startsWith('Found 2 file(s) matching "**/*.ts":')).toBe(true)
    expect(listing).toContain('- src/a.ts')
    expect(listing).toContain('- src/b.ts')
    expect(listing).not.toContain('dist')
    expect(results(events)[0].isError).toBe(false)
  })

  it('Glob with no match: `No files found matching "<pattern>"`', async () => {
    const dir = project()
    server.reply(calls({ name: 'Glob', input: { pattern: '**/*.py' } }), chat('done'))
    await run(await sessionIn(dir))
    expect(toolMessages()).toEqual(['No files found matching "**/*.py"'])
  })

  it('Grep (files_with_matches by default) answers pretty JSON naming the matching file only', async () => {
    const dir = project()
    server.reply(calls({ name: 'Grep', input: { pattern: 'needle', path: join(dir, 'src') } }), chat('done'))
    const events = await run(await sessionIn(dir))
    const [answer] = toolMessages()
    expect(answer).toMatch(/^\[\n {2}\{/)
    const matches = JSON.parse(answer) as Array<{ file_path: string }>
    expect(matches.map((match) => match.file_path)).toEqual([join(dir, 'src', 'a.ts')])
    expect(answer).not.toContain('b.ts')
    expect(answer).not.toContain('README')
    expect(results(events)[0].isError).toBe(false)
  })

  it('a bad regex is an error the model sees, and the session goes on', async () => {
    const dir = project()
    server.reply(calls({ name: 'Grep', input: { pattern: '(unclosed' } }), chat('done'), chat('still here'))
    const s = await sessionIn(dir)
    const events = await run(s)
    expect(results(events)[0].isError).toBe(true)
    expect(toolMessages()[0]).toMatch(/^Search (execution )?failed/)
    expect(textOf(await run(s, 'again'))).toBe('still here')
  })
})

// ---------------------------------------------------------------------------------------------
// §B.3 Bash, KillShell

describe('Bash', () => {
  const bashAnswer = (message: string) => JSON.parse(message) as { stdout: string; stderr: string; exit_code: number; signal: unknown }

  it('`exit 3` answers exit_code 3 (pretty JSON), not an error', async () => {
    const dir = workspace()
    server.reply(calls({ name: 'Bash', input: { command: 'exit 3' } }), chat('done'))
    const events = await run(await sessionIn(dir))
    const [message] = toolMessages()
    expect(message).toContain('"exit_code": 3')
    expect(bashAnswer(message).exit_code).toBe(3)
    expect(results(events)[0].isError).toBe(false)
  })

  it('stdout and stderr are trimmed; the command runs in the workspace with BLADE_CLI=1', async () => {
    const dir = workspace()
    server.reply(
      calls({ name: 'Bash', input: { command: "printf 'hello\\n\\n\\n'; echo oops >&2" } }, { name: 'Bash', input: { command: 'pwd -P; echo "cli=$BLADE_CLI"' } }),
      chat('done'),
    )
    await run(await sessionIn(dir))
    const [printed, where] = toolMessages().map(bashAnswer)
    expect(printed).toMatchObject({ stdout: 'hello', stderr: 'oops', exit_code: 0 })
    expect(where.stdout).toBe(`${dir}\ncli=1`)
  })

  it('timeout 1000 ends `sleep 30` with `Command execution timed out (1000ms)`, and nothing of it survives, a TERM-ignoring child included', async () => {
    const dir = workspace()
    const mark = marker()
    const command = `(exec -a ${mark}-child sleep 30) & ${stubborn(mark)}; wait`
    server.reply(calls({ name: 'Bash', input: { command, timeout: 1000 } }), chat('done'))
    const seen = watch(mark)
    const started = Date.now()
    const events = await run(await sessionIn(dir))
    const took = Date.now() - started
    try {
      expect(seen.seen).toBe(true)
      expect(toolMessages()[0]).toMatch(/^Command execution timed out \(1000ms\)/)
      expect(results(events)[0].isError).toBe(true)
      expect(took).toBeLessThan(10000)
      await waitFor(() => !running(mark), 5000, `no process of ${mark} (left: ${processesWith(mark)})`)
    } finally {
      seen.stop()
    }
  }, 30000)

  it('agent.abort() during a command kills its whole group, and the next send works', async () => {
    const dir = workspace()
    const mark = marker()
    server.reply(calls({ name: 'Bash', input: { command: stubborn(mark) } }), chat('after abort'))
    const a = await agent({ filesystem: { roots: [dir], cwd: dir } })
    const response = await a.send('run it')
    await waitFor(() => running(mark), 10000, `${mark} started`)
    const abortedAt = Date.now()
    a.abort()
    await response.result().catch(() => undefined)
    expect(Date.now() - abortedAt).toBeLessThan(5000)
    await waitFor(() => !running(mark), 5000, `no process of ${mark} (left: ${processesWith(mark)})`)
    expect(await (await a.send('again')).text()).toBe('after abort')
  }, 30000)

  it('session.abort() during a command kills its whole group, and the next send works', async () => {
    const dir = workspace()
    const mark = marker()
    server.reply(calls({ name: 'Bash', input: { command: stubborn(mark) } }), chat('after abort'))
    const s = await sessionIn(dir)
    let aborted = false
    await run(s, 'run it', async (event) => {
      if (event.type === 'tool_use' && !aborted) {
        aborted = true
        await waitFor(() => running(mark), 10000, `${mark} started`)
        await s.abort()
      }
    })
    expect(aborted).toBe(true)
    await waitFor(() => !running(mark), 5000, `no process of ${mark} (left: ${processesWith(mark)})`)
    expect(textOf(await run(s, 'again'))).toBe('after abort')
  }, 30000)

  it('run_in_background answers at once with a shell id; KillShell with it stops the command', async () => {
    const dir = workspace()
    const mark = marker()
    let shellId: string | undefined
    let runningWhenAsked = false
    server.reply(
      calls({ name: 'Bash', input: { command: `(exec -a ${mark}-bg sleep 60); : ${mark}`, run_in_background: true } }),
      async (req, res) => {
        shellId = shellIdOf(toolMessagesOf(req).at(-1) ?? '')
        await waitFor(() => running(mark), 5000, `${mark} started`)
        runningWhenAsked = true
        return calls({ name: 'KillShell', input: { shell_id: shellId ?? 'none' } })(req, res)
      },
      chat('killed'),
    )
    const started = Date.now()
    const events = await run(await sessionIn(dir))
    expect(Date.now() - started).toBeLessThan(15000)
    expect(shellId).toBeTruthy()
    expect(runningWhenAsked).toBe(true)
    expect(results(events).map((result) => [result.name, result.isError])).toEqual([
      ['Bash', false],
      ['KillShell', false],
    ])
    await waitFor(() => !running(mark), 5000, `no process of ${mark} (left: ${processesWith(mark)})`)
  }, 30000)

  it('KillShell with an unknown id: `Shell not found: <id>`', async () => {
    server.reply(calls({ name: 'KillShell', input: { shell_id: 'no-such-shell' } }), chat('done'))
    const events = await run(await sessionIn(workspace()))
    expect(toolMessages()).toEqual(['Shell not found: no-such-shell'])
    expect(results(events)[0].isError).toBe(true)
  })

  it('close() kills the background shells', async () => {
    const dir = workspace()
    const mark = marker()
    server.reply(calls({ name: 'Bash', input: { command: stubborn(mark), run_in_background: true } }), chat('started'))
    const s = await sessionIn(dir)
    await run(s)
    await waitFor(() => running(mark), 5000, `${mark} started`)
    await s.close()
    await waitFor(() => !running(mark), 5000, `no process of ${mark} (left: ${processesWith(mark)})`)
  }, 30000)
})

// ---------------------------------------------------------------------------------------------
// §B.1 kinds, plan mode

describe('kinds and permissions', () => {
  it("canUseTool receives toolKind 'readonly' for Read, 'write' for Write, 'execute' for Bash", async () => {
    const dir = workspace({ 'notes.txt': 'hi\n' })
    const asked: Array<[string, string]> = []
    server.reply(
      calls(
        { name: 'Read', input: { file_path: join(dir, 'notes.txt') } },
        { name: 'Write', input: { file_path: join(dir, 'new.txt'), content: 'new\n' } },
        { name: 'Bash', input: { command: 'echo ran' } },
      ),
      chat('done'),
    )
    const s = await sessionIn(dir, {
      canUseTool: async (toolName, _input, options) => {
        asked.push([toolName, options.toolKind])
        return { behavior: 'allow' }
      },
    })
    await run(s)
    expect(asked).toContainEqual(['Read', 'readonly'])
    expect(asked).toContainEqual(['Write', 'write'])
    expect(asked).toContainEqual(['Bash', 'execute'])
    expect(readFileSync(join(dir, 'new.txt'), 'utf8')).toBe('new\n')
  })

  it("permissionMode 'plan': Read, Glob and Grep run; Write, Edit and Bash get Blade's plan text and change nothing", async () => {
    const dir = workspace({ 'notes.txt': 'needle\n' })
    server.reply(
      calls(
        { name: 'Read', input: { file_path: join(dir, 'notes.txt') } },
        { name: 'Glob', input: { pattern: '*.txt' } },
        { name: 'Grep', input: { pattern: 'needle' } },
        { name: 'Write', input: { file_path: join(dir, 'plan.txt'), content: 'x' } },
        { name: 'Edit', input: { file_path: join(dir, 'notes.txt'), old_string: 'needle', new_string: 'pin' } },
        { name: 'Bash', input: { command: 'touch bash-ran.txt' } },
      ),
      chat('done'),
    )
    const events = await run(await sessionIn(dir, { permissionMode: 'plan' }))
    const [read, glob, grep, write, edit, bash] = toolMessages()
    expect(read).toBe('needle\n')
    expect(glob.startsWith('Found 1 file(s) matching "*.txt":')).toBe(true)
    expect(JSON.parse(grep)).toEqual([expect.objectContaining({ file_path: join(dir, 'notes.txt') })])
    expect([write, edit, bash]).toEqual([PLAN_DENIAL, PLAN_DENIAL, PLAN_DENIAL])
    expect(results(events).map((result) => result.isError)).toEqual([false, false, false, true, true, true])
    expect(existsSync(join(dir, 'plan.txt'))).toBe(false)
    expect(existsSync(join(dir, 'bash-ran.txt'))).toBe(false)
    expect(readFileSync(join(dir, 'notes.txt'), 'utf8')).toBe('needle\n')
  })
})

// ---------------------------------------------------------------------------------------------
// §B.4: the seed's three examples, verbatim

describe("hooks on built-in tools (the seed's examples)", () => {
  it('a PreToolUse abort on a dangerous Bash command: `Tool execution aborted: <reason>`, the command does not run, no PostToolUse', async () => {
    const dir = workspace()
    const command = 'touch ran.txt; rm -rf ./nothing'
    const post: string[] = []
    const dangerous = [/rm\s+-rf/, /mkfs/, /dd\s+if=/]
    server.reply(calls({ name: 'Bash', input: { command } }), chat('done'))
    const events = await run(
      await sessionIn(dir, {
        hooks: {
          [HookEvent.PreToolUse]: [
            async (input) => {
              if (input.toolName !== 'Bash') {
                return { action: 'continue' }
              }
              const command = String(input.toolInput?.command ?? '')
              if (dangerous.some((pattern) => pattern.test(command))) {
                return {
                  action: 'abort',
                  reason: `危险命令被阻止: ${command}`,
                }
              }
              return { action: 'continue' }
            },
          ],
          [HookEvent.PostToolUse]: [async (input) => (post.push(input.toolName), { action: 'continue' as const })],
        },
      }),
    )
    expect(toolMessages()).toEqual([`Tool execution aborted: 危险命令被阻止: ${command}`])
    expect(results(events)[0].isError).toBe(true)
    expect(existsSync(join(dir, 'ran.txt'))).toBe(false)
    expect(post).toEqual([])
  })

  it("PreToolUse modifiedInput prefixing Write's content: the prefix lands in the file", async () => {
    const dir = workspace()
    const target = join(dir, 'gen.ts')
    server.reply(calls({ name: 'Write', input: { file_path: target, content: 'export const x = 1\n' } }), chat('done'))
    await run(
      await sessionIn(dir, {
        hooks: {
          [HookEvent.PreToolUse]: [
            async (input) => {
              if (input.toolName !== 'Write') {
                return { action: 'continue' }
              }
              return {
                action: 'continue',
                modifiedInput: {
                  ...input.toolInput,
                  content: `// Generated\n${String(input.toolInput?.content ?? '')}`,
                },
              }
            },
          ],
        },
      }),
    )
    expect(readFileSync(target, 'utf8')).toBe('// Generated\nexport const x = 1\n')
    expect(JSON.parse(toolMessages()[0])).toMatchObject({ size: Buffer.byteLength('// Generated\nexport const x = 1\n') })
  })

  it("PostToolUse modifiedOutput redacting Read's output is what the model receives (`SECRET_KEY=***`)", async () => {
    const dir = workspace({ 'app.env': 'SECRET_KEY=abc123\nPUBLIC=1\n' })
    server.reply(calls({ name: 'Read', input: { file_path: join(dir, 'app.env') } }), chat('done'))
    await run(
      await sessionIn(dir, {
        hooks: {
          [HookEvent.PostToolUse]: [
            async (input) => {
              if (input.toolName !== 'Read') {
                return { action: 'continue' }
              }
              return {
                action: 'continue',
                modifiedOutput: String(input.toolOutput).replace(/SECRET_KEY=\w+/g, 'SECRET_KEY=***'),
              }
            },
          ],
        },
      }),
    )
    expect(toolMessages()).toEqual(['SECRET_KEY=***\nPUBLIC=1\n'])
    expect(JSON.stringify(server.requests.map((request) => request.body))).not.toContain('abc123')
    expect(readFileSync(join(dir, 'app.env'), 'utf8')).toBe('SECRET_KEY=abc123\nPUBLIC=1\n')
  })
})

// ---------------------------------------------------------------------------------------------
// Bad input, as an attacker would send it: each a clear error the model sees; the process lives
// on and the next send of the same session works.

describe('bad input', () => {
  /** Runs one turn of `call`, then checks the session still answers. */
  async function attack(dir: string, ...list: Call[]): Promise<{ messages: string[]; events: SessionStreamEvent[] }> {
    server.reply(calls(...list), chat('done'), chat('still here'))
    const s = await sessionIn(dir)
    const events = await run(s)
    const messages = toolMessages()
    expect(textOf(await run(s, 'again'))).toBe('still here')
    return { messages, events }
  }

  it('Read with file_path: 42 names the bad field', async () => {
    const { messages, events } = await attack(workspace(), { name: 'Read', input: { file_path: 42 } })
    expect(messages[0]).toMatch(/file_path/)
    expect(results(events)[0].isError).toBe(true)
  })

  it('Bash with no command names the missing field', async () => {
    const { messages, events } = await attack(workspace(), { name: 'Bash', input: {} })
    expect(messages[0]).toMatch(/command/)
    expect(results(events)[0].isError).toBe(true)
  })

  it('Grep with a 10 KB pathological regex answers (a result or an error) within seconds', async () => {
    const dir = workspace({ 'a.txt': 'a'.repeat(5000) + '\n' })
    const pattern = '(a+)+'.repeat(2000) + 'b'
    expect(pattern.length).toBeGreaterThan(10000)
    const started = Date.now()
    // Whether it is refused (a size limit) or searched (a linear-time engine) is not pinned; it
    // must not hang or take the process down.
    const { messages } = await attack(dir, { name: 'Grep', input: { pattern, path: dir } })
    expect(Date.now() - started).toBeLessThan(15000)
    // Grep's own answer: its JSON array (no match: there is no `b`) or its own failure text.
    const answer = messages[0]
    const searched = (() => {
      try {
        return Array.isArray(JSON.parse(answer))
      } catch {
        return false
      }
    })()
    expect(searched || /^Search (execution )?failed|regex|pattern/i.test(answer), answer).toBe(true)
    expect(answer).not.toContain('a.txt')
  }, 30000)

  it('paths escaping with `..` are refused: nothing read, nothing written outside', async () => {
    const dir = workspace()
    const escapeName = `${basename(dir)}-escape.txt`
    const { messages, events } = await attack(
      dir,
      { name: 'Read', input: { file_path: '../../../../../../../../etc/passwd' } },
      { name: 'Write', input: { file_path: `../${escapeName}`, content: 'escaped' } },
      // Kept as text: path.join would fold the `..` away.
      { name: 'Read', input: { file_path: `${dir}/../../../../../etc/hostname` } },
    )
    for (const message of messages) expect(message).toMatch(/outside authorized roots|dangerous system paths/)
    expect(messages.join('\n')).not.toContain('root:')
    expect(existsSync(join(dirname(dir), escapeName))).toBe(false)
    expect(results(events).map((result) => result.isError)).toEqual([true, true, true])
  })

  it('a NUL byte in a path is an error, and no file is made', async () => {
    const dir = workspace()
    const { messages, events } = await attack(
      dir,
      { name: 'Read', input: { file_path: join(dir, 'a\u0000b.txt') } },
      { name: 'Write', input: { file_path: join(dir, 'c\u0000d.txt'), content: 'x' } },
    )
    expect(messages).toHaveLength(2)
    // The exact text is not given by the note; a clear one speaks of the path or the NUL.
    for (const message of messages) expect(message).toMatch(/path|NUL|null|byte|\\0/i)
    expect(results(events).map((result) => result.isError)).toEqual([true, true])
    expect(readdirSync(dir)).toEqual([])
  })
})
