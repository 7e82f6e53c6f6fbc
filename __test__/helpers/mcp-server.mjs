// A small stdio MCP server for the tests: `ok` answers, `fail` answers `isError: true`, `crash`
// exits mid-call, `slow` answers after 30 s unless cancelled. With MCP_PID_FILE set, it writes its
// pid there (to check that close() stops it); with MCP_CANCEL_FILE, what a cancelled call was told.
// With MCP_EXTRA set it also lists `big` (answers `bytes` characters) and `ordered` (a schema whose
// keys are not in alphabetical order).
import { writeFileSync } from 'node:fs'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

if (process.env.MCP_PID_FILE) writeFileSync(process.env.MCP_PID_FILE, String(process.pid))
const server = new Server({ name: 'test-server', version: '1.0.0' }, { capabilities: { tools: {} } })
const empty = { type: 'object', properties: {} }
const extra = [
  { name: 'big', description: 'Answers `bytes` characters', inputSchema: { type: 'object', properties: { bytes: { type: 'number' } } } },
  {
    name: 'ordered',
    description: 'A schema in its author’s order',
    inputSchema: {
      type: 'object',
      required: ['zeta'],
      properties: { zeta: { type: 'string', description: 'last letter' }, alpha: { type: 'number', minimum: 0 }, mid: { type: 'boolean' } },
      additionalProperties: false,
    },
  },
]
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [
    { name: 'ok', description: 'Answers ok', inputSchema: empty },
    { name: 'fail', description: 'Reports an error', inputSchema: empty },
    { name: 'crash', description: 'Exits mid-call', inputSchema: empty },
    { name: 'slow', description: 'Answers after 30 s', inputSchema: empty },
    ...(process.env.MCP_EXTRA ? extra : []),
  ],
}))
server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
  switch (request.params.name) {
    case 'ok':
      return { content: [{ type: 'text', text: 'ok' }, { type: 'text', text: 'done' }] }
    case 'fail':
      return { content: [{ type: 'text', text: 'the disk is full' }], isError: true }
    case 'crash':
      setTimeout(() => process.exit(3), 10)
      return new Promise(() => {})
    case 'slow':
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve({ content: [{ type: 'text', text: 'slow done' }] }), 30_000)
        extra.signal.addEventListener('abort', () => {
          clearTimeout(timer)
          if (process.env.MCP_CANCEL_FILE) writeFileSync(process.env.MCP_CANCEL_FILE, String(extra.signal.reason ?? 'cancelled'))
          resolve({ content: [{ type: 'text', text: 'cancelled' }] })
        })
      })
    case 'big':
      return { content: [{ type: 'text', text: 'x'.repeat(request.params.arguments.bytes) }] }
    case 'ordered':
      return { content: [{ type: 'text', text: JSON.stringify(request.params.arguments) }] }
    default:
      throw new Error(`unknown tool ${request.params.name}`)
  }
})
await server.connect(new StdioServerTransport())
