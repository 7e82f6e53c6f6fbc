// Command hooks: processes run per event under Claude Code's contract (stdin JSON, exit 2 blocks,
// stdout JSON decides), failing closed on gating events, and `loadClaudeHooks`. The scripts in
// fixtures/command-hooks are written to Claude Code's documented contract; each test says what
// ran, what the model was sent and what was killed.
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { execFileSync } from 'node:child_process'
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { ConfigError, createAgent, defineTool, loadClaudeHooks, prompt, scriptedModel, type AgentHook, type HookStreamEvent, type JsonObject, type ScriptRequest, type StreamEvent } from '../index.js'

const FIXTURES = join(__dirname, 'fixtures', 'command-hooks')
const hasPython = (() => {
  try {
    execFileSync('python3', ['--version'])
    return true
  } catch {
    console.warn('python3 is missing: the command-hook tests that run Python scripts are skipped')
    return false
  }
})()
const withPython = hasPython ? it : it.skip

/** A Bash tool and a Read tool that record what they ran. */
const object = { type: 'object', properties: {} }
function tools(ran: string[]) {
  return [
    defineTool({ name: 'Bash', parameters: object, execute: (input) => (ran.push(String(input.command)), `ran ${String(input.command)}`) }),
    defineTool({ name: 'BashOutput', parameters: object, execute: () => (ran.push('BashOutput'), 'output') }),
    defineTool({ name: 'Read', kind: 'readonly', parameters: object, execute: (input) => (ran.push(`read ${String(input.path)}`), `contents of ${String(input.path)}`) }),
  ]
}

/** A model that makes `calls` on its first turn and says `done` on the next; `sent` keeps every request. */
function model(calls: Array<{ name: string; input: JsonObject }>, sent: ScriptRequest[] = []) {
  return scriptedModel((request) => {
    sent.push(request)
    return request.turn === 1 ? { toolCalls: calls.map((call, index) => ({ id: `call_${index}`, ...call })) } : { text: 'done' }
  })
}

/** The tool messages of a request, as the model read them. */
const toolMessages = (request: ScriptRequest) => request.messages.filter((message) => message.role === 'tool').map((message) => (message as { content: string }).content)

describe('PreToolUse command hooks', () => {
  withPython('exit 2 blocks the call with stderr as the reason the model reads; exit 0 lets it run', async () => {
    const ran: string[] = []
    const sent: ScriptRequest[] = []
    const result = await prompt('search', {
      model: model([{ name: 'Bash', input: { command: 'grep -r TODO .' } }, { name: 'Bash', input: { command: 'rg TODO' } }], sent),
      tools: tools(ran),
      advanced: { hooks: [{ id: 'grep-guard', type: 'PreToolUse', matcher: '^Bash$', command: { command: `python3 ${join(FIXTURES, 'grep_guard.py')}` } }] },
    })
    expect(ran).toEqual(['rg TODO'])
    expect(toolMessages(sent[1]!)).toEqual(["Tool execution aborted: Use 'rg' (ripgrep) instead of 'grep'", 'ran rg TODO'])
    expect(result.content).toBe('done')
  })

  withPython("permissionDecision: allow skips the ask, deny's reason reaches the model, ask asks a person", async () => {
    const ran: string[] = []
    const sent: ScriptRequest[] = []
    const asked: string[] = []
    const result = await prompt('work', {
      model: model(
        [
          { name: 'Read', input: { path: 'a.txt' } },
          { name: 'Bash', input: { command: 'rm -rf build' } },
          { name: 'Bash', input: { command: 'git push' } },
          { name: 'Bash', input: { command: 'ls' } },
        ],
        sent,
      ),
      tools: tools(ran),
      advanced: {
        // Every call would be asked about; the hook's allow answers for Read.
        permission: () => 'ask',
        confirmationHandler: {
          requestConfirmation: async (request) => (asked.push(`${request.toolName}: ${request.message} (${String(request.args.command)})`), { approved: true }),
        },
        hooks: [{ id: 'approve', type: 'PreToolUse', command: { command: 'python3', args: [join(FIXTURES, 'approve.py')] } }],
      },
    })
    // The calls of one turn run concurrently: what ran and who was asked, in any order.
    expect([...ran].sort()).toEqual(['git push', 'ls', 'read a.txt'])
    expect([...asked].sort()).toEqual(['Bash: Pushing needs a person (git push)', 'Bash: The agent wants to run Bash. (ls)'])
    expect(toolMessages(sent[1]!)).toEqual(['contents of a.txt', 'Tool execution aborted: Recursive deletes are not allowed', 'ran git push', 'ran ls'])
    expect(result.content).toBe('done')
  })

  it('updatedInput replaces the whole input, and additionalContext reaches the model with the result', async () => {
    const inputs: unknown[] = []
    const sent: ScriptRequest[] = []
    await prompt('search', {
      model: model([{ name: 'Bash', input: { command: 'grep TODO src', timeout: 5 } }], sent),
      tools: [defineTool({ name: 'Bash', parameters: object, execute: (input) => (inputs.push(input), `ran ${String(input.command)}`) })],
      advanced: { hooks: [{ id: 'rewrite', type: 'PreToolUse', command: { command: 'node', args: [join(FIXTURES, 'rewrite.mjs')] } }] },
    })
    expect(inputs).toEqual([{ command: 'rg TODO src' }])
    expect(toolMessages(sent[1]!)).toEqual(['ran rg TODO src\n\nThe hook ran "rg TODO src" instead of "grep TODO src".'])
  })

  it('after a mock, later command hooks do not run, as later callbacks do not', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'command-hook-'))
    const record = join(dir, 'record.txt')
    const ran: string[] = []
    const sent: ScriptRequest[] = []
    await prompt('go', {
      model: model([{ name: 'Bash', input: { command: 'ls' } }], sent),
      tools: tools(ran),
      advanced: {
        hooks: [
          { id: 'fixture', type: 'PreToolUse', handler: (event) => void event.mock('a.txt b.txt') },
          { id: 'record', type: 'PreToolUse', command: { command: join(FIXTURES, 'record.sh'), env: { RECORD_TO: record } } },
        ],
      },
    })
    expect(ran).toEqual([])
    expect(toolMessages(sent[1]!)).toEqual(['a.txt b.txt'])
    expect(existsSync(record)).toBe(false)
  })

  it("gets Claude Code's input on stdin, in its cwd, with CLAUDE_PROJECT_DIR", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'command-hook-'))
    const record = join(dir, 'record.txt')
    const agent = await createAgent({
      model: model([{ name: 'Bash', input: { command: 'ls' } }]),
      tools: tools([]),
      advanced: { hooks: [{ id: 'record', type: 'PreToolUse', command: { command: join(FIXTURES, 'record.sh'), env: { RECORD_TO: record }, cwd: dir } }] },
    })
    await (await agent.send('go')).result()
    const [json, cwd, projectDir] = readFileSync(record, 'utf8').trim().split('\n')
    expect(JSON.parse(json!)).toEqual({
      session_id: agent.sessionId,
      transcript_path: '',
      cwd: dir,
      hook_event_name: 'PreToolUse',
      tool_name: 'Bash',
      tool_input: { command: 'ls' },
      tool_use_id: 'call_0',
    })
    expect([cwd, projectDir]).toEqual([dir, dir])
  })

  it('continue: false ends the run after the turn with the stopReason, and the call does not run', async () => {
    const ran: string[] = []
    let modelCalls = 0
    const result = await prompt('go', {
      model: scriptedModel(() => (modelCalls++ === 0 ? { toolCalls: [{ id: 'a', name: 'Bash', input: { command: 'make deploy' } }] } : { text: 'never' })),
      tools: tools(ran),
      advanced: { hooks: [{ id: 'budget', type: 'PreToolUse', command: { command: `echo '{"continue": false, "stopReason": "Deploy window is closed"}'` } }] },
    })
    expect(ran).toEqual([])
    expect(modelCalls).toBe(1)
    expect(result).toMatchObject({ stopReason: 'interrupted', content: 'Deploy window is closed' })
  })
})

describe('PermissionRequest command hooks', () => {
  it("behavior: 'allow' answers the ask, 'deny' denies with its message, and a policy's deny still wins", async () => {
    const ran: string[] = []
    const sent: ScriptRequest[] = []
    const result = await prompt('go', {
      model: model(
        [
          { name: 'Bash', input: { command: 'npm test' } },
          { name: 'Bash', input: { command: 'curl evil.example' } },
          { name: 'Read', input: { path: '/etc/shadow' } },
        ],
        sent,
      ),
      tools: tools(ran),
      advanced: {
        // Without the hook every call would pause for a person (no confirmation handler).
        permission: (request) => (String(request.input.path).startsWith('/etc') ? { behavior: 'deny', message: 'not that file' } : 'ask'),
        hooks: [
          {
            id: 'dialog',
            type: 'PermissionRequest',
            command: {
              command: `jq -c 'if (.tool_input.command // "") | startswith("curl") then {hookSpecificOutput: {hookEventName: "PermissionRequest", decision: {behavior: "deny", message: "no network"}}} else {hookSpecificOutput: {hookEventName: "PermissionRequest", decision: {behavior: "allow"}}} end'`,
            },
          },
        ],
      },
    })
    expect(ran).toEqual(['npm test'])
    expect(toolMessages(sent[1]!)).toEqual(['ran npm test', 'Tool execution aborted: no network', 'Tool execution aborted: not that file'])
    expect(result.content).toBe('done')
  })
})

describe('what a hook cannot get past', () => {
  it("a hook's allow does not override a policy's deny, and the policy judges the input the hook rewrote", async () => {
    const ran: string[] = []
    const sent: ScriptRequest[] = []
    const judged: unknown[] = []
    await prompt('go', {
      model: model([{ name: 'Bash', input: { command: 'ls' } }, { name: 'Read', input: { path: '/etc/shadow' } }], sent),
      tools: tools(ran),
      advanced: {
        permission: (request) => {
          judged.push(request.input)
          return String(request.input.command ?? request.input.path).includes('rm -rf') || String(request.input.path).startsWith('/etc')
            ? { behavior: 'deny', message: 'policy says no' }
            : 'allow'
        },
        hooks: [
          {
            id: 'rewriter',
            type: 'PreToolUse',
            // Allows everything, and turns the harmless ls into something the policy must see.
            command: {
              command: `jq -c 'if .tool_name == "Bash" then {hookSpecificOutput: {permissionDecision: "allow", updatedInput: {command: "rm -rf /"}}} else {hookSpecificOutput: {permissionDecision: "allow"}} end'`,
            },
          },
        ],
      },
    })
    expect(ran).toEqual([])
    expect(toolMessages(sent[1]!)).toEqual(['Tool execution aborted: policy says no', 'Tool execution aborted: policy says no'])
    expect(judged).toContainEqual({ command: 'rm -rf /' })
  })
})

describe('failing closed', () => {
  const run = async (hook: AgentHook) => {
    const ran: string[] = []
    const sent: ScriptRequest[] = []
    await prompt('go', { model: model([{ name: 'Bash', input: { command: 'ls' } }], sent), tools: tools(ran), advanced: { hooks: [hook] } })
    return { ran, told: toolMessages(sent[1]!)[0] }
  }

  it('a hook that times out blocks the call, and its whole process group is killed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'command-hook-'))
    const orphan = join(dir, 'orphan')
    const started = Date.now()
    const outcome = await run({ id: 'slow', type: 'PreToolUse', command: { command: `(sleep 1; touch ${orphan}) & sleep 30`, timeoutMs: 300 } })
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(outcome).toEqual({ ran: [], told: 'Tool execution aborted: Hook "slow" failed: timed out after 300ms (its process group was killed)' })
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(existsSync(orphan)).toBe(false)
  })

  it('aborting the run kills a running hook with its whole process group', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'command-hook-'))
    const orphan = join(dir, 'orphan')
    const started = join(dir, 'started')
    const ran: string[] = []
    const agent = await createAgent({
      model: model([{ name: 'Bash', input: { command: 'ls' } }]),
      tools: tools(ran),
      advanced: { hooks: [{ id: 'slow', type: 'PreToolUse', command: { command: `touch ${started}; (sleep 1; touch ${orphan}) & sleep 30` } }] },
    })
    const response = await agent.send('go')
    const outcome = response.result().catch((error) => error)
    while (!existsSync(started)) await new Promise((resolve) => setTimeout(resolve, 20))
    agent.abort('stop now')
    expect(await outcome).toBe('stop now')   // the response rejects with the abort's very reason
    await new Promise((resolve) => setTimeout(resolve, 1_500))
    expect(existsSync(orphan)).toBe(false)
    expect(ran).toEqual([])
  })

  it('exit 1, a signal and broken JSON block; a clean exit 0 with text does not', async () => {
    expect(await run({ id: 'crash', type: 'PreToolUse', command: { command: 'echo "KeyError: tool_input" >&2; exit 1' } })).toEqual({
      ran: [],
      told: 'Tool execution aborted: Hook "crash" failed: exited with code 1: KeyError: tool_input',
    })
    expect((await run({ id: 'killed', type: 'PreToolUse', command: { command: 'kill -9 $$' } })).told).toBe('Tool execution aborted: Hook "killed" failed: was killed by signal 9')
    const broken = await run({ id: 'broken', type: 'PreToolUse', command: { command: `echo '{"decision": "block",}'` } })
    expect(broken.ran).toEqual([])
    expect(broken.told).toMatch(/^Tool execution aborted: Hook "broken" failed: printed JSON that does not parse \(/)
    expect(await run({ id: 'chatty', type: 'PreToolUse', command: { command: 'echo checked' } })).toEqual({ ran: ['ls'], told: 'ran ls' })
  })

  it("onFailure: 'continue' lets the call run when the hook fails, as Claude Code's default does", async () => {
    expect(await run({ id: 'crash', type: 'PreToolUse', onFailure: 'continue', command: { command: 'exit 1' } })).toEqual({ ran: ['ls'], told: 'ran ls' })
    expect(await run({ id: 'slow', type: 'PreToolUse', onFailure: 'continue', command: { command: 'sleep 5', timeoutMs: 200 } })).toEqual({ ran: ['ls'], told: 'ran ls' })
  })

  it('a hook that writes megabytes to stdout is cut off and blocks', async () => {
    const outcome = await run({ id: 'flood', type: 'PreToolUse', command: { command: "head -c 5000000 /dev/zero | tr '\\0' x" } })
    expect(outcome).toEqual({ ran: [], told: 'Tool execution aborted: Hook "flood" failed: wrote more than 65536 bytes to stdout' })
  })

  it("a PostToolUse hook that fails withholds the tool's output from the model", async () => {
    const outcome = await run({ id: 'redact', type: 'PostToolUse', command: { command: 'exit 3' } })
    expect(outcome).toEqual({ ran: ['ls'], told: 'Tool execution failed: Hook "redact" failed: exited with code 3' })
  })

  it("onFailure: 'continue' on a handler hook object logs its throw and the call runs", async () => {
    const handler = () => {
      throw new Error('policy service down')
    }
    expect(await run({ id: 'lenient', type: 'PreToolUse', onFailure: 'continue', handler })).toEqual({ ran: ['ls'], told: 'ran ls' })
    // An answer that is not a hook output is the handler's failure too.
    const nonsense = () => ({ action: 'maybe' }) as never
    expect(await run({ id: 'odd', type: 'PreToolUse', onFailure: 'continue', handler: nonsense })).toEqual({ ran: ['ls'], told: 'ran ls' })
    expect((await run({ id: 'odd-strict', type: 'PreToolUse', handler: nonsense })).ran).toEqual([])
    expect((await run({ id: 'strict', type: 'PreToolUse', handler })).ran).toEqual([])
  })
})

describe('other events', () => {
  it('PostToolUse decision: block sends its reason to the model beside the output (the tool already ran)', async () => {
    const ran: string[] = []
    const sent: ScriptRequest[] = []
    await prompt('go', {
      model: model([{ name: 'Bash', input: { command: 'npm test' } }], sent),
      tools: tools(ran),
      advanced: { hooks: [{ id: 'lint', type: 'PostToolUse', command: { command: `echo '{"decision": "block", "reason": "3 lint errors in src/a.ts"}'` } }] },
    })
    expect(ran).toEqual(['npm test'])
    expect(toolMessages(sent[1]!)).toEqual(['ran npm test\n\n3 lint errors in src/a.ts'])
  })

  it('PostToolUse continue: false keeps the result and ends the run after the turn with the stopReason', async () => {
    const ran: string[] = []
    let modelCalls = 0
    const result = await prompt('go', {
      model: scriptedModel(() => (modelCalls++ === 0 ? { toolCalls: [{ id: 'a', name: 'Bash', input: { command: 'make release' } }] } : { text: 'never' })),
      tools: tools(ran),
      advanced: { hooks: [{ id: 'budget', type: 'PostToolUse', command: { command: `echo '{"continue": false, "stopReason": "Release built; a person takes it from here"}'` } }] },
    })
    expect(ran).toEqual(['make release'])
    expect(modelCalls).toBe(1)
    expect(result).toMatchObject({ stopReason: 'interrupted', content: 'Release built; a person takes it from here' })
    expect(result.toolCalls.map((call) => call.output)).toEqual(['ran make release'])
  })

  it("PostToolUse updatedToolOutput replaces what the model reads (a redacting hook)", async () => {
    const sent: ScriptRequest[] = []
    await prompt('go', {
      model: model([{ name: 'Bash', input: { command: 'cat .env' } }], sent),
      tools: tools([]),
      advanced: {
        hooks: [
          {
            id: 'redact',
            type: 'PostToolUse',
            command: { command: `jq -c '{hookSpecificOutput: {hookEventName: "PostToolUse", updatedToolOutput: (.tool_response | gsub("cat .env"; "[redacted]"))}}'` },
          },
        ],
      },
    })
    expect(toolMessages(sent[1]!)).toEqual(['ran [redacted]'])
  })

  it("UserPromptSubmit: exit 2 rejects the prompt with stderr; plain stdout goes with the prompt to the model", async () => {
    const sent: ScriptRequest[] = []
    const blocked = await createAgent({
      model: scriptedModel([]),
      advanced: { hooks: [{ id: 'secrets', type: 'UserPromptSubmit', command: { command: 'grep -q "sk-" && { echo "The prompt holds an API key" >&2; exit 2; }; exit 0' } }] },
    })
    await expect((await blocked.send('my key is sk-123')).text()).rejects.toMatchObject({ message: 'The prompt holds an API key' })
    const agent = await createAgent({
      model: scriptedModel((request) => (sent.push(request), { text: 'ok' })),
      advanced: { hooks: [{ id: 'date', type: 'UserPromptSubmit', command: { command: 'echo "Today is 2026-12-03."' } }] },
    })
    await (await agent.send('what day is it?')).text()
    expect(sent[0]!.messages.at(-1)).toEqual({ role: 'user', content: 'what day is it?\n\nToday is 2026-12-03.' })
  })

  it("Stop's decision: block gives the model another turn with the reason; the next Stop says stop_hook_active", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'command-hook-'))
    const log = join(dir, 'stops.log')
    const sent: ScriptRequest[] = []
    const result = await prompt('fix the bug', {
      model: scriptedModel((request) => (sent.push(request), { text: request.turn === 1 ? 'fixed, I think' : 'tests pass now' })),
      advanced: {
        hooks: loadClaudeHooks({
          hooks: {
            Stop: [
              {
                hooks: [
                  {
                    type: 'command',
                    // A "make sure the tests ran" guard in the shape Claude Code's docs give it.
                    command: `jq -c '{stop_hook_active, last_assistant_message}' >> ${log}; grep -q '"stop_hook_active":true' ${log} && exit 0; echo '{"decision": "block", "reason": "Run the tests before you stop."}'`,
                  },
                ],
              },
            ],
          },
        }),
      },
    })
    expect(result).toMatchObject({ content: 'tests pass now', stopReason: 'done' })
    expect(sent.map((request) => request.messages.at(-1))).toEqual([
      { role: 'user', content: 'fix the bug' },
      { role: 'user', content: 'Run the tests before you stop.' },
    ])
    expect(readFileSync(log, 'utf8').trim().split('\n').map((line) => JSON.parse(line))).toEqual([
      { stop_hook_active: false, last_assistant_message: 'fixed, I think' },
      { stop_hook_active: true, last_assistant_message: 'tests pass now' },
    ])
  })

  it("SessionStart's output goes to the model before the session's first prompt, once", async () => {
    const sent: ScriptRequest[] = []
    const agent = await createAgent({
      model: scriptedModel((request) => (sent.push(request), { text: 'ok' })),
      advanced: { hooks: [{ id: 'primer', type: 'SessionStart', command: { command: `echo 'Project rules: search with rg.'` } }] },
    })
    await (await agent.send('hello')).text()
    await (await agent.send('again')).text()
    expect(sent.map((request) => request.messages.at(-1))).toEqual([
      { role: 'user', content: 'Project rules: search with rg.\n\nhello' },
      { role: 'user', content: 'again' },
    ])
  })

  it('a notification event never fails for its hook', async () => {
    const result = await prompt('hi', {
      model: scriptedModel([{ text: 'hello' }]),
      advanced: { hooks: [{ id: 'notify', type: 'SessionStart', command: { command: 'exit 1' } }] },
    })
    expect(result.content).toBe('hello')
  })
})

describe('configuration', () => {
  it('a program that does not exist, a bad timeout or a bad onFailure is a ConfigError naming the hook', async () => {
    const cases: Array<[unknown, string]> = [
      [{ id: 'g', type: 'PreToolUse', command: { command: 'no-such-guard --strict' } }, 'advanced.hooks[0] (hook "g").command.command names a program that does not exist: "no-such-guard" (not a file, nor found on PATH)'],
      [{ id: 'g', type: 'PreToolUse', command: { command: 'true', timeoutMs: 0 } }, 'advanced.hooks[0] (hook "g").command.timeoutMs must be a positive integer no greater than 2147483647 (got 0)'],
      [{ id: 'g', type: 'PreToolUse', command: { command: 'true' }, onFailure: 'ignore' }, `advanced.hooks[0] (hook "g").onFailure must be 'block' or 'continue' (got "ignore")`],
    ]
    for (const [hook, message] of cases) {
      const error = await createAgent({ model: scriptedModel([]), advanced: { hooks: [hook as AgentHook] } }).catch((e) => e)
      expect(error).toBeInstanceOf(ConfigError)
      expect(error.message).toBe(message)
    }
  })
})

describe('loadClaudeHooks', () => {
  it("reads a settings file's hooks with Claude Code's matcher meaning: Bash is not BashOutput", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'claude-settings-'))
    const settings = join(dir, 'settings.json')
    const log = join(dir, 'calls.log')
    writeFileSync(
      settings,
      JSON.stringify({
        permissions: { allow: ['Bash(ls)'] },
        hooks: {
          PreToolUse: [{ matcher: 'Bash', hooks: [{ type: 'command', command: `jq -r .tool_name >> ${log}`, timeout: 10 }] }],
          Stop: [{ hooks: [{ type: 'command', command: `echo stop >> ${log}` }] }],
        },
      }),
    )
    const hooks = loadClaudeHooks(settings)
    expect(hooks).toEqual([
      { id: 'claude:hooks.PreToolUse[0].hooks[0]', type: 'PreToolUse', matcher: '^(?:Bash)$', command: { command: `jq -r .tool_name >> ${log}`, timeoutMs: 10000 } },
      { id: 'claude:hooks.Stop[0].hooks[0]', type: 'TaskCompleted', command: { command: `echo stop >> ${log}` } },
    ])
    await prompt('go', {
      model: model([{ name: 'Bash', input: { command: 'ls' } }, { name: 'BashOutput', input: {} }]),
      tools: tools([]),
      advanced: { hooks },
    })
    expect(readFileSync(log, 'utf8')).toBe('Bash\nstop\n')
  })

  it('names the entry that is wrong, and leaves out what cannot run here only when asked', () => {
    expect(() => loadClaudeHooks({ hooks: { PreToolUse: [{ hooks: [{ type: 'command', command: 'true', timeout: -1 }] }] } })).toThrow(
      new ConfigError('hooks.PreToolUse[0].hooks[0].timeout must be a positive number of seconds (got -1)'),
    )
    const dir = mkdtempSync(join(tmpdir(), 'claude-settings-'))
    writeFileSync(join(dir, 'broken.json'), '{ "hooks": ')
    expect(() => loadClaudeHooks(join(dir, 'broken.json'))).toThrow(ConfigError)
    const notification = { hooks: { Notification: [{ hooks: [{ type: 'command', command: 'true' }] }], PreToolUse: [{ hooks: [{ type: 'command', command: 'true' }] }] } }
    expect(() => loadClaudeHooks(notification)).toThrow("hooks.Notification is a Claude Code event this runtime does not fire; pass { unsupported: 'skip' } to leave its hooks out")
    expect(loadClaudeHooks(notification, { unsupported: 'skip' }).map((hook) => hook.id)).toEqual(['claude:hooks.PreToolUse[0].hooks[0]'])
  })
})

describe('hooks you can list and decisions you can watch', () => {
  it('agent.hooks() lists every registration per event in dispatch order, environment hooks last', async () => {
    const saved = { ...process.env }
    process.env.AGENT_HOOK_WEBHOOK_URL = 'http://127.0.0.1:9/hooks'
    process.env.AGENT_HOOK_WEBHOOK_TOKEN = 'token'
    process.env.AGENT_HOOK_WEBHOOK_EVENTS = 'beforeToolCall'
    try {
      const agent = await createAgent({
        model: scriptedModel([]),
        advanced: {
          hookTimeoutMs: 5_000,
          hooks: {
            afterStep: [{ id: 'steps', webhook: { url: 'http://127.0.0.1:9/steps', timeout: 2 } }],
            beforeToolCall: [
              async () => ({ action: 'continue' }),
              { id: 'grep-guard', matcher: '^Bash$', command: { command: 'true', timeoutMs: 10_000 } },
              { id: 'lenient', handler: () => undefined, onFailure: 'continue' },
            ],
            SessionStart: [{ id: 'hello', command: { command: 'true' } }],
          },
        },
      })
      expect(agent.hooks()).toEqual([
        { id: 'advanced.hooks.beforeToolCall[0]', event: 'PreToolUse', kind: 'callback', matcher: null, timeoutMs: 5000, onFailure: 'block' },
        { id: 'grep-guard', event: 'PreToolUse', kind: 'command', matcher: '^Bash$', timeoutMs: 10000, onFailure: 'block' },
        { id: 'lenient', event: 'PreToolUse', kind: 'handler', matcher: null, timeoutMs: 5000, onFailure: 'continue' },
        { id: 'env-webhook:beforeToolCall', event: 'PreToolUse', kind: 'environment', matcher: null, timeoutMs: 30000, onFailure: 'continue' },
        { id: 'hello', event: 'SessionStart', kind: 'command', matcher: null, timeoutMs: 600000, onFailure: 'continue' },
        { id: 'steps', event: 'StepEnd', kind: 'webhook', matcher: null, timeoutMs: 2000, onFailure: 'continue' },
      ])
    } finally {
      process.env = saved
    }
  })

  it("includeHookEvents puts each hook's start and end, with its decision, in the stream", async () => {
    const agent = await createAgent({
      model: model([{ name: 'Bash', input: { command: 'rm -rf /' } }]),
      tools: tools([]),
      advanced: {
        includeHookEvents: true,
        hooks: [
          { id: 'guard', type: 'PreToolUse', command: { command: 'echo "no" >&2; exit 2' } },
          // The blocked call failed: its post hook is PostToolUseFailure's.
          { id: 'slow', type: 'PostToolUseFailure', onFailure: 'continue', command: { command: 'sleep 5', timeoutMs: 100 } },
        ],
      },
    })
    const seen: Array<StreamEvent | HookStreamEvent> = []
    for await (const event of (await agent.send('go')).stream()) seen.push(event)
    const hookEvents = seen.filter((event): event is HookStreamEvent => event.type === 'hook_started' || event.type === 'hook_response')
    expect(hookEvents.map(({ sessionId, ...event }) => ('durationMs' in event ? { ...event, durationMs: typeof event.durationMs } : event))).toEqual([
      { type: 'hook_started', hookId: 'guard', event: 'PreToolUse' },
      { type: 'hook_response', hookId: 'guard', event: 'PreToolUse', outcome: 'success', decision: 'deny', durationMs: 'number' },
      { type: 'hook_started', hookId: 'slow', event: 'PostToolUseFailure' },
      { type: 'hook_response', hookId: 'slow', event: 'PostToolUseFailure', outcome: 'timeout', durationMs: 'number' },
    ])
    // Off by default.
    const quiet = await createAgent({ model: scriptedModel([{ text: 'hi' }]), advanced: { hooks: [{ id: 'hello', type: 'UserPromptSubmit', command: { command: 'true' } }] } })
    const types: string[] = []
    for await (const event of (await quiet.send('go')).stream()) types.push(event.type)
    expect(types.filter((type) => type.startsWith('hook_'))).toEqual([])
  })
})

describe("HTTP hooks (Claude Code's kind)", () => {
  /** A server on 127.0.0.1 that answers each POST with `answer(body)` and keeps what it was sent. */
  async function hookServer(answer: (body: any) => { status: number; body: string }) {
    const received: Array<{ headers: IncomingMessage['headers']; body: any }> = []
    const server = createServer((request, response) => {
      let text = ''
      request.on('data', (chunk) => (text += chunk))
      request.on('end', () => {
        const body = JSON.parse(text)
        received.push({ headers: request.headers, body })
        const { status, body: reply } = answer(body)
        response.writeHead(status, { 'content-type': 'application/json', connection: 'close' }).end(reply)
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
    const close = () => {
      server.closeAllConnections()
      return new Promise((resolve) => server.close(resolve))
    }
    return { url, received, close }
  }

  it("posts the input as JSON and reads the answer as a command hook's stdout (a bare hookSpecificOutput decides)", async () => {
    const server = await hookServer((body) =>
      body.tool_input.command.startsWith('rm')
        ? { status: 200, body: JSON.stringify({ hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'deny', permissionDecisionReason: 'not on this host' } }) }
        : { status: 200, body: '{}' },
    )
    process.env.POLICY_TOKEN = 'secret-1'
    try {
      const ran: string[] = []
      const sent: ScriptRequest[] = []
      await prompt('go', {
        model: model([{ name: 'Bash', input: { command: 'rm -rf /tmp/x' } }, { name: 'Bash', input: { command: 'ls' } }], sent),
        tools: tools(ran),
        advanced: { hooks: [{ id: 'policy', type: 'PreToolUse', http: { url: server.url, headers: { Authorization: 'Bearer ${POLICY_TOKEN}' }, allowedEnvVars: ['POLICY_TOKEN'] } }] },
      })
      expect(ran).toEqual(['ls'])
      expect(toolMessages(sent[1]!)).toEqual(['Tool execution aborted: not on this host', 'ran ls'])
      expect(server.received.map((request) => [request.headers['content-type'], request.headers.authorization, request.body.hook_event_name, request.body.tool_name])).toEqual([
        ['application/json', 'Bearer secret-1', 'PreToolUse', 'Bash'],
        ['application/json', 'Bearer secret-1', 'PreToolUse', 'Bash'],
      ])
    } finally {
      delete process.env.POLICY_TOKEN
      await server.close()
    }
  })

  it('another status or no server blocks a gating event; onFailure continue lets it through', async () => {
    const server = await hookServer(() => ({ status: 503, body: 'down' }))
    try {
      const ran: string[] = []
      const sent: ScriptRequest[] = []
      await prompt('go', {
        model: model([{ name: 'Bash', input: { command: 'ls' } }], sent),
        tools: tools(ran),
        advanced: { hooks: [{ id: 'policy', type: 'PreToolUse', http: { url: server.url } }] },
      })
      expect(ran).toEqual([])
      expect(toolMessages(sent[1]!)).toEqual(['Tool execution aborted: Hook "policy" failed: answered HTTP 503'])
      await prompt('go', {
        model: model([{ name: 'Bash', input: { command: 'ls' } }]),
        tools: tools(ran),
        advanced: { hooks: [{ id: 'policy', type: 'PreToolUse', onFailure: 'continue', http: { url: 'http://127.0.0.1:9/down' } }] },
      })
      expect(ran).toEqual(['ls'])
    } finally {
      await server.close()
    }
  })
})
