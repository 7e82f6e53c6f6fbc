// Once every agent is closed, nothing of the library is left open: the process exits by itself,
// and `jest --detectOpenHandles` finds nothing to report (SPEC §8.3: nothing the library holds
// keeps a Node process alive once its agents are closed and no run is in flight).
//
// Each check runs in a fresh child `node` process: the addon and anything it creates once per
// process are shared by every test file of a Jest worker, so only a new process sees the
// library's handles from their creation on.
const { execFile } = require('node:child_process')
const { resolve } = require('node:path')
// Loaded here as in every Jest test of the package; the checks themselves run in children.
const { createAgent, scriptedModel } = require('../../index.js')

const entry = resolve(__dirname, '..', '..', 'index.js')

/** Runs `source` in a child node; resolves how it ended and what it printed. */
function runChild(source, { timeoutMs = 5000, args = [] } = {}) {
  return new Promise((done) => {
    const started = Date.now()
    const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')))
    execFile(process.execPath, [...args, '-e', source], { timeout: timeoutMs, env: { ...env, ENTRY: entry } }, (error, stdout, stderr) => {
      const timedOut = Boolean(error && error.killed)
      done({ code: error ? (error.code ?? null) : 0, signal: error ? error.signal : null, stdout, stderr, timedOut, ms: Date.now() - started })
    })
  })
}

// What the child does with the library: several agents, a hook of each kind crossing into JS, a
// permission function, a finished run, an aborted run, an agent never used, a one-shot prompt;
// then every agent is closed. It never calls process.exit.
const workload = `
const { createAgent, defineTool, prompt, scriptedModel } = require(process.env.ENTRY)
async function workload() {
  const echo = defineTool({ name: 'echo', execute: (input) => 'echo:' + input.text })
  const hang = defineTool({ name: 'hang', execute: (_input, { signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))) })
  const agent = await createAgent({
    model: scriptedModel([{ toolCalls: [{ name: 'echo', input: { text: 'a' } }] }, { text: 'done' }, { toolCalls: [{ name: 'hang', input: {} }] }]),
    tools: [echo, hang],
    advanced: {
      hooks: { PreToolUse: [() => ({ action: 'continue' })], SessionEnd: [() => ({ action: 'continue' })], afterStep: [{ id: 'step', handler: () => {} }] },
      permission: () => 'allow',
      logger: () => {},
    },
  })
  if ((await (await agent.send('go')).text()) !== 'done') throw new Error('unexpected answer')
  const aborted = await agent.send('again')
  await new Promise((resolve) => setTimeout(resolve, 20))
  agent.abort(new Error('stop'))
  await aborted.text().catch(() => {})
  await agent.close()
  const unused = await createAgent({ model: scriptedModel([{ text: 'x' }]) })
  await unused.close()
  await prompt('go', { model: scriptedModel([{ text: 'one shot' }]) })
}
`

test('a process whose agents are all closed exits by itself', async () => {
  const child = await runChild(`${workload}
workload().then(() => console.log('closed'), (error) => { console.error(error); process.exitCode = 1 })
`)
  expect(child.stderr).toBe('')
  expect(child.stdout.trim()).toBe('closed')
  expect(child.timedOut).toBe(false)
  expect(child.code).toBe(0)
})

test('after every agent closed, no active resource of the library is left (process.getActiveResourcesInfo)', async () => {
  const child = await runChild(`${workload}
const before = process.getActiveResourcesInfo()
workload().then(async () => {
  await new Promise((resolve) => setImmediate(resolve))
  const after = process.getActiveResourcesInfo()
  // What is active now that was not before the library was used.
  const extra = [...after]
  for (const kind of before) {
    const at = extra.indexOf(kind)
    if (at >= 0) extra.splice(at, 1)
  }
  console.log(JSON.stringify(extra))
}, (error) => { console.error(error); process.exitCode = 1 })
`)
  expect(child.stderr).toBe('')
  expect(child.timedOut).toBe(false)
  expect(JSON.parse(child.stdout)).toEqual([])
})

test('after every agent closed, no napi_rs_threadsafe_function (or other handle) is left open, as jest --detectOpenHandles sees it', async () => {
  // The child follows Jest's own collectHandles (@jest/core): it records every async resource
  // created while the library is used, except the types Jest ignores; a resource counts as open
  // until its destroy hook runs, unless it has a hasRef() that says false. Before looking, it
  // waits and collects garbage as Jest does.
  const child = await runChild(
    `
const asyncHooks = require('node:async_hooks')
const ignored = ['PROMISE', 'TIMERWRAP', 'ELDHISTOGRAM', 'PerformanceObserver', 'RANDOMBYTESREQUEST', 'DNSCHANNEL', 'ZLIB', 'SIGNREQUEST', 'TLSWRAP', 'TCPWRAP', 'CustomGC']
const live = new Map()
const hook = asyncHooks.createHook({
  init(asyncId, type, _trigger, resource) {
    if (ignored.includes(type)) return
    const ref = 'hasRef' in resource ? new WeakRef(resource) : null
    live.set(asyncId, { type, isActive: ref ? () => ref.deref()?.hasRef() ?? false : () => true })
  },
  destroy(asyncId) {
    live.delete(asyncId)
  },
})
${workload}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
hook.enable()
workload().then(async () => {
  await sleep(0)
  await sleep(30)
  globalThis.gc()
  await sleep(0)
  globalThis.gc()
  await sleep(30)
  hook.disable()
  // Timers and ticks of this very script are still pending here; they are not the library's.
  const open = [...live.values()].filter((handle) => handle.isActive() && !['Timeout', 'TickObject', 'Immediate'].includes(handle.type)).map((handle) => handle.type)
  console.log(JSON.stringify(open))
}, (error) => { console.error(error); process.exitCode = 1 })
`,
    { args: ['--expose-gc'] },
  )
  expect(child.stderr).toBe('')
  expect(child.timedOut).toBe(false)
  expect(JSON.parse(child.stdout)).toEqual([])
})

test('in this process: an agent created, run and closed here leaves no napi_rs_threadsafe_function open', async () => {
  // The same look as above, inside Jest. It only sees what the library creates from now on (a
  // handle made once per process may already exist if another test file ran first in this
  // worker), so the child above is the reliable check; this one is what Jest itself would see.
  const asyncHooks = require('node:async_hooks')
  const live = new Map()
  const hook = asyncHooks.createHook({
    init(asyncId, type, _trigger, resource) {
      if (type !== 'napi_rs_threadsafe_function') return
      const ref = 'hasRef' in resource ? new WeakRef(resource) : null
      live.set(asyncId, ref ? () => ref.deref()?.hasRef() ?? false : () => true)
    },
    destroy(asyncId) {
      live.delete(asyncId)
    },
  })
  hook.enable()
  try {
    const agent = await createAgent({ model: scriptedModel([{ text: 'fine' }]), advanced: { hooks: { UserPromptSubmit: [() => ({ action: 'continue' })] } } })
    expect(await (await agent.send('go')).text()).toBe('fine')
    await agent.close()
    expect(agent.isClosed).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 30))
    require('node:v8').setFlagsFromString('--expose-gc')
    require('node:vm').runInNewContext('gc')()
    await new Promise((resolve) => setTimeout(resolve, 30))
  } finally {
    hook.disable()
  }
  expect([...live.values()].filter((isActive) => isActive())).toHaveLength(0)
})
