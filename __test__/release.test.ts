// The release, rehearsed against a real registry: verdaccio on 127.0.0.1 (no uplinks, so nothing
// reaches a public registry) takes both packages the way a maintainer publishes them — `npm
// publish` of the package, whose `prepublishOnly` (`napi prepublish -t npm`) adds the platform
// package as an optional dependency and publishes it — and a new project then installs the
// main package alone and runs a hooked agent from it. Only this machine's platform package has
// a binary here, so the rehearsal's copy lists only its target (docs/releasing.md).
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = resolve(__dirname, '..')
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
const platform = 'linux-x64-gnu'
const binary = `${manifest.napi.binaryName}.${platform}.node`
const version = `${manifest.version}-release-test.${Date.now()}`
const onThisPlatform = process.platform === 'linux' && process.arch === 'x64'

let work: string
let registry: string
let verdaccio: ChildProcess | undefined
let log = ''

interface Ran {
  code: number | null
  stdout: string
  stderr: string
}

/** Runs a command with npm's user config and cache inside the scratch directory. */
function run(command: string, args: string[], cwd: string, userconfig: string): Promise<Ran> {
  const env: NodeJS.ProcessEnv = { ...process.env, npm_config_userconfig: userconfig, npm_config_cache: join(work, 'cache'), npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_audit: 'false' }
  for (const name of Object.keys(env)) if (name.startsWith('npm_') && !['npm_config_userconfig', 'npm_config_cache', 'npm_config_update_notifier', 'npm_config_fund', 'npm_config_audit'].includes(name)) delete env[name]
  for (const name of ['VITEST', 'VITEST_POOL_ID', 'VITEST_WORKER_ID', 'NODE_OPTIONS']) delete env[name]
  return new Promise((done) => {
    execFile(command, args, { cwd, env, timeout: 240_000, maxBuffer: 64 * 2 ** 20 }, (error, stdout, stderr) => {
      done({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, stdout, stderr })
    })
  })
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer()
    server.once('error', fail)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => done(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

async function waitForRegistry(url: string): Promise<void> {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (verdaccio?.exitCode != null) throw new Error(`verdaccio exited (${verdaccio.exitCode}):\n${log}`)
    try {
      if ((await fetch(`${url}-/ping`)).ok) return
    } catch {
      // not listening yet
    }
    await new Promise((wake) => setTimeout(wake, 200))
  }
  throw new Error(`verdaccio did not answer at ${url} within 60 s:\n${log}`)
}

/** A maintainer's account on the registry: its token goes in the publishing user config. */
async function publisherConfig(): Promise<string> {
  const answer = await fetch(`${registry}-/user/org.couchdb.user:maintainer`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'maintainer', password: 'release-rehearsal' }),
  })
  const body = (await answer.json()) as { token?: string }
  if (!answer.ok || !body.token) throw new Error(`could not create the registry account: ${answer.status} ${JSON.stringify(body)}`)
  const file = join(work, 'publisher.npmrc')
  writeFileSync(file, `registry=${registry}\n${registry.replace(/^http:/, '')}:_authToken=${body.token}\n`)
  return file
}

/** The package as a maintainer's clean checkout holds it at release: what `npm pack` ships, plus
 * `npm/` with this platform's binary, at the rehearsal's version, committed to git. */
async function releaseCheckout(): Promise<string> {
  const packed = await run('npm', ['pack', '--pack-destination', work, '--silent'], root, join(work, 'none.npmrc'))
  if (packed.code !== 0) throw new Error(`npm pack failed:\n${packed.stderr}`)
  const checkout = join(work, 'checkout')
  mkdirSync(checkout)
  const untar = await run('tar', ['xzf', join(work, packed.stdout.trim().split('\n').pop()!), '-C', checkout, '--strip-components', '1'], work, join(work, 'none.npmrc'))
  if (untar.code !== 0) throw new Error(`tar failed:\n${untar.stderr}`)
  cpSync(join(root, 'npm', platform), join(checkout, 'npm', platform), { recursive: true })
  const built = join(checkout, 'npm', platform, binary)
  cpSync(join(root, binary), built)
  // A debug build carries hundreds of MB of debug info; the release build does not.
  await run('strip', ['--strip-debug', built], checkout, join(work, 'none.npmrc'))
  const main = JSON.parse(readFileSync(join(checkout, 'package.json'), 'utf8'))
  main.version = version
  main.napi.targets = ['x86_64-unknown-linux-gnu']
  writeFileSync(join(checkout, 'package.json'), `${JSON.stringify(main, null, 2)}\n`)
  const platformManifest = join(checkout, 'npm', platform, 'package.json')
  writeFileSync(platformManifest, `${JSON.stringify({ ...JSON.parse(readFileSync(platformManifest, 'utf8')), version }, null, 2)}\n`)
  // `napi` comes from the checkout's devDependencies; napi prepublish reads git.
  symlinkSync(join(root, 'node_modules'), join(checkout, 'node_modules'), 'dir')
  writeFileSync(join(checkout, '.gitignore'), 'node_modules\n')
  const git = ['-c', 'user.name=maintainer', '-c', 'user.email=maintainer@example.invalid']
  for (const args of [['init', '-q'], ['add', '-A'], [...git, 'commit', '-qm', `v${version}`]]) {
    const done = await run('git', args, checkout, join(work, 'none.npmrc'))
    if (done.code !== 0) throw new Error(`git ${args.join(' ')} failed:\n${done.stderr}`)
  }
  return checkout
}

beforeAll(async () => {
  if (!onThisPlatform) return
  work = mkdtempSync(join(tmpdir(), 'arh-release-'))
  writeFileSync(join(work, 'none.npmrc'), '')
  const port = await freePort()
  registry = `http://127.0.0.1:${port}/`
  writeFileSync(
    join(work, 'verdaccio.yaml'),
    [
      `storage: ${join(work, 'storage')}`,
      'auth:',
      '  htpasswd:',
      `    file: ${join(work, 'htpasswd')}`,
      '    max_users: 10',
      'uplinks: {}',
      'packages:',
      "  '**':",
      '    access: $all',
      '    publish: $authenticated',
      'max_body_size: 1gb',
      'log: { type: stdout, format: pretty, level: warn }',
      '',
    ].join('\n'),
  )
  verdaccio = spawn(process.execPath, [join(root, 'node_modules', 'verdaccio', 'bin', 'verdaccio'), '--config', join(work, 'verdaccio.yaml'), '--listen', `127.0.0.1:${port}`], { stdio: ['ignore', 'pipe', 'pipe'] })
  verdaccio.stdout?.on('data', (chunk) => (log += chunk))
  verdaccio.stderr?.on('data', (chunk) => (log += chunk))
  await waitForRegistry(registry)
}, 90_000)

afterAll(() => {
  verdaccio?.kill()
  if (work) rmSync(work, { recursive: true, force: true })
})

describe.skipIf(!onThisPlatform)('the release, rehearsed on a local registry', () => {
  let published: Ran
  let installed: Ran
  let app: string

  it('npm publish runs napi prepublish, which publishes the platform package first, then the package', async () => {
    const checkout = await releaseCheckout()
    published = await run('npm', ['publish', '--tag', 'rehearsal'], checkout, await publisherConfig())
    expect(published.code, published.stderr).toBe(0)
    expect(published.stdout).toContain(`+ ${manifest.name}-${platform}@${version}`)
    expect(published.stdout).toContain(`+ ${manifest.name}@${version}`)
    const document = (await (await fetch(`${registry}${manifest.name}`)).json()) as { versions: Record<string, { optionalDependencies?: Record<string, string>; scripts?: Record<string, string> }> }
    const main = document.versions[version]!
    expect(main.optionalDependencies).toEqual({ [`${manifest.name}-${platform}`]: version })
    // Nothing runs when a user installs it.
    expect(Object.keys(main.scripts ?? {}).filter((name) => /^(pre|post)?install$|^prepare$/.test(name))).toEqual([])
  }, 240_000)

  it('a new project installs the package alone: the binary comes as its optional dependency, with no install-script warning', async () => {
    app = join(work, 'app')
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
    writeFileSync(join(work, 'user.npmrc'), `registry=${registry}\n`)
    installed = await run('npm', ['install', `${manifest.name}@${version}`], app, join(work, 'user.npmrc'))
    expect(installed.code, installed.stderr).toBe(0)
    expect(installed.stderr).not.toMatch(/install-scripts|npm warn|npm error/i)
    expect(readdirSync(join(app, 'node_modules')).filter((name) => !name.startsWith('.')).sort()).toEqual([manifest.name, `${manifest.name}-${platform}`].sort())
    const shipped = join(app, 'node_modules', manifest.name)
    expect(existsSync(join(shipped, binary))).toBe(false)
    expect(existsSync(join(app, 'node_modules', `${manifest.name}-${platform}`, binary))).toBe(true)
    // The README's links resolve in what was installed.
    for (const file of ['README.md', 'docs/hooks.md', 'docs/webhooks.md', 'examples/quickstart.ts', 'bench/RESULTS.md', 'index.d.ts']) expect(existsSync(join(shipped, file)), file).toBe(true)
  }, 240_000)

  it('a hooked agent runs from the installed package, as ES module and as CommonJS', async () => {
    writeFileSync(
      join(app, 'agent.mjs'),
      `import { createAgent, defineTool, scriptedModel } from '${manifest.name}'
const seen = []
const bash = defineTool({ name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }, execute: ({ command }) => 'ran ' + command })
const agent = await createAgent({
  model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'rm -rf /' } }] }, { toolCalls: [{ name: 'Bash', input: { command: 'ls' } }] }, { text: 'done' }]),
  tools: [bash],
  advanced: { hooks: { PreToolUse: [async ({ toolInput }) => (seen.push(toolInput.command), /rm -rf/.test(toolInput.command) ? { action: 'abort', reason: 'Blocked: ' + toolInput.command } : { action: 'continue' })] } },
})
const result = await (await agent.send('clean up')).result()
await agent.close()
console.log(JSON.stringify({ seen, outputs: result.toolCalls.map((call) => call.output), text: result.result }))
`,
    )
    const esm = await run(process.execPath, ['agent.mjs'], app, join(work, 'user.npmrc'))
    expect(esm.stderr).toBe('')
    expect(JSON.parse(esm.stdout)).toEqual({ seen: ['rm -rf /', 'ls'], outputs: ['Tool execution aborted: Blocked: rm -rf /', 'ran ls'], text: 'done' })
    writeFileSync(join(app, 'load.cjs'), `const { createAgent, HookEvent } = require('${manifest.name}')\nconsole.log(typeof createAgent, HookEvent.PreToolUse)\n`)
    const cjs = await run(process.execPath, ['load.cjs'], app, join(work, 'user.npmrc'))
    expect(cjs.stderr).toBe('')
    expect(cjs.stdout).toBe('function PreToolUse\n')
  }, 120_000)
})
