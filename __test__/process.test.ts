// Process-level behaviour, in child processes: the addon never keeps Node alive on its own, and
// no user function can crash the process.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { describe, expect, it } from 'vitest'
import { defineTool, prompt, scriptedModel } from '../index.js'
import { childEnv, runScript } from './helpers/child.js'
import { completion, sleep, useServer } from './helpers/server.js'

const server = useServer()

describe('the process', () => {
  it('exits on its own when an agent that ran is never closed', async () => {
    const result = await runScript(`
      const { createAgent, scriptedModel, defineTool } = require(process.env.ENTRY)
      ;(async () => {
        const agent = await createAgent({
          model: scriptedModel([{ toolCalls: [{ name: 't', input: {} }] }, { text: 'done' }]),
          tools: [defineTool({ name: 't', execute: async () => 'x' })],
        })
        const res = await agent.send('go')
        console.log(await res.text())
      })()
    `)
    expect(result.timedOut).toBe(false)
    expect(result.code).toBe(0)
    expect(result.stdout.trim()).toBe('done')
  })

  it('stays alive while any run waits on its model, and exits once the last has ended', async () => {
    // The two runs wait on nothing but Rust's HTTP requests: the first ends while the second still
    // waits, and the process must stay up for it.
    server.reply(async (request, res) => {
      await sleep(request.body.model === 'slow' ? 600 : 100)
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion(request.body.model)))
    })
    const result = await runScript(`
      const { createAgent } = require(process.env.ENTRY)
      for (const model of ['fast', 'slow']) {
        createAgent({ model, apiKey: 'k', baseUrl: '${server.url}/v1', advanced: { connection: { stream: false } } })
          .then((agent) => agent.send('go'))
          .then((response) => response.text())
          .then((text) => console.log(text))
      }
    `)
    expect(result).toMatchObject({ timedOut: false, code: 0 })
    expect(result.stdout.trim().split('\n')).toEqual(['fast', 'slow'])
  })

  it('exits on its own when an agent is created and never used', async () => {
    const result = await runScript(`
      const { createAgent, scriptedModel } = require(process.env.ENTRY)
      createAgent({ model: scriptedModel((r) => ({ text: 'x' })) }).then(() => console.log('created'))
    `)
    expect(result).toMatchObject({ timedOut: false, code: 0 })
    expect(result.stdout.trim()).toBe('created')
  })

  it('a tool that throws synchronously, or throws a value with a throwing message, fails the call and the process lives', async () => {
    const result = await runScript(`
      const { prompt, scriptedModel, defineTool } = require(process.env.ENTRY)
      const hostile = { get message() { throw new Error('no message for you') }, toString() { throw new Error('nor a string') } }
      prompt('go', {
        model: scriptedModel([{ toolCalls: [{ name: 'sync', input: {} }, { name: 'hostile', input: {} }] }, { text: 'alive' }]),
        tools: [
          defineTool({ name: 'sync', execute() { throw new Error('sync boom') } }),
          defineTool({ name: 'hostile', execute() { throw hostile } }),
        ],
      }).then((r) => console.log(JSON.stringify(r.toolCalls.map((c) => c.output)), r.content))
    `)
    expect(result.code).toBe(0)
    expect(result.stdout.trim()).toBe('["Tool execution failed: sync boom","Tool execution failed: an error that cannot be described"] alive')
  })
})

describe('odd return values', () => {
  it('become failed calls or empty outputs, never a crash', async () => {
    const circular: any = { a: 1 }
    circular.self = circular
    const tools = [
      defineTool({ name: 'bigint', execute: () => 10n as any }),
      defineTool({ name: 'circular', execute: () => circular }),
      defineTool({ name: 'fn', execute: () => (() => 1) as any }),
      defineTool({ name: 'symbol', execute: () => Symbol('s') as any }),
      defineTool({ name: 'date', execute: () => new Date(0) as any }),
      defineTool({ name: 'hostileThen', execute: () => ({ get then() { throw new Error('no then for you') } }) as any }),
      defineTool({ name: 'iterator', execute: () => ({ next: () => ({ done: true, value: 1 }) }) as any }),
      defineTool({ name: 'undefined', execute: () => undefined }),
    ]
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: tools.map((tool) => ({ name: tool.name, input: {} })) }, { text: 'fine' }]),
      tools,
    })
    expect(result.content).toBe('fine')
    expect(result.toolCalls.map((call) => [call.status, call.output])).toEqual([
      ['error', 'Tool execution failed: Do not know how to serialize a BigInt'],
      ['error', expect.stringMatching(/^Tool execution failed: Converting circular structure to JSON/)],
      ['error', 'Tool execution failed: execute returned a function, which cannot be sent to the model as JSON'],
      ['error', 'Tool execution failed: execute returned a symbol, which cannot be sent to the model as JSON'],
      ['success', '1970-01-01T00:00:00.000Z'],
      ['error', 'Tool execution failed: no then for you'],
      ['error', 'Tool execution failed: execute returned an iterator that is not a generator, which cannot be sent to the model as JSON'],
      ['success', ''],
    ])
  })

  it('a script function that returns a non-object ends the run with MODEL_ERROR', async () => {
    await expect(prompt('go', { model: scriptedModel(() => 42 as any) })).rejects.toMatchObject({
      code: 'MODEL_ERROR',
      message: 'scriptedModel function returned an invalid turn: the turn must be an object like { text, toolCalls } (got 42)',
    })
  })
})

describe.runIf(process.platform === 'linux')('worker threads', () => {
  it('run at a lower priority than the JS thread (nice 5)', async () => {
    // A model call over HTTP starts the runtime's workers.
    server.reply((_request, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion('ok')))
    })
    expect(await prompt('go', { model: 'm', apiKey: 'k', baseUrl: `${server.url}/v1`, advanced: { connection: { stream: false } } })).toMatchObject({ content: 'ok' })
    const threads = readdirSync('/proc/self/task').map((id) => {
      const stat = readFileSync(`/proc/self/task/${id}/stat`, 'utf8')
      // Fields after the parenthesised name: state is field 3, nice is field 19.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      return { name: readFileSync(`/proc/self/task/${id}/comm`, 'utf8').trim(), nice: Number(fields[16]) }
    })
    const workers = threads.filter((thread) => thread.name === 'tokio-rt-worker')
    expect(workers.length).toBeGreaterThan(0)
    expect(workers.every((worker) => worker.nice === 5)).toBe(true)
    expect(threads.find((thread) => thread.name !== 'tokio-rt-worker' && Number(thread.nice) === 0)).toBeDefined()
  })
})

describe('session hooks with webhooks', () => {
  it('keep the process alive until createAgent and close() have their answers', async () => {
    const delivered: string[] = []
    server.reply(async (request, res) => {
      await sleep(300)
      delivered.push(request.url)
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
    const result = await runScript(`
      const { createAgent, scriptedModel } = require(process.env.ENTRY)
      createAgent({
        model: scriptedModel([{ text: 'x' }]),
        advanced: {
          hooks: [
            { id: 'start', type: 'SessionStart', webhook: { url: '${server.url}/start' } },
            { id: 'end', type: 'SessionEnd', webhook: { url: '${server.url}/end' } },
          ],
        },
      })
        .then((agent) => (console.log('created'), agent.close()))
        .then(() => console.log('closed'))
    `)
    expect(result).toMatchObject({ timedOut: false, code: 0 })
    expect(result.stdout.trim().split('\n')).toEqual(['created', 'closed'])
    expect(delivered).toEqual(['/start', '/end'])
  })
})
