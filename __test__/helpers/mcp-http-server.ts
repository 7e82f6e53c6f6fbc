// A streamable-HTTP MCP server for the tests, on 127.0.0.1: `ok` answers, `slow` answers after
// 30 s unless cancelled, `echo-headers` fails with the request's headers in its text (as a hostile
// server would). It keeps the headers of every request and the reason of each cancelled call.
import { randomUUID } from 'node:crypto'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, ListToolsRequestSchema, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js'

export interface McpHttpServer {
  url: string
  headers: IncomingHttpHeaders[]
  calls: string[]
  cancelled: string[]
  close(): Promise<void>
}

function mcpServer(recorded: Pick<McpHttpServer, 'calls' | 'cancelled'>) {
  const server = new Server({ name: 'http-test-server', version: '1.0.0' }, { capabilities: { tools: {} } })
  const empty = { type: 'object' as const, properties: {} }
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: 'ok', description: 'Answers ok over HTTP', inputSchema: { type: 'object' as const, properties: { who: { type: 'string' } } } },
      { name: 'slow', description: 'Answers after 30 s', inputSchema: empty },
      { name: 'echo-headers', description: 'Fails, quoting the request headers', inputSchema: empty },
      { name: 'big', description: 'Answers `bytes` characters', inputSchema: { type: 'object' as const, properties: { bytes: { type: 'number' } } } },
    ],
  }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    recorded.calls.push(request.params.name)
    if (request.params.name === 'echo-headers') {
      return { content: [{ type: 'text', text: `bad request: ${JSON.stringify(extra.requestInfo?.headers)}` }], isError: true }
    }
    if (request.params.name === 'big') return { content: [{ type: 'text', text: 'x'.repeat(Number(request.params.arguments?.bytes)) }] }
    if (request.params.name === 'ok') return { content: [{ type: 'text', text: `ok ${String(request.params.arguments?.who ?? '')}`.trim() }] }
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve({ content: [{ type: 'text', text: 'slow done' }] }), 30_000)
      extra.signal.addEventListener('abort', () => {
        clearTimeout(timer)
        recorded.cancelled.push(String(extra.signal.reason ?? 'cancelled'))
        resolve({ content: [{ type: 'text', text: 'cancelled' }] })
      })
    })
  })
  return server
}

export async function startMcpHttpServer(): Promise<McpHttpServer> {
  const recorded = { headers: [] as IncomingHttpHeaders[], calls: [] as string[], cancelled: [] as string[] }
  const sessions = new Map<string, StreamableHTTPServerTransport>()
  const http = createServer(async (req, res) => {
    recorded.headers.push(req.headers)
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = chunks.length > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined
    const id = req.headers['mcp-session-id']
    let transport = typeof id === 'string' ? sessions.get(id) : undefined
    if (!transport && req.method === 'POST' && isInitializeRequest(body)) {
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (session) => void sessions.set(session, created),
      })
      created.onclose = () => {
        if (created.sessionId) sessions.delete(created.sessionId)
      }
      await mcpServer(recorded).connect(created)
      transport = created
    }
    if (!transport) {
      res.writeHead(400, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'no session' }, id: null }))
      return
    }
    await transport.handleRequest(req, res, body)
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const { port } = http.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    ...recorded,
    async close() {
      for (const transport of sessions.values()) await transport.close()
      http.closeAllConnections()
      await new Promise<void>((resolve) => http.close(() => resolve()))
    },
  }
}
