// A runtime that says what went wrong, as a user meets it: `ConfigError.field` names the option,
// options left `undefined` are options not given, and the SDKs' base-URL variables are read.
import { afterEach, describe, expect, it } from 'vitest'
import { ConfigError, createAgent, defineTool, scriptedModel } from '../index.js'
import { json, completion, useServer } from './helpers/server.js'

const refusal = (options: unknown) => createAgent(options as Parameters<typeof createAgent>[0]).then(
  () => {
    throw new Error('accepted')
  },
  (error: unknown) => error,
)

describe('ConfigError.field', () => {
  it('names the option at fault, top-level, nested and inside a list', async () => {
    const tool = (name: unknown) => ({ name, execute: () => 'x' })
    const cases: [unknown, string, string][] = [
      [{ model: scriptedModel([]), maxTurns: 0 }, 'maxTurns', 'maxTurns must be a positive integer'],
      [{ model: scriptedModel([]), advanced: { hookTimeoutMs: 'soon' } }, 'advanced.hookTimeoutMs', 'hookTimeoutMs must be a positive integer'],
      [{ model: scriptedModel([]), advanced: { hooks: [{ id: 'audit', type: 'afterStep', webhook: { url: 'http://127.0.0.1:9', timeoutMs: 5 } }] } }, 'advanced.hooks[0].webhook.timeoutMs', 'is not a webhook option'],
      [{ model: scriptedModel([]), tools: [tool('a'), tool('')] }, 'tools[1].name', 'tools[1].name must be a non-empty string'],
      [{ model: scriptedModel([]), tools: [tool('a'), { name: 'b', kind: 'danger', execute: () => 'x' }] }, 'tools[1].kind', 'tools[1].kind must be one of readonly, write, execute (got "danger")'],
      [{ model: scriptedModel([]), advanced: { nope: 1 } }, 'advanced.nope', 'advanced.nope is not a known option'],
      [{ model: 'm', baseUrl: 'ftp://example.com' }, 'baseUrl', 'baseUrl must be an http(s) URL'],
      [{}, 'model', 'model is required'],
    ]
    for (const [options, field, message] of cases) {
      const error = await refusal(options)
      expect(error).toBeInstanceOf(ConfigError)
      expect(error).toMatchObject({ code: 'CONFIG_ERROR', field })
      expect((error as Error).message).toContain(message)
      expect(JSON.parse(JSON.stringify(error))).toMatchObject({ name: 'ConfigError', code: 'CONFIG_ERROR', field })
    }
  })

  it('names where a circular option loops', async () => {
    const context: Record<string, unknown> = {}
    context.self = context
    const error = await refusal({ model: scriptedModel([]), advanced: { defaultContext: { metadata: context } } })
    expect(error).toMatchObject({ name: 'ConfigError', field: 'advanced.defaultContext.metadata.self' })
  })
})

describe('options left undefined', () => {
  it('are options not given, as exactOptionalPropertyTypes lets TypeScript write them', async () => {
    const key: string | undefined = undefined
    const agent = await createAgent({
      model: scriptedModel([{ text: 'fine' }]),
      apiKey: key,
      systemPrompt: undefined,
      maxTurns: undefined,
      tools: [defineTool({ name: 't', description: undefined, kind: undefined, execute: () => 'x' })],
      advanced: { hookTimeoutMs: undefined, logger: undefined, permission: undefined, connection: { maxRetries: undefined } },
    })
    expect(await (await agent.send('go', { signal: undefined, maxTurns: undefined })).text()).toBe('fine')
    await agent.close()
  })
})

describe("the SDKs' base-URL variables", () => {
  const server = useServer()
  afterEach(() => {
    delete process.env.OPENAI_BASE_URL
    delete process.env.ANTHROPIC_BASE_URL
  })

  it('OPENAI_BASE_URL is where a model id goes when no baseUrl is given, and needs no key', async () => {
    server.reply(json(completion('from the local server')))
    process.env.OPENAI_BASE_URL = `${server.url}/v1`
    const agent = await createAgent({ model: 'local-model', advanced: { connection: { stream: false } } })
    expect(await (await agent.send('hi')).text()).toBe('from the local server')
    expect(server.requests[0]).toMatchObject({ method: 'POST', url: '/v1/chat/completions', body: { model: 'local-model' } })
    await agent.close()
  })

  it('baseUrl wins over OPENAI_BASE_URL; a bad variable is named', async () => {
    server.reply(json(completion('from baseUrl')))
    process.env.OPENAI_BASE_URL = 'http://127.0.0.1:9/never'
    const agent = await createAgent({ model: 'm', baseUrl: server.url, advanced: { connection: { stream: false } } })
    expect(await (await agent.send('hi')).text()).toBe('from baseUrl')
    await agent.close()
    process.env.OPENAI_BASE_URL = 'file:///etc/passwd'
    await expect(createAgent({ model: 'm' })).rejects.toThrow('OPENAI_BASE_URL must be an http(s) URL ("file:///etc/passwd" uses file)')
  })

  it('ANTHROPIC_BASE_URL for provider anthropic', async () => {
    server.reply(json({ id: 'msg_1', type: 'message', role: 'assistant', model: 'claude', content: [{ type: 'text', text: 'from anthropic' }], stop_reason: 'end_turn', usage: { input_tokens: 3, output_tokens: 2 } }))
    process.env.ANTHROPIC_BASE_URL = server.url
    const agent = await createAgent({ model: 'claude', provider: 'anthropic', apiKey: 'ak', advanced: { connection: { stream: false } } })
    expect(await (await agent.send('hi')).text()).toBe('from anthropic')
    expect(server.requests[0]).toMatchObject({ url: '/v1/messages' })
    await agent.close()
  })
})
