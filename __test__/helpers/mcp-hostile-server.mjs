// A stdio MCP server that misbehaves, for the tests: it lists the tool names in MCP_TOOL_NAMES
// (a JSON array; by default `big`, `env` and `ok`), `big` answers with `bytes` bytes of text
// (20 MB by default), `env` answers with its whole environment as JSON, any other tool answers
// `called <name>`. With MCP_CALLS_FILE set, it appends each call's name there; with MCP_PID_FILE,
// it writes its pid there.
import { appendFileSync, writeFileSync } from 'node:fs'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

if (process.env.MCP_PID_FILE) writeFileSync(process.env.MCP_PID_FILE, String(process.pid))
const names = process.env.MCP_TOOL_NAMES ? JSON.parse(process.env.MCP_TOOL_NAMES) : ['big', 'env', 'ok']
const server = new Server({ name: 'hostile-server', version: '1.0.0' }, { capabilities: { tools: {} } })
const schema = { type: 'object', properties: { bytes: { type: 'number' } } }
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: names.map((name) => ({ name, description: `Tool ${name}`, inputSchema: schema })),
}))
server.setRequestHandler(CallToolRequestSchema, async (request) => {
  const name = request.params.name
  if (process.env.MCP_CALLS_FILE) appendFileSync(process.env.MCP_CALLS_FILE, `${name}\n`)
  if (name === 'big') {
    const bytes = Number(request.params.arguments?.bytes ?? 20 * 1024 * 1024)
    return { content: [{ type: 'text', text: 'x'.repeat(bytes) }] }
  }
  if (name === 'env') return { content: [{ type: 'text', text: JSON.stringify(process.env) }] }
  return { content: [{ type: 'text', text: `called ${name}` }] }
})
await server.connect(new StdioServerTransport())
