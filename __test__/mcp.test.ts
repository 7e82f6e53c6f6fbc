// MCP tools (SPEC §8.6), as a user would run them: `@modelcontextprotocol/server-everything` and a
// small server of our own over stdio; their tools offered as `mcp__<server>__<tool>`, through the
// same hooks, matchers, mock(), permission and abort as JS tools; servers that fail to start or
// crash; close() stopping them; mcpServerStatus() / mcpListTools(). A streamable-HTTP server
// (`url`) written with the official SDK, reached over 127.0.0.1.
import { existsSync, mkdtempSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import {
  ConfigError,
  createAgent,
  scriptedModel,
  type AgentOptions,
  type HookEventPayload,
  type HookInput,
  type JsonObject,
  type ScriptRequest,
  type StreamEvent,
} from '../index.js'
import { startMcpHttpServer, type McpHttpServer } from './helpers/mcp-http-server.js'
import { sleep, until } from './helpers/server.js'

const here = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const everythingMain = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist/index.js')
const everything = { command: process.execPath, args: [everythingMain, 'stdio'] }
const ours = (env: Record<string, string> = {}) => ({ command: process.execPath, args: [join(here, 'helpers/mcp-server.mjs')], env })

/** Calls `name` with `input` on the first turn, then answers with what the tool said; keeps every request. */
function caller(name: string, input: JsonObject) {
  const requests: ScriptRequest[] = []
  const model = scriptedModel((request) => {
    requests.push(structuredClone(request))
    const results = request.messages.filter((message) => message.role === 'tool')
    if (results.length === 0) return { toolCalls: [{ id: 'c1', name, input }] }
    return { text: `tool said: ${String(results[results.length - 1]!.content)}` }
  })
  return { model, requests }
}

async function run(options: AgentOptions) {
  const agent = await createAgent(options)
  try {
    const response = await agent.send('go')
    const events: StreamEvent[] = []
    for await (const event of response.stream()) events.push(event)
    return events
  } finally {
    await agent.close()
  }
}
const resultOf = (events: StreamEvent[]) => events.find((event) => event.type === 'result') as Extract<StreamEvent, { type: 'result' }>

function alive(pid: number) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

describe('MCP stdio servers', () => {
  it('offers the server’s tools as mcp__<server>__<tool>, and a call’s result reaches the model', async () => {
    const { model, requests } = caller('mcp__everything__echo', { message: 'hello' })
    const events = await run({ model, advanced: { mcpServers: { everything } } })
    const offered = requests[0]!.tools.map((tool) => tool.name)
    expect(offered).toContain('mcp__everything__echo')
    expect(offered).toContain('mcp__everything__get-sum')
    const echo = requests[0]!.tools.find((tool) => tool.name === 'mcp__everything__echo')!
    expect(echo.description).toBe('Echoes back the input string')
    expect(echo.parameters).toMatchObject({ type: 'object', properties: { message: { type: 'string' } } })
    expect(resultOf(events).result.content).toBe('tool said: Echo: hello')
    expect(resultOf(events).result.toolCalls[0]).toMatchObject({ name: 'mcp__everything__echo', output: 'Echo: hello', status: 'success' })
  })

  it('joins text content; isError: true is a failed call', async () => {
    const ok = await run({ model: caller('mcp__ours__ok', {}).model, advanced: { mcpServers: { ours: ours() } } })
    expect(resultOf(ok).result.toolCalls[0]).toMatchObject({ output: 'ok\ndone', status: 'success' })
    const failed = await run({ model: caller('mcp__ours__fail', {}).model, advanced: { mcpServers: { ours: ours() } } })
    expect(resultOf(failed).result.toolCalls[0]).toMatchObject({ output: 'Tool execution failed: the disk is full', isError: true })
  })

  it('tool payloads carry toolSource, identifier (the server) and apiName (its own name)', async () => {
    const seen: HookInput[] = []
    const post: HookEventPayload[] = []
    await run({
      model: caller('mcp__everything__get-sum', { a: 2, b: 3 }).model,
      advanced: {
        mcpServers: { everything },
        hooks: { PreToolUse: [(input) => (seen.push(input), { action: 'continue' })] },
      },
    })
    expect(seen[0]).toMatchObject({ toolName: 'mcp__everything__get-sum', toolSource: 'mcp', identifier: 'everything', apiName: 'get-sum', toolInput: { a: 2, b: 3 } })
    const js = await run({
      model: caller('mcp__everything__get-sum', { a: 2, b: 3 }).model,
      advanced: {
        mcpServers: { everything },
        hooks: [{ id: 'after', type: 'afterToolCall', handler: (event) => void post.push(event) }],
      },
    })
    expect(resultOf(js).result.toolCalls[0]!.output).toContain('5')
    expect(post[0]).toMatchObject({ toolSource: 'mcp', identifier: 'everything', apiName: 'get-sum', result: { success: true } })
  })

  it('a PreToolUse matcher on mcp__ tools denies the call; the server is never asked', async () => {
    const events = await run({
      model: caller('mcp__ours__crash', {}).model,
      advanced: {
        mcpServers: { ours: ours() },
        hooks: [{ id: 'deny-mcp', type: 'PreToolUse', matcher: '^mcp__ours__', handler: () => ({ action: 'abort', reason: 'no MCP here' }) }],
      },
    })
    expect(resultOf(events).result.toolCalls[0]).toMatchObject({ output: 'Tool execution aborted: no MCP here', isError: true })
  })

  it('a hook object’s mock() answers for the MCP tool', async () => {
    const events = await run({
      model: caller('mcp__ours__crash', {}).model,
      advanced: {
        mcpServers: { ours: ours() },
        hooks: [{ id: 'mock', type: 'beforeToolCall', matcher: 'mcp__ours__crash', handler: (event) => void event.mock!('canned') }],
      },
    })
    expect(resultOf(events).result.toolCalls[0]).toMatchObject({ output: 'canned', mocked: true, status: 'success' })
  })

  it('the permission function sees the call and its deny stops it', async () => {
    const asked: Array<{ toolName: string; kind: string }> = []
    const events = await run({
      model: caller('mcp__everything__echo', { message: 'x' }).model,
      advanced: {
        mcpServers: { everything },
        permission: (request) => (asked.push({ toolName: request.toolName, kind: request.kind }), { behavior: 'deny', message: 'not today' }),
      },
    })
    // echo says it only reads (annotations.readOnlyHint).
    expect(asked).toEqual([{ toolName: 'mcp__everything__echo', kind: 'readonly' }])
    expect(resultOf(events).result.toolCalls[0]).toMatchObject({ output: 'Tool execution aborted: not today', isError: true })
  })

  it('allowedTools / disallowedTools filter MCP tools too', async () => {
    const { model, requests } = caller('mcp__ours__ok', {})
    await run({ model, advanced: { mcpServers: { ours: ours() }, disallowedTools: ['mcp__ours__crash'] } })
    expect(requests[0]!.tools.map((tool) => tool.name).sort()).toEqual(['mcp__ours__fail', 'mcp__ours__ok', 'mcp__ours__slow'])
    const only = caller('mcp__ours__crash', {})
    const events = await run({ model: only.model, advanced: { mcpServers: { ours: ours() }, allowedTools: ['mcp__ours__ok'] } })
    expect(only.requests[0]!.tools.map((tool) => tool.name)).toEqual(['mcp__ours__ok'])
    expect(resultOf(events).result.toolCalls[0]).toMatchObject({ output: 'Tool execution failed: Tool "mcp__ours__crash" not found' })
  })

  it('abort during a long-running MCP tool ends the run at once', async () => {
    const agent = await createAgent({
      model: caller('mcp__everything__trigger-long-running-operation', { duration: 30, steps: 3 }).model,
      advanced: { mcpServers: { everything } },
    })
    try {
      const response = await agent.send('go')
      const started = Date.now()
      const outcome = response.result()
      // The call is running by then: the server started with the agent, the model answers at once.
      await sleep(500)
      agent.abort(new Error('stop now'))
      await expect(outcome).rejects.toThrow('stop now')
      expect(Date.now() - started).toBeLessThan(5000)
    } finally {
      await agent.close()
    }
  })

  it('abort cancels the call on the server (notifications/cancelled)', async () => {
    const cancelFile = join(mkdtempSync(join(tmpdir(), 'arh-mcp-')), 'cancelled')
    const agent = await createAgent({ model: caller('mcp__ours__slow', {}).model, advanced: { mcpServers: { ours: ours({ MCP_CANCEL_FILE: cancelFile }) } } })
    try {
      const response = await agent.send('go')
      const outcome = response.result()
      await sleep(300)
      expect(existsSync(cancelFile)).toBe(false)
      agent.abort(new Error('stop now'))
      await expect(outcome).rejects.toThrow('stop now')
      await until(() => existsSync(cancelFile), 5000)
    } finally {
      await agent.close()
    }
  })

  it('toolTimeoutMs bounds an MCP call', async () => {
    const events = await run({
      model: caller('mcp__everything__trigger-long-running-operation', { duration: 30, steps: 3 }).model,
      advanced: { mcpServers: { everything }, toolTimeoutMs: 300 },
    })
    expect(resultOf(events).result.toolCalls[0]).toMatchObject({ output: 'Tool execution failed: Tool execution timeout after 300ms', isError: true })
  })

  it('a server that cannot start fails createAgent with a ConfigError naming it', async () => {
    const missing = createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { mcpServers: { broken: { command: join(here, 'no-such-server') } } } })
    await expect(missing).rejects.toThrow(ConfigError)
    await expect(missing).rejects.toThrow(/advanced\.mcpServers\.broken: the MCP server could not start/)
    const exits = createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { mcpServers: { quits: { command: process.execPath, args: ['-e', 'process.exit(1)'] } } } })
    await expect(exits).rejects.toThrow(/advanced\.mcpServers\.quits: the MCP server could not start/)
  })

  it('bad server options are ConfigErrors naming the field', async () => {
    const model = scriptedModel([{ text: 'x' }])
    await expect(createAgent({ model, advanced: { mcpServers: { s: { command: 'x', args: 'y' } as any } } })).rejects.toThrow(
      'advanced.mcpServers.s.args must be an array of strings',
    )
    await expect(createAgent({ model, advanced: { mcpServers: { web: { url: 'file:///tmp/mcp' } } } })).rejects.toThrow(
      'advanced.mcpServers.web.url must be an absolute http(s) URL',
    )
    await expect(createAgent({ model, advanced: { mcpServers: { web: { url: 'https://example.com/mcp', command: 'x' } as any } } })).rejects.toThrow(
      'advanced.mcpServers.web: give either command (stdio) or url (streamable HTTP), not both',
    )
  })

  it('a server that crashes mid-call fails that call; the run goes on; its status is closed', async () => {
    const agent = await createAgent({ model: caller('mcp__ours__crash', {}).model, advanced: { mcpServers: { ours: ours() } } })
    try {
      const result = await (await agent.send('go')).result()
      const call = result.toolCalls[0]!
      expect(call).toMatchObject({ isError: true })
      expect(call.output).toMatch(/^Tool execution failed: MCP server "ours" failed: /)
      expect(result.content).toMatch(/^tool said: Tool execution failed: MCP server "ours" failed/)
      expect(await agent.mcpServerStatus()).toEqual([{ name: 'ours', status: 'closed', toolCount: 4 }])
    } finally {
      await agent.close()
    }
  })

  it('close() stops the server process; mcpServerStatus / mcpListTools report the servers', async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), 'arh-mcp-')), 'pid')
    const agent = await createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { mcpServers: { ours: ours({ MCP_PID_FILE: pidFile }) } } })
    expect(existsSync(pidFile)).toBe(true)
    const pid = Number(readFileSync(pidFile, 'utf8'))
    expect(alive(pid)).toBe(true)
    expect(await agent.mcpServerStatus()).toEqual([{ name: 'ours', status: 'connected', toolCount: 4 }])
    const tools = await agent.mcpListTools()
    expect(tools.map((tool) => tool.name)).toEqual(['mcp__ours__ok', 'mcp__ours__fail', 'mcp__ours__crash', 'mcp__ours__slow'])
    expect(tools[0]).toEqual({ name: 'mcp__ours__ok', serverName: 'ours', toolName: 'ok', description: 'Answers ok', inputSchema: { type: 'object', properties: {} } })
    await agent.close()
    await until(() => !alive(pid), 5000)
    expect(await agent.mcpServerStatus()).toEqual([{ name: 'ours', status: 'closed', toolCount: 4 }])
  })

  it('a sub-agent is offered the MCP tools its allowedTools name, under the parent’s hooks', async () => {
    const seen: HookInput[] = []
    const offered: string[][] = []
    const model = scriptedModel((request) => {
      const system = request.messages[0]?.role === 'system' ? String(request.messages[0].content) : ''
      const results = request.messages.filter((message) => message.role === 'tool')
      if (system === 'You are worker') {
        offered.push(request.tools.map((tool) => tool.name))
        if (results.length === 0) return { toolCalls: [{ id: 'w1', name: 'mcp__ours__ok', input: {} }] }
        return { text: `worker got ${String(results[0]!.content)}` }
      }
      if (results.length === 0) return { toolCalls: [{ id: 't1', name: 'Task', input: { subagent_type: 'worker', prompt: 'call ok' } }] }
      return { text: String(results[0]!.content) }
    })
    const events = await run({
      model,
      advanced: {
        mcpServers: { ours: ours() },
        agents: { worker: { description: 'Works', systemPrompt: 'You are worker', allowedTools: ['mcp__ours__ok'] } },
        hooks: { PreToolUse: [(input) => (seen.push(input), { action: 'continue' })] },
      },
    })
    expect(offered[0]).toEqual(['mcp__ours__ok'])
    expect(resultOf(events).result.content).toBe('worker got ok\ndone')
    expect(seen.find((input) => input.toolName === 'mcp__ours__ok')).toMatchObject({ agentPath: ['worker'], toolSource: 'mcp', identifier: 'ours', apiName: 'ok' })
  })

  it('a SessionStart that aborts createAgent stops the servers already started', async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), 'arh-mcp-')), 'pid')
    const created = createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: { mcpServers: { ours: ours({ MCP_PID_FILE: pidFile }) }, hooks: { SessionStart: [async () => ({ action: 'abort' })] } },
    })
    await expect(created).rejects.toMatchObject({ message: 'Hook SessionStart aborted' })
    const pid = Number(readFileSync(pidFile, 'utf8'))
    await until(() => !alive(pid), 5000)
  })

  it('an agent without servers reports none', async () => {
    const agent = await createAgent({ model: scriptedModel([{ text: 'x' }]) })
    expect(await agent.mcpServerStatus()).toEqual([])
    expect(await agent.mcpListTools()).toEqual([])
    await agent.close()
  })

  it('a server’s input schema reaches the model as the server wrote it, key order included', async () => {
    const { model, requests } = caller('mcp__ours__ordered', { zeta: 'z', alpha: 1 })
    const events = await run({ model, advanced: { mcpServers: { ours: ours({ MCP_EXTRA: '1' }) }, allowedTools: ['mcp__ours__ordered'] } })
    const written = {
      type: 'object',
      required: ['zeta'],
      properties: { zeta: { type: 'string', description: 'last letter' }, alpha: { type: 'number', minimum: 0 }, mid: { type: 'boolean' } },
      additionalProperties: false,
    }
    // Compared as text: the order of keys is what is checked.
    expect(JSON.stringify(requests[0]!.tools[0]!.parameters)).toBe(JSON.stringify(written))
    expect(resultOf(events).result.toolCalls[0]!.output).toBe('{"zeta":"z","alpha":1}')
  })

  it('a 17 MiB result from a server on the official SDK fails its call at once, naming the size and the limit', async () => {
    const bytes = 17 * 1024 * 1024
    const calls: number[] = []
    const agent = await createAgent({
      model: caller('mcp__ours__big', { bytes }).model,
      advanced: {
        mcpServers: { ours: ours({ MCP_EXTRA: '1' }) },
        hooks: { PreToolUse: [() => (calls.push(Date.now()), { action: 'continue' })], PostToolUseFailure: [() => (calls.push(Date.now()), { action: 'continue' })] },
      },
    })
    try {
      const result = await (await agent.send('go')).result()
      const output = result.toolCalls[0]!.output
      const size = /^Tool execution failed: MCP server "ours" failed: its answer is (\d+) bytes, over the limit of 16777216 bytes$/.exec(output)
      expect(size, output.slice(0, 200)).not.toBeNull()
      expect(Number(size![1])).toBeGreaterThan(bytes)
      // Not the default toolTimeoutMs (10 minutes): the call failed as soon as the answer was read.
      expect(calls[1]! - calls[0]!).toBeLessThan(10_000)
      expect(result.content).toMatch(/^tool said: Tool execution failed: MCP server "ours" failed: its answer is/)
    } finally {
      await agent.close()
    }
  })
})

describe('MCP streamable-HTTP servers', () => {
  let server: McpHttpServer
  beforeEach(async () => {
    server = await startMcpHttpServer()
  })
  afterEach(async () => {
    await server.close()
  })

  it('a 17 MiB answer fails its call at once naming the limit, and the server still answers', async () => {
    const bytes = 17 * 1024 * 1024
    const model = scriptedModel((request) => {
      const made = request.messages.filter((message) => message.role === 'tool').length
      if (made === 0) return { toolCalls: [{ id: 'c1', name: 'mcp__web__big', input: { bytes } }] }
      if (made === 1) return { toolCalls: [{ id: 'c2', name: 'mcp__web__ok', input: { who: 'after' } }] }
      return { text: 'done' }
    })
    const agent = await createAgent({ model, advanced: { mcpServers: { web: { url: server.url } } } })
    try {
      const started = Date.now()
      const result = await (await agent.send('go')).result()
      expect(result.toolCalls.map((call) => [call.name, call.isError, call.output])).toEqual([
        ['mcp__web__big', true, 'Tool execution failed: MCP server "web" failed: its answer is over the limit of 16777216 bytes'],
        ['mcp__web__ok', false, 'ok after'],
      ])
      // Not the default toolTimeoutMs (10 minutes).
      expect(Date.now() - started).toBeLessThan(15_000)
    } finally {
      await agent.close()
    }
  })

  it('offers the server’s tools as mcp__<server>__<tool>, and a call’s result reaches the model', async () => {
    const { model, requests } = caller('mcp__web__ok', { who: 'there' })
    const events = await run({ model, advanced: { mcpServers: { web: { url: server.url } } } })
    const offered = requests[0]!.tools.map((tool) => tool.name)
    expect(offered).toEqual(expect.arrayContaining(['mcp__web__ok', 'mcp__web__slow']))
    expect(requests[0]!.tools.find((tool) => tool.name === 'mcp__web__ok')!.description).toBe('Answers ok over HTTP')
    expect(resultOf(events).result.toolCalls[0]).toMatchObject({ name: 'mcp__web__ok', output: 'ok there', status: 'success' })
    expect(resultOf(events).result.content).toBe('tool said: ok there')
    expect(server.calls).toEqual(['ok'])
  })

  it('a PreToolUse deny stops the call; the server is never asked', async () => {
    const events = await run({
      model: caller('mcp__web__ok', {}).model,
      advanced: {
        mcpServers: { web: { url: server.url } },
        hooks: [{ id: 'deny-web', type: 'PreToolUse', matcher: '^mcp__web__', handler: () => ({ action: 'abort', reason: 'no HTTP MCP' }) }],
      },
    })
    expect(resultOf(events).result.toolCalls[0]).toMatchObject({ output: 'Tool execution aborted: no HTTP MCP', isError: true })
    expect(server.calls).toEqual([])
  })

  it('sends the configured headers on every request, ${NAME} resolved only from allowedEnvVars', async () => {
    process.env.ARH_MCP_TOKEN = 'token-123'
    try {
      const headers = { Authorization: 'Bearer ${ARH_MCP_TOKEN}', 'X-Team': 'blue' }
      await run({ model: caller('mcp__web__ok', {}).model, advanced: { mcpServers: { web: { url: server.url, headers, allowedEnvVars: ['ARH_MCP_TOKEN'] } } } })
      expect(server.headers.length).toBeGreaterThanOrEqual(3)
      for (const seen of server.headers) expect(seen).toMatchObject({ authorization: 'Bearer token-123', 'x-team': 'blue' })
      const notAllowed = createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { mcpServers: { web: { url: server.url, headers } } } })
      await expect(notAllowed).rejects.toThrow(ConfigError)
      await expect(notAllowed).rejects.toThrow(
        'advanced.mcpServers.web.headers.Authorization uses ${ARH_MCP_TOKEN}, which is not in advanced.mcpServers.web.allowedEnvVars',
      )
    } finally {
      delete process.env.ARH_MCP_TOKEN
    }
  })

  it('a server URL that refuses connections fails createAgent with a ConfigError naming it', async () => {
    const closed = await startMcpHttpServer()
    await closed.close()
    const refused = createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { mcpServers: { gone: { url: closed.url } } } })
    await expect(refused).rejects.toThrow(ConfigError)
    await expect(refused).rejects.toThrow(/advanced\.mcpServers\.gone: the MCP server could not start/)
  })

  it('abort during a slow call ends the run at once and cancels the call on the server', async () => {
    const agent = await createAgent({ model: caller('mcp__web__slow', {}).model, advanced: { mcpServers: { web: { url: server.url } } } })
    try {
      const response = await agent.send('go')
      const started = Date.now()
      const outcome = response.result()
      await until(() => server.calls.includes('slow'), 5000)
      agent.abort(new Error('stop now'))
      await expect(outcome).rejects.toThrow('stop now')
      expect(Date.now() - started).toBeLessThan(5000)
      await until(() => server.cancelled.length > 0, 5000)
    } finally {
      await agent.close()
    }
  })
})
