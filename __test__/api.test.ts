// The exported surface: error classes, HookEvent, and createAgent's validation of options.
import { execFileSync } from 'node:child_process'
import { resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { describe, expect, it } from 'vitest'
import {
  AbortError,
  ConfigError,
  createAgent,
  CriticalHookDeliveryError,
  defineTool,
  HookEvent,
  HookTimeoutError,
  scriptedModel,
  SdkError,
} from '../index.js'
import * as esm from '../index.mjs'
import { childEnv } from './helpers/child.js'

describe('error classes', () => {
  it('SdkError carries code, name, cause and a toJSON without an undefined cause', () => {
    const plain = new SdkError('SOME_CODE', 'went wrong')
    expect(plain).toBeInstanceOf(Error)
    expect(plain.name).toBe('SdkError')
    expect(plain.toJSON()).toEqual({ name: 'SdkError', code: 'SOME_CODE', message: 'went wrong' })
    expect('cause' in plain.toJSON()).toBe(false)
    const cause = new Error('root')
    const wrapped = new SdkError('X', 'outer', { cause })
    expect(wrapped.cause).toBe(cause)
    expect(wrapped.toJSON()).toEqual({ name: 'SdkError', code: 'X', message: 'outer', cause })
  })

  it('HookTimeoutError names the event and budget', () => {
    const error = new HookTimeoutError('UserPromptSubmit', 50)
    expect(error).toBeInstanceOf(HookTimeoutError)
    expect(error).toBeInstanceOf(SdkError)
    expect(error).toBeInstanceOf(Error)
    expect(error.toJSON()).toEqual({
      name: 'HookTimeoutError',
      code: 'HOOK_TIMEOUT',
      message: 'Hook UserPromptSubmit exceeded 50ms',
      event: 'UserPromptSubmit',
      timeoutMs: 50,
    })
  })

  it('ConfigError, AbortError and CriticalHookDeliveryError have their codes', () => {
    expect(new ConfigError('bad').toJSON()).toEqual({ name: 'ConfigError', code: 'CONFIG_ERROR', message: 'bad' })
    expect(new AbortError().toJSON()).toEqual({ name: 'AbortError', code: 'ABORT', message: 'Operation aborted' })
    const cause = new Error('refused')
    const critical = new CriticalHookDeliveryError('audit', cause)
    expect(critical).toMatchObject({ name: 'CriticalHookDeliveryError', code: 'CRITICAL_HOOK_DELIVERY', hookId: 'audit', cause })
  })

  it('HookEvent lists the eight session events, values equal to keys', () => {
    expect(Object.values(HookEvent)).toEqual([
      'PreToolUse',
      'PostToolUse',
      'PostToolUseFailure',
      'PermissionRequest',
      'UserPromptSubmit',
      'SessionStart',
      'SessionEnd',
      'TaskCompleted',
    ])
    for (const [key, value] of Object.entries(HookEvent)) expect(value).toBe(key)
  })

  it('the ESM entry exports the same objects', () => {
    expect(esm.createAgent).toBe(createAgent)
    expect(esm.SdkError).toBe(SdkError)
    expect(esm.HookEvent).toBe(HookEvent)
  })

  it("Node's own ESM loader finds every export of the CommonJS entry by name", () => {
    const entry = pathToFileURL(resolve(__dirname, '..', 'index.mjs')).href
    const script = `import * as esm from '${entry}'; import { createRequire } from 'node:module'; const cjs = createRequire(import.meta.url)('${resolve(__dirname, '..', 'index.js')}'); console.log(JSON.stringify(Object.keys(cjs).map((name) => [name, esm[name] === cjs[name]]).concat([['default', esm.default === cjs]])))`
    const pairs = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env: childEnv() }))
    expect(pairs.length).toBeGreaterThan(9)
    expect(pairs.filter(([, same]: [string, boolean]) => !same)).toEqual([])
  })
})

describe('createAgent rejects bad options with a ConfigError naming the field', () => {
  const tool = defineTool({ name: 'ok', execute: () => 'x' })
  const cases: [string, unknown, string][] = [
    ['no options', undefined, 'options must be an object (got undefined)'],
    ['missing model', {}, 'model is required: pass a model id such as "gpt-4o-mini", or scriptedModel(...)'],
    ['unknown provider', { model: 'm', apiKey: 'k', provider: 'mistral' }, 'provider must be one of openai, openai-compatible, anthropic, deepseek, azure-openai, gemini (got "mistral")'],
    ['both base URL spellings, different', { model: 'm', apiKey: 'k', baseUrl: 'http://a.test', baseURL: 'http://b.test' }, 'baseUrl and baseURL are both set and differ ("http://a.test" and "http://b.test"): pass only one'],
    ['a tool without a name', { model: scriptedModel([]), tools: [{ execute: () => 1 }] }, 'tools[0].name must be a non-empty string'],
    ['a tool without execute', { model: scriptedModel([]), tools: [tool, { name: 'second' }] }, 'tools[1].execute must be a function'],
    ['two tools with one name', { model: scriptedModel([]), tools: [tool, tool] }, 'tools[1].name "ok" is already the name of another tool'],
    ['a bad hook timeout', { model: scriptedModel([]), advanced: { hookTimeoutMs: 0 } }, 'hookTimeoutMs must be a positive integer no greater than 2147483647'],
    ['a bad SessionEnd timeout', { model: scriptedModel([]), advanced: { sessionEndHookTimeoutMs: 2147483648 } }, 'sessionEndHookTimeoutMs must be a positive integer no greater than 2147483647'],
    ['a NaN timeout', { model: scriptedModel([]), advanced: { hookTimeoutMs: NaN } }, 'hookTimeoutMs must be a positive integer no greater than 2147483647'],
    ['an infinite temperature', { model: scriptedModel([]), temperature: Infinity }, 'temperature must be a number from 0 to 2 (got Infinity)'],
    ['a bigint maxTurns', { model: scriptedModel([]), maxTurns: 5n }, 'maxTurns must be a positive integer no greater than 2147483647 (got 5n)'],
    ['a misspelt option', { model: scriptedModel([]), maxTurn: 3 }, 'maxTurn is not a known option (known here: model, systemPrompt, temperature, maxOutputTokens, toolChoice, maxTurns, tools, apiKey, provider, baseUrl, baseURL, advanced, profile, filesystem)'],
    ['bad scripted turns', { model: scriptedModel([{ text: 'a' }, { toolCalls: 'x' }] as any) }, 'model.turns[1].toolCalls must be an array (got "x")'],
    ['a missing API key', { model: 'gpt-4o-mini', apiKey: '' }, 'apiKey is required for provider openai: pass apiKey or set OPENAI_API_KEY'],
    ['a non-http base URL', { model: 'm', baseURL: 'file:///etc' }, 'baseURL must be an http(s) URL ("file:///etc" uses file)'],
    ['a bad sideEffect', { model: scriptedModel([]), tools: [{ name: 't', execute: () => 1, sideEffect: 'risky' }] }, 'tools[0].sideEffect must be one of pure, idempotent, non_idempotent (got "risky")'],
    ['a circular option', (() => { const o: any = { model: scriptedModel([]) }; o.self = o; return o })(), 'options contain a circular reference: self refers back to the options'],
    [
      'a circular tool',
      (() => { const t: any = { name: 't', execute: () => 1, meta: [{}] }; t.meta[0].owner = t; return { model: scriptedModel([]), tools: [t] } })(),
      'options contain a circular reference: tools[0].meta[0].owner refers back to tools[0]',
    ],
    [
      'an option whose getter throws',
      { model: scriptedModel([]), tools: [{ name: 't', execute: () => 1, meta: [1, { get broken() { throw new Error('no access') } }] }] },
      'tools[0].meta[1] could not be read: no access',
    ],
  ]
  for (const [what, options, message] of cases) {
    it(what, async () => {
      const error = await createAgent(options as any).catch((e) => e)
      expect(error).toBeInstanceOf(ConfigError)
      expect(error).toMatchObject({ name: 'ConfigError', code: 'CONFIG_ERROR', message })
    })
  }

  it('accepts baseUrl and baseURL together when they are the same', async () => {
    const agent = await createAgent({ model: 'm', apiKey: 'k', baseUrl: 'http://a.test', baseURL: 'http://a.test' })
    await agent.close()
  })

  it('reads the API key from the environment when apiKey is not given', async () => {
    process.env.OPENAI_API_KEY = 'sk-from-env'
    try {
      const agent = await createAgent({ model: 'gpt-4o-mini' })
      expect(agent.sessionId).toMatch(/^[0-9a-f-]{36}$/)
      await agent.close()
    } finally {
      delete process.env.OPENAI_API_KEY
    }
  })
})
