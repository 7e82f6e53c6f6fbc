// No stretch of user code outlives its deadline: a run whose every step answers synchronously
// (an endless generator tool, a scripted model with sync tools) still gives the event loop a
// turn now and then, so timers tick, `agent.abort()`, the caller's signal and `toolTimeoutMs`
// fire; a generator given up is finished with `return()` (its `finally` runs); a `summarize`
// that never settles fails the compaction at `advanced.compaction.timeoutMs`. Each scenario runs
// in a child process: before these rules a run could hold the loop for good, and a hung child is
// killed and reported instead of hanging the suite.
import { describe, expect, it } from 'vitest'
import { runScript } from './helpers/child.js'

/** Runs `body` (an async function body, with `arh`, `ticks()` and `report(value)`) in a child
 * and returns what it reported. A `setInterval` of 5 ms counts ticks from the start. */
async function inChild(body: string, timeoutMs = 8000): Promise<any> {
  const script = `
    const arh = require(process.env.ENTRY)
    let tickCount = 0
    const ticker = setInterval(() => tickCount++, 5)
    const ticks = () => tickCount
    const report = (value) => { clearInterval(ticker); console.log('REPORT ' + JSON.stringify(value)) }
    ;(async () => { ${body} })().catch((error) => report({ failed: String(error && error.stack || error) }))
  `
  const child = await runScript(script, { timeoutMs })
  expect(child.timedOut, `the child hung (killed after ${timeoutMs}ms); stderr: ${child.stderr}`).toBe(false)
  const line = child.stdout.split('\n').find((text) => text.startsWith('REPORT '))
  expect(line, `no report; stdout: ${child.stdout.slice(0, 500)} stderr: ${child.stderr.slice(0, 500)}`).toBeDefined()
  const reported = JSON.parse(line!.slice('REPORT '.length))
  expect(reported.failed).toBeUndefined()
  return reported
}

/** A tool whose sync generator yields forever, counting its yields and `finally` runs. */
const ENDLESS = `
  const counts = { yields: 0, finallies: 0 }
  const endless = {
    name: 'endless',
    execute: function* () {
      try {
        for (;;) {
          counts.yields++
          yield 'x'
        }
      } finally {
        counts.finallies++
      }
    },
  }
  const model = () => arh.scriptedModel([{ toolCalls: [{ id: 'c1', name: 'endless', input: {} }] }, { text: 'after' }])
`

describe('an endless synchronous generator tool', () => {
  it('times out at toolTimeoutMs with the timeout text while timers tick, and its finally runs once', async () => {
    const reported = await inChild(`
      ${ENDLESS}
      const agent = await arh.createAgent({ model: model(), tools: [endless], advanced: { toolTimeoutMs: 150 } })
      const started = Date.now()
      const result = await (await agent.send('go')).result()
      const elapsed = Date.now() - started
      const ticked = ticks()
      await agent.close()
      report({ output: result.toolCalls[0].output, content: result.content, ticked, elapsed, ...counts })
    `)
    expect(reported.output).toBe('Tool execution failed: Tool execution timeout after 150ms')
    expect(reported.content).toBe('after')
    expect(reported.finallies).toBe(1)
    expect(reported.yields).toBeGreaterThan(1)
    // The loop had turns while the generator ran: a 5 ms interval ticked many times in 150 ms.
    expect(reported.ticked).toBeGreaterThanOrEqual(5)
    expect(reported.elapsed).toBeLessThan(2000)
  })

  it('is stopped by agent.abort() from a timer; the response rejects with the reason and its finally runs once', async () => {
    const reported = await inChild(`
      ${ENDLESS}
      const agent = await arh.createAgent({ model: model(), tools: [endless] })
      const response = await agent.send('go')
      setTimeout(() => agent.abort(new Error('stop it')), 50)
      const outcome = await response.result().then(() => 'resolved', (error) => error.message)
      const ticked = ticks()
      await agent.close()
      report({ outcome, ticked, ...counts })
    `)
    expect(reported.outcome).toBe('stop it')
    expect(reported.finallies).toBe(1)
    expect(reported.ticked).toBeGreaterThanOrEqual(3)
  })

  it("is stopped by the caller's signal; the response rejects with the signal's reason and its finally runs once", async () => {
    const reported = await inChild(`
      ${ENDLESS}
      const agent = await arh.createAgent({ model: model(), tools: [endless] })
      const controller = new AbortController()
      const response = await agent.send('go', { signal: controller.signal })
      setTimeout(() => controller.abort(new Error('caller gave up')), 50)
      const outcome = await response.result().then(() => 'resolved', (error) => error.message)
      const ticked = ticks()
      await agent.close()
      report({ outcome, ticked, ...counts })
    `)
    expect(reported.outcome).toBe('caller gave up')
    expect(reported.finallies).toBe(1)
    expect(reported.ticked).toBeGreaterThanOrEqual(3)
  })

  it('an async generator waiting on a step at its timeout is finished once that step settles', async () => {
    const reported = await inChild(`
      const counts = { finallies: 0 }
      let release
      const slow = {
        name: 'slow',
        execute: async function* () {
          try {
            yield 'started'
            await new Promise((resolve) => (release = resolve))
            yield 'never seen'
          } finally {
            counts.finallies++
          }
        },
      }
      const agent = await arh.createAgent({
        model: arh.scriptedModel([{ toolCalls: [{ id: 'c1', name: 'slow', input: {} }] }, { text: 'after' }]),
        tools: [slow],
        advanced: { toolTimeoutMs: 100 },
      })
      const result = await (await agent.send('go')).result()
      const before = counts.finallies
      release()
      // Its return() was queued behind the step it was in: it runs once that step settles.
      for (let i = 0; i < 50 && counts.finallies === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
      await agent.close()
      report({ output: result.toolCalls[0].output, before, after: counts.finallies })
    `)
    expect(reported.output).toBe('Tool execution failed: Tool execution timeout after 100ms')
    expect(reported.before).toBe(0)
    expect(reported.after).toBe(1)
  })
})

describe('a fully synchronous run', () => {
  it('gives the event loop turns during 200 turns of a scripted model and sync tools', async () => {
    const reported = await inChild(`
      let calls = 0
      // Each call costs half a millisecond: the run takes over 100 ms, all of it synchronous.
      const busy = { name: 'busy', execute: () => { calls++; const until = performance.now() + 0.5; while (performance.now() < until); return 'ok' } }
      const model = arh.scriptedModel((request) => {
        const turn = request.messages.filter((message) => message.role === 'assistant').length + 1
        return turn < 200 ? { toolCalls: [{ id: 'c' + turn, name: 'busy', input: {} }] } : { text: 'done' }
      })
      const agent = await arh.createAgent({ model, tools: [busy], maxTurns: 300 })
      const started = Date.now()
      const result = await (await agent.send('go')).result()
      const elapsed = Date.now() - started
      const ticked = ticks()
      await agent.close()
      report({ content: result.content, turns: result.turns, calls, ticked, elapsed })
    `)
    expect(reported).toMatchObject({ content: 'done', turns: 200, calls: 199 })
    // At least one tick per 20 ms of the run: the loop was never held for long.
    expect(reported.ticked).toBeGreaterThanOrEqual(Math.floor(reported.elapsed / 20))
    expect(reported.ticked).toBeGreaterThanOrEqual(3)
  })

  it('a run woken by its model’s late answer owes the loop no turn: its next model call comes before an immediate the tool scheduled', async () => {
    const reported = await inChild(`
      const log = []
      // The tool schedules an immediate; the run then goes straight on to its next model call,
      // unless it first gives the event loop a turn (which runs that immediate).
      const tool = { name: 't', execute: () => { setImmediate(() => log.push('immediate')); log.push('tool'); return 'ok' } }
      const model = arh.scriptedModel(async (request) => {
        const turn = request.messages.filter((message) => message.role === 'assistant').length + 1
        log.push('model ' + turn)
        // Longer than a slice: counted from the session's own turns, every step would owe one.
        await new Promise((resolve) => setTimeout(resolve, 30))
        return turn < 3 ? { toolCalls: [{ id: 'c' + turn, name: 't', input: {} }] } : { text: 'done' }
      })
      const agent = await arh.createAgent({ model, tools: [tool] })
      const result = await (await agent.send('go')).result()
      await agent.close()
      report({ content: result.content, log })
    `)
    expect(reported).toEqual({ content: 'done', log: ['model 1', 'tool', 'model 2', 'immediate', 'tool', 'model 3', 'immediate'] })
  })
})

describe('compaction', () => {
  it('a summarize that never settles fails at advanced.compaction.timeoutMs: CompactFailure names the deadline and the run finishes uncompacted', async () => {
    const reported = await inChild(`
      const fired = []
      let summarized = 0
      let asked = 0
      const lookup = { name: 'lookup', execute: ({ key }) => ('value of ' + key + ' ').repeat(10) }
      const model = arh.scriptedModel((request) => {
        if (asked < 3) {
          asked++
          return { toolCalls: [{ id: 'call-' + asked, name: 'lookup', input: { key: 'k' + asked } }] }
        }
        return { text: 'done' }
      })
      const agent = await arh.createAgent({
        model,
        tools: [lookup],
        advanced: {
          hooks: [
            { id: 'pre', type: 'beforeCompact', handler: () => { fired.push({ type: 'PreCompact' }) } },
            { id: 'failed', type: 'onCompactError', handler: (event) => { fired.push({ type: 'CompactFailure', error: event.error }) } },
          ],
          compaction: { thresholdTokens: 60, timeoutMs: 200, summarize: () => { summarized++; return new Promise(() => {}) } },
        },
      })
      const started = Date.now()
      const result = await (await agent.send('look things up')).result()
      const elapsed = Date.now() - started
      const messages = agent.messages.length
      await agent.close()
      report({ content: result.content, fired, summarized, elapsed, messages })
    `)
    expect(reported.content).toBe('done')
    expect(reported.summarized).toBe(1)
    expect(reported.fired).toEqual([
      { type: 'PreCompact' },
      { type: 'CompactFailure', error: 'summarize did not settle within 200ms (advanced.compaction.timeoutMs)' },
    ])
    // Uncompacted: the prompt, three turns with their results, the answer.
    expect(reported.messages).toBe(8)
    expect(reported.elapsed).toBeGreaterThanOrEqual(190)
  })

  it('timeoutMs must be a positive integer', async () => {
    const reported = await inChild(`
      const outcome = await arh.createAgent({ model: arh.scriptedModel([{ text: 'x' }]), advanced: { compaction: { timeoutMs: 0 } } })
        .then(() => 'created', (error) => error.name + ': ' + error.message)
      report({ outcome })
    `)
    expect(reported.outcome).toBe('ConfigError: advanced.compaction.timeoutMs must be a positive integer no greater than 2147483647 (got 0)')
  })
})
