// The programs in examples/ run as a user would run them, so they cannot rot: each is copied into
// a project made as a user makes one (`"type": "module"`, the tsconfig.json `tsc --init` writes,
// with Node's types; the package, the test runners and zod in node_modules), compiled by tsc and
// run by node; the vitest and jest examples are run by vitest and jest (ts-jest, ES modules).
import { execFile } from 'node:child_process'
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = resolve(__dirname, '..')
const modules = join(root, 'node_modules')
let project: string

interface Ran {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs `args` with node in the project, with no model key or address in its environment. */
function node(args: string[], cwd = project, timeout = 120_000): Promise<Ran> {
  const env = { ...process.env }
  for (const name of ['OPENAI_API_KEY', 'OPENAI_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'VITEST', 'VITEST_POOL_ID', 'VITEST_WORKER_ID', 'NODE_OPTIONS']) delete env[name]
  return new Promise((done) => {
    execFile(process.execPath, args, { cwd, env, timeout, maxBuffer: 16 * 2 ** 20 }, (error, stdout, stderr) => {
      done({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr })
    })
  })
}

beforeAll(async () => {
  project = mkdtempSync(join(tmpdir(), 'arh-examples-'))
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'examples', private: true, type: 'module' }))
  const init = await node([join(modules, 'typescript', 'bin', 'tsc'), '--init'])
  expect(init.code).toBe(0)
  const config = readFileSync(join(project, 'tsconfig.json'), 'utf8')
  writeFileSync(join(project, 'tsconfig.json'), config.replace(/"types": \[\]/, '"types": ["node"]').replace('// "outDir": "./dist",', '"outDir": "./dist",'))
  mkdirSync(join(project, 'node_modules', '@types'), { recursive: true })
  symlinkSync(root, join(project, 'node_modules', 'agent-runtime-hooks'), 'dir')
  for (const name of ['@types/node', 'typescript', 'vitest', 'jest', 'ts-jest', '@jest', 'zod', '@modelcontextprotocol']) symlinkSync(join(modules, name), join(project, 'node_modules', name), 'dir')
  for (const file of ['quickstart.ts', 'hooks-tour.ts', 'approval-server.ts', 'policy-server.ts', 'mcp.ts']) cpSync(join(root, 'examples', file), join(project, file))
  cpSync(join(root, 'examples', 'vitest'), join(project, 'vitest'), { recursive: true })
  cpSync(join(root, 'examples', 'jest'), join(project, 'jest'), { recursive: true })
  // The jest example's own package.json names what a user installs; here node_modules is the project's.
  rmSync(join(project, 'jest', 'package.json'))
}, 120_000)
afterAll(() => rmSync(project, { recursive: true, force: true }))

describe('examples/', () => {
  it('compile in the tsc --init project', async () => {
    const built = await node([join(modules, 'typescript', 'bin', 'tsc'), '-p', '.', '--pretty', 'false'])
    expect(built.stdout + built.stderr).toBe('')
    expect(built.code).toBe(0)
  }, 120_000)

  it('quickstart.ts runs with no key: the scripted model lists the files', async () => {
    const ran = await node(['dist/quickstart.js'])
    expect(ran.stderr).toBe('')
    expect(ran.stdout).toContain("calling list_files { dir: '.' }")
    expect(ran.stdout).toContain('Two files.')
    expect(ran.stdout).toMatch(/\nhi done \d+\n$/)
    expect(ran.code).toBe(0)
  }, 60_000)

  it('hooks-tour.ts runs: the guard blocks rm -rf', async () => {
    const ran = await node(['dist/hooks-tour.js'])
    expect(ran.stdout).toBe('blocked it\n')
    expect(ran.code).toBe(0)
  }, 60_000)

  it('approval-server.ts: the deploy call pauses, a forged token is refused over HTTP, the real one runs it', async () => {
    const ran = await node(['dist/approval-server.js'])
    expect(ran.stderr).toBe('')
    expect(ran.stdout).toBe(
      [
        'run interrupted; waiting: deploy {"env":"prod"}',
        'forged token: 409 APPROVAL_TOKEN_INVALID',
        'approved: 200 {"stopReason":"done","text":"Deployed.","outputs":["deployed to prod"]}',
        '',
      ].join('\n'),
    )
    expect(ran.code).toBe(0)
  }, 60_000)

  it('policy-server.ts: the webhook allows ls and denies rm -rf /, and the call fails with its reason', async () => {
    const ran = await node(['dist/policy-server.js'])
    expect(ran.stderr).toBe('')
    expect(ran.stdout.split('\n').filter((line) => line.startsWith('policy:')).sort()).toEqual(['policy: Bash {"command":"ls"} -> allow', 'policy: Bash {"command":"rm -rf /"} -> deny'])
    expect(ran.stdout).toContain('{"command":"ls"}: ran ls\n')
    expect(ran.stdout).toContain('{"command":"rm -rf /"}: Policy: "rm -rf /" is not allowed\n')
    expect(ran.stdout).toMatch(/One ran, one was denied\.\n$/)
    expect(ran.code).toBe(0)
  }, 60_000)

  it('mcp.ts: the MCP server echoes, and the hook saw the call with its server', async () => {
    const ran = await node(['dist/mcp.js'])
    expect(ran.stdout).toBe(['many tools, echo among them: true', 'calling echo on everything (mcp)', 'result: Echo: hello over MCP', 'The server echoed it.', ''].join('\n'))
    expect(ran.code).toBe(0)
  }, 60_000)

  it('the vitest example passes under vitest', async () => {
    const ran = await node([join(modules, 'vitest', 'vitest.mjs'), 'run', '--root', 'vitest', '--reporter', 'json'], project, 120_000)
    const report = JSON.parse(ran.stdout.slice(ran.stdout.indexOf('{')))
    expect({ passed: report.numPassedTests, failed: report.numFailedTests }).toEqual({ passed: 2, failed: 0 })
  }, 150_000)

  it('the jest example passes under jest with ts-jest, as ES modules', async () => {
    const ran = await node(['--experimental-vm-modules', join(modules, 'jest', 'bin', 'jest.js'), '--config', 'jest/jest.config.js', '--json'], project, 120_000)
    const report = JSON.parse(ran.stdout.slice(ran.stdout.indexOf('{')))
    expect({ passed: report.numPassedTests, failed: report.numFailedTests }, ran.stderr).toEqual({ passed: 3, failed: 0 })
  }, 150_000)
})
