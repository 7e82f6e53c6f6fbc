// advanced.logger: what the runtime logs instead of failing reaches JS, and never a secret.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAgent, defineTool, prompt, scriptedModel, type LogEntry } from '../index.js'
import { runScript } from './helpers/child.js'
import { startServer, until, type ModelServer } from './helpers/server.js'

let receiver: ModelServer
beforeAll(async () => {
  receiver = await startServer()
  receiver.reply((_req, res) => void res.writeHead(500).end('internal details that must not be logged'))
})
afterAll(() => receiver.close())

describe('advanced.logger', () => {
  it('a function logger gets { level, message, ...fields } for a failing PostToolUseFailure hook', async () => {
    const entries: LogEntry[] = []
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ id: 't1', name: 'broken', input: {} }] }, { text: 'done' }]),
      tools: [defineTool({ name: 'broken', execute: () => { throw new Error('tool error') } })],
      advanced: {
        logger: (entry) => void entries.push(entry),
        hooks: { PostToolUseFailure: [() => { throw new Error('hook error') }] },
      },
    })
    expect(result.toolCalls[0].output).toBe('Tool execution failed: tool error')
    await until(() => entries.length > 0)
    expect(entries).toEqual([
      { level: 'warn', message: 'PostToolUseFailure hook execution failed; keeping the original tool error', tool: 'broken', toolCallId: 't1', error: 'hook error' },
    ])
  })

  it("a console-like logger gets (message, fields) for webhook failures, without secrets or the receiver's text", async () => {
    const warnings: [string, Record<string, unknown>][] = []
    const errors: [string, Record<string, unknown>][] = []
    process.env.HOOK_TOKEN = 'token-that-must-not-leak'
    const agent = await createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: {
        logger: { warn: (message, fields) => void warnings.push([message, fields]), error: (message, fields) => void errors.push([message, fields]) },
        hooks: [
          { id: 'notice', type: 'afterStep', webhook: { url: `${receiver.url}/n`, headers: { authorization: 'Bearer ${HOOK_TOKEN}' }, allowedEnvVars: ['HOOK_TOKEN'] } },
          { id: 'observer', type: 'afterStep', handler: () => { throw new Error('observer broke') } },
        ],
      },
    })
    await (await agent.send('go')).result()
    await until(() => warnings.length >= 2)
    delete process.env.HOOK_TOKEN
    expect(warnings).toEqual([
      ['Webhook delivery failed (non-fatal): notice', { hookId: 'notice', hookType: 'afterStep', error: 'Hook HTTP request failed: http_error (status 500)' }],
      ['hook "observer" failed on StepEnd; the next hook runs', { event: 'StepEnd', hook: 'hook "observer"', error: 'observer broke' }],
    ])
    expect(errors).toEqual([])
    const logged = JSON.stringify(warnings)
    expect(logged).not.toContain('token-that-must-not-leak')
    expect(logged).not.toContain('internal details')
    await agent.close()
  })

  it('rejects a logger that is neither, naming the field', async () => {
    await expect(createAgent({ model: scriptedModel([]), advanced: { logger: 'console' as any } })).rejects.toMatchObject({
      name: 'ConfigError',
      field: 'advanced.logger',
      message: 'advanced.logger must be a function, an object with debug, info, warn or error methods, or false (got "console")',
    })
  })

  it('accepts console itself', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { logger: console } })
    expect(await (await agent.send('go')).text()).toBe('x')
    await agent.close()
  })

  // What a user with no logger sees: the failures on stderr, one line each; `logger: false`
  // silences them. Run in a child, whose stderr is all its own.
  const failing = (logger: string) => `
    const { createAgent, scriptedModel } = require(process.env.ENTRY)
    ;(async () => {
      const agent = await createAgent({
        model: scriptedModel([{ text: 'x' }]),
        advanced: {
          ${logger}
          hooks: [
            { id: 'observer', type: 'afterStep', handler: () => { throw new Error('observer broke') } },
            { id: 'notice', type: 'afterStep', webhook: { url: 'http://127.0.0.1:9/unreachable', timeout: 2000 } },
          ],
        },
      })
      console.log(await (await agent.send('go')).text())
      await new Promise((done) => setTimeout(done, 300))
      await agent.close()
    })()`

  it('without a logger, warnings go to stderr, one line each', async () => {
    const child = await runScript(failing(''))
    expect(child.stdout).toBe('x\n')
    const lines = child.stderr.split('\n').filter((line) => line.startsWith('[agent-runtime-hooks]'))
    expect(lines).toContain('[agent-runtime-hooks] warn: hook "observer" failed on StepEnd; the next hook runs {"event":"StepEnd","hook":"hook \\"observer\\"","error":"observer broke"}')
    expect(lines.some((line) => line.startsWith('[agent-runtime-hooks] warn: Webhook delivery failed (non-fatal): notice '))).toBe(true)
  })

  it('logger: false keeps them off stderr', async () => {
    const child = await runScript(failing('logger: false,'))
    expect(child.stdout).toBe('x\n')
    expect(child.stderr).not.toContain('[agent-runtime-hooks]')
  })
})
