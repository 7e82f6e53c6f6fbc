// The MCP server the mcp benchmark calls over stdio: one tool, `echo`, answering with its input's
// `i` at once (so the figure is the round trip, not the tool's work).
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const server = new Server({ name: 'bench-server', version: '1.0.0' }, { capabilities: { tools: {} } })
server.setRequestHandler(ListToolsRequestSchema, async () => ({
  tools: [{ name: 'echo', description: 'Echoes i', inputSchema: { type: 'object', properties: { i: { type: 'number' } } } }],
}))
server.setRequestHandler(CallToolRequestSchema, async (request) => ({ content: [{ type: 'text', text: `ok ${request.params.arguments?.i}` }] }))
await server.connect(new StdioServerTransport())
