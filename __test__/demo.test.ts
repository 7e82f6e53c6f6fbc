// `npm run demo` as a newcomer runs it, without a key and with stdout not a terminal: every kind
// of hook decides, each decision is printed, and the run ends well inside ten seconds.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { childEnv } from './helpers/child'

const demo = resolve(__dirname, '..', 'examples', 'demo.mjs')

interface Run {
  code: number | null
  stdout: string
  stderr: string
  ms: number
}

function runDemo(): Promise<Run> {
  const env = childEnv()
  // No key: the scripted model. No environment webhooks: only the demo's own hooks decide.
  for (const name of Object.keys(env)) if (name.startsWith('OPENAI_') || name.startsWith('AGENT_HOOK_WEBHOOK_')) delete env[name]
  const started = Date.now()
  return new Promise((done) => {
    execFile(process.execPath, [demo], { env, timeout: 10_000 }, (error, stdout, stderr) => {
      done({ code: error ? ((error as any).code ?? null) : 0, stdout, stderr, ms: Date.now() - started })
    })
  })
}

/** The output with every measured time replaced by `<t>` (the only part that varies). */
const steady = (text: string) => text.replace(/\d+(\.\d+)? (µs|ms|s)\]/g, '<t>]')

let run: Run
let lines: string[]
beforeAll(async () => {
  run = await runDemo()
  lines = steady(run.stdout).split('\n')
}, 15_000)

describe('npm run demo (scripted, not a terminal)', () => {
  it('exits 0 within 10 s, with nothing on stderr', () => {
    expect(run.stderr).toBe('')
    expect(run.code).toBe(0)
    expect(run.ms).toBeLessThan(10_000)
    expect(lines[0]).toBe('agent-runtime-hooks demo · scripted model (no key, no network) · policy server on 127.0.0.1')
  })

  it('prints every decision, who took it and how long it took, in order', () => {
    expect(lines.filter((line) => line.startsWith('  ⚑ '))).toEqual([
      '  ⚑ UserPromptSubmit tenant-prefix (JS): rewrote the prompt: put "[tenant:acme]" in front  [<t>]',
      '  ⚑ PreToolUse       checkout-guard (JS): blocked shell {"command":"git clean -fdx"}  [<t>]',
      '  ⚑ beforeToolCall   policy-server (webhook): denied shell {"command":"rm -rf /tmp/release-cache"} (Policy: "rm -rf /tmp/release-cache" is not allowed)  [<t>]',
      '  ⚑ beforeToolCall   policy-server (webhook): allowed shell {"command":"du -sh src"}  [<t>]',
      '  ⚑ PostToolUse      redact-secrets (JS): rewrote the output of read_file {"path":"release/.npmrc"}: "//registry.npmjs.org/:_authToken=***"  [<t>]',
      '  ⚑ PreToolUse       registry-fixture (JS): answered registry_lookup {"package":"agent-runtime-hooks"} with mock(); the tool did not run  [<t>]',
      '  ⚑ permission       permission(): asks before write_file ["release/RELEASE_NOTES.md"] (kind write)  [<t>]',
      '  ⚑ confirmation     confirmationHandler: approved write_file ["release/RELEASE_NOTES.md"] automatically (stdout is not a terminal)  [<t>]',
    ])
  })

  it('shows the model receiving the rewritten prompt', () => {
    expect(lines).toContain('  model received: "[tenant:acme] Get this project ready for a release: tidy the checkout, check the version and th…"')
    expect(lines).toContain('  assistant: My prompt starts with [tenant:acme], so I work for tenant acme. First, a clean checkout.')
  })

  it('blocks the destructive command, and the model reads the denial', () => {
    expect(lines).toContain('  ← shell error: Tool execution aborted: Blocked: git clean -fdx would throw away work in this checkout')
    expect(lines).toContain(
      '  assistant: The shell answered: Tool execution aborted: Blocked: git clean -fdx would throw away work in this checkout. So I only clear the old release cache.',
    )
  })

  it('lets the policy server deny one shell command and allow another', () => {
    expect(lines).toContain('  ← shell error: Policy: "rm -rf /tmp/release-cache" is not allowed')
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}← shell success: \d+(\.\d+)?[BKM]\tsrc$/))
  })

  it('redacts the token before the model sees it', () => {
    expect(lines).toContain('  ← read_file success: registry=https://registry.npmjs.org/ | //registry.npmjs.org/:_authToken=*** | access=public')
    expect(run.stdout).not.toMatch(/npm_d3m0T0k3n/)
    expect(lines).toContainEqual(expect.stringMatching(/the token line I got reads "\/\/registry\.npmjs\.org\/:_authToken=\*\*\*"\.$/))
  })

  it('answers the network tool with mock() without running it, and writes only after the confirmation', () => {
    expect(lines).toContain('  ← registry_lookup success: {"name":"agent-runtime-hooks","dist-tags":{"latest":"0.1.0-rc.1"},"source":"fixture"}')
    expect(lines).toContainEqual(expect.stringMatching(/^ {2}← write_file success: wrote \d+ bytes to release\/RELEASE_NOTES\.md$/))
    expect(lines).toContain('── done: 6 model turns, 7 tool calls, stop reason done')
    expect(lines).toContain('tools that really ran: shell 1×, read_file 2×, registry_lookup 0×, write_file 1× (blocked, denied and mocked calls never reach a tool)')
  })

  it('ends with the summary table: per event, callbacks run, decisions, median µs per dispatch', () => {
    const start = lines.indexOf('Summary (µs: inside the JS callbacks of one dispatch; for the webhook, at the policy server)')
    expect(start).toBeGreaterThan(0)
    const table = lines.slice(start + 1, start + 8).map((line) => line.trim().split(/ {2,}/))
    expect(table).toEqual([
      ['event', 'who', 'callbacks run', 'decisions', 'median µs/dispatch'],
      ['UserPromptSubmit', 'tenant-prefix', '1', '1', expect.stringMatching(/^\d+$/)],
      ['PreToolUse', 'checkout-guard, registry-fixture', '4', '2', expect.stringMatching(/^\d+$/)],
      ['permission', 'permission()', '5', '1', expect.stringMatching(/^\d+$/)],
      ['confirmation', 'confirmationHandler', '1', '1', expect.stringMatching(/^\d+$/)],
      ['beforeToolCall', 'policy-server', '2', '2', expect.stringMatching(/^\d+$/)],
      ['PostToolUse', 'redact-secrets', '5', '1', expect.stringMatching(/^\d+$/)],
    ])
  })
})
