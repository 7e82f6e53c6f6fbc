// MCP servers are not ours (SPEC §11): a streamable-HTTP server that echoes our request headers
// into its errors, a stdio server that answers with more than 16 MiB, one that prints its
// environment, and tool names that would make one name stand for two tools.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { mkdtempSync, readFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ConfigError, createAgent, defineTool, scriptedModel, type JsonObject, type LogEntry } from '../index.js'
import { startMcpHttpServer, type McpHttpServer } from './helpers/mcp-http-server.js'
import { until } from './helpers/server.js'

const here = dirname(fileURLToPath(import.meta.url))
const hostile = (env: Record<string, string> = {}) => ({
  command: process.execPath,
  args: [join(here, 'helpers/mcp-hostile-server.mjs')],
  env,
})

/** Calls each tool in turn, one per turn, then answers `done`. */
function calling(...calls: Array<{ name: string; input?: JsonObject }>) {
  return scriptedModel((request) => {
    const made = request.messages.filter((message) => message.role === 'tool').length
    const next = calls[made]
    if (!next) return { text: 'done' }
    return { toolCalls: [{ id: `c${made}`, name: next.name, input: next.input ?? {} }] }
  })
}

function alive(pid: number) {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

const LITERAL = 'literal-header-secret-4711'
const FROM_ENV = 'env-template-secret-0815'
const headers = { 'X-Api-Key': LITERAL, Authorization: 'Bearer ${ARH_MCP_SECRET}' }

/** A hostile endpoint: every request is refused, quoting its headers (an HTTP 401, or a JSON-RPC error). */
async function echoingEndpoint(mode: 'http' | 'rpc') {
  const http = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const quoted = `you sent ${JSON.stringify(req.headers)}`
    if (mode === 'http') {
      res.writeHead(401, { 'content-type': 'text/plain' }).end(quoted)
      return
    }
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {}
    if (body.id === undefined) {
      res.writeHead(202).end()
      return
    }
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ jsonrpc: '2.0', id: body.id, error: { code: -32600, message: quoted } }))
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const { port } = http.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () => {
      http.closeAllConnections()
      return new Promise<void>((resolve) => http.close(() => resolve()))
    },
  }
}

function expectMasked(text: string | undefined) {
  expect(text).toBeDefined()
  expect(text).not.toContain(LITERAL)
  expect(text).not.toContain(FROM_ENV)
  expect(text).toContain('***')
}

describe('MCP header values never appear in errors', () => {
  beforeEach(() => {
    process.env.ARH_MCP_SECRET = FROM_ENV
  })
  afterEach(() => {
    delete process.env.ARH_MCP_SECRET
  })

  for (const mode of ['http', 'rpc'] as const) {
    it(`a server refusing initialize with ${mode === 'http' ? 'an HTTP 401' : 'a JSON-RPC error'} that quotes the headers: the ConfigError shows ***`, async () => {
      const endpoint = await echoingEndpoint(mode)
      try {
        const error = await createAgent({
          model: scriptedModel([{ text: 'x' }]),
          advanced: { mcpServers: { web: { url: endpoint.url, headers, allowedEnvVars: ['ARH_MCP_SECRET'] } } },
        }).catch((caught: unknown) => caught)
        expect(error).toBeInstanceOf(ConfigError)
        const { message, stack } = error as ConfigError
        expect(message).toMatch(/^advanced\.mcpServers\.web: the MCP server could not start: /)
        // The server's words are quoted (so the masking is what hides the values).
        expect(message).toContain('x-api-key')
        for (const text of [message, stack, JSON.stringify(error)]) expectMasked(text)
      } finally {
        await endpoint.close()
      }
    })
  }

  describe('a call that fails quoting the headers', () => {
    let server: McpHttpServer
    beforeEach(async () => {
      server = await startMcpHttpServer()
    })
    afterEach(async () => {
      await server.close()
    })

    it('the call’s error, the result and agent.messages show ***', async () => {
      const agent = await createAgent({
        model: calling({ name: 'mcp__web__echo-headers' }),
        advanced: { mcpServers: { web: { url: server.url, headers, allowedEnvVars: ['ARH_MCP_SECRET'] } } },
      })
      try {
        const result = await (await agent.send('go')).result()
        const call = result.toolCalls[0]!
        expect(call).toMatchObject({ name: 'mcp__web__echo-headers', isError: true })
        expect(call.output).toMatch(/^Tool execution failed: bad request: \{.*"x-api-key":"\*\*\*"/)
        expectMasked(call.output)
        expectMasked(JSON.stringify(await agent.messages))
        // The server did get the values.
        expect(server.headers.at(-1)).toMatchObject({ 'x-api-key': LITERAL, authorization: `Bearer ${FROM_ENV}` })
      } finally {
        await agent.close()
      }
    })
  })
})

describe('stdio MCP results are bounded', () => {
  it('a 20 MB result fails its call at once with the size named; the run goes on and the server still answers', async () => {
    const big = 20 * 1024 * 1024
    const started: number[] = []
    const failed: number[] = []
    const agent = await createAgent({
      model: calling({ name: 'mcp__h__big', input: { bytes: big } }, { name: 'mcp__h__big', input: { bytes: 1_000_000 } }, { name: 'mcp__h__ok' }),
      advanced: {
        mcpServers: { h: hostile() },
        toolTimeoutMs: 15_000,
        hooks: {
          PreToolUse: [() => (started.push(Date.now()), { action: 'continue' })],
          PostToolUseFailure: [() => (failed.push(Date.now()), { action: 'continue' })],
        },
      },
    })
    try {
      const result = await (await agent.send('go')).result()
      const [over, under, ok] = result.toolCalls
      expect(over).toMatchObject({ name: 'mcp__h__big', isError: true })
      const size = /^Tool execution failed: MCP server "h" failed: its answer is (\d+) bytes, over the limit of 16777216 bytes$/.exec(over!.output)
      expect(size).not.toBeNull()
      // The whole line: the text and its JSON-RPC envelope.
      expect(Number(size![1])).toBeGreaterThan(big)
      expect(Number(size![1])).toBeLessThan(big + 200)
      expect(under).toMatchObject({ status: 'success' })
      expect(under!.output).toHaveLength(1_000_000)
      expect(ok).toMatchObject({ status: 'success', output: 'called ok' })
      expect(result.content).toBe('done')
      // The failed call took far less than toolTimeoutMs: nothing waited for it.
      expect(failed).toHaveLength(1)
      expect(failed[0]! - started[0]!).toBeLessThan(7500)
      expect(await agent.mcpServerStatus()).toEqual([{ name: 'h', status: 'connected', toolCount: 3 }])
    } finally {
      await agent.close()
    }
  }, 40_000)
})

describe('stdio MCP servers get a small environment', () => {
  it('only the SDKs’ allow-list and the server’s env reach it: not OPENAI_API_KEY or a webhook token', async () => {
    process.env.OPENAI_API_KEY = 'sk-parent-secret-value'
    process.env.AGENT_HOOK_WEBHOOK_TOKEN = 'webhook-parent-secret'
    try {
      const agent = await createAgent({
        model: calling({ name: 'mcp__h__env' }),
        advanced: { mcpServers: { h: hostile({ MCP_GIVEN: 'given-value' }) } },
      })
      try {
        const result = await (await agent.send('go')).result()
        const seen = JSON.parse(result.toolCalls[0]!.output) as Record<string, string>
        const inherited = ['HOME', 'LOGNAME', 'PATH', 'SHELL', 'TERM', 'USER'].filter((name) => process.env[name] !== undefined)
        expect(Object.keys(seen).sort()).toEqual([...inherited, 'MCP_GIVEN'].sort())
        expect(seen.MCP_GIVEN).toBe('given-value')
        expect(seen.PATH).toBe(process.env.PATH)
        expect(JSON.stringify(seen)).not.toContain('sk-parent-secret-value')
        expect(JSON.stringify(seen)).not.toContain('webhook-parent-secret')
      } finally {
        await agent.close()
      }
    } finally {
      delete process.env.OPENAI_API_KEY
      delete process.env.AGENT_HOOK_WEBHOOK_TOKEN
    }
  })
})

describe('MCP tool names stand for one tool each', () => {
  it('server h with tool b__c and server h__b with tool c: the second is a ConfigError, the first keeps its name', async () => {
    const both = createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: {
        mcpServers: {
          h: hostile({ MCP_TOOL_NAMES: JSON.stringify(['b__c']) }),
          h__b: hostile({ MCP_TOOL_NAMES: JSON.stringify(['c']) }),
        },
      },
    })
    await expect(both).rejects.toThrow(ConfigError)
    await expect(both).rejects.toThrow(
      "advanced.mcpServers.h__b: a server name may not hold '__' or start or end with '_' (tool names would be ambiguous)",
    )
    // Alone, h's tool b__c is mcp__h__b__c, and rules written for that name govern it.
    const calls = join(mkdtempSync(join(tmpdir(), 'arh-mcp-')), 'calls')
    let matched = 0
    const agent = await createAgent({
      model: calling({ name: 'mcp__h__b__c' }, { name: 'mcp__h__b__c' }),
      advanced: {
        mcpServers: { h: hostile({ MCP_TOOL_NAMES: JSON.stringify(['b__c']), MCP_CALLS_FILE: calls }) },
        hooks: [{ id: 'once', type: 'PreToolUse', matcher: '^mcp__h__b__c$', handler: () => (++matched === 2 ? { action: 'abort', reason: 'not twice' } : { action: 'continue' }) }],
      },
    })
    try {
      const result = await (await agent.send('go')).result()
      expect(result.toolCalls.map((call) => call.output)).toEqual(['called b__c', 'Tool execution aborted: not twice'])
      expect(readFileSync(calls, 'utf8')).toBe('b__c\n')
    } finally {
      await agent.close()
    }
  })

  it('a server’s empty, duplicate, newline and 10 KB names are not offered, each logged as a warning', async () => {
    const entries: LogEntry[] = []
    const names = ['ok', '', 'ok', 'a\nb', 'x'.repeat(10 * 1024), 'files.read', 'fine']
    const agent = await createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: { mcpServers: { h: hostile({ MCP_TOOL_NAMES: JSON.stringify(names) }) }, logger: (entry) => void entries.push(entry) },
    })
    try {
      expect((await agent.mcpListTools()).map((tool) => tool.name)).toEqual(['mcp__h__ok', 'mcp__h__fine'])
      expect(entries.map((entry) => [entry.level, entry.message])).toEqual([
        ['warn', 'MCP server "h" lists a tool that is not offered (its name is empty): ""'],
        ['warn', 'MCP server "h" lists a tool that is not offered (it is listed twice): "ok"'],
        ['warn', `MCP server "h" lists a tool that is not offered (its name is not only letters, digits, '_' or '-'): "a\\nb"`],
        ['warn', `MCP server "h" lists a tool that is not offered (its full name would be 10248 characters, more than the 64 model APIs accept): "${'x'.repeat(80)}…"`],
        ['warn', `MCP server "h" lists a tool that is not offered (its name is not only letters, digits, '_' or '-'): "files.read"`],
      ])
    } finally {
      await agent.close()
    }
  })

  it('a tool of your own named like an MCP tool is a ConfigError, and the server is stopped', async () => {
    const pidFile = join(mkdtempSync(join(tmpdir(), 'arh-mcp-')), 'pid')
    const shadow = defineTool({ name: 'mcp__h__ok', description: 'mine', execute: () => 'mine' })
    const created = createAgent({ model: scriptedModel([{ text: 'x' }]), tools: [shadow], advanced: { mcpServers: { h: hostile({ MCP_PID_FILE: pidFile }) } } })
    await expect(created).rejects.toThrow(ConfigError)
    await expect(created).rejects.toThrow('a tool is named "mcp__h__ok", the name of a tool of advanced.mcpServers.h: rename it')
    const pid = Number(readFileSync(pidFile, 'utf8'))
    await until(() => !alive(pid), 10_000)
  })
})
