// MCP: an agent uses the tools of an MCP server (here the reference `server-everything`, run over
// stdio: `npm install @modelcontextprotocol/server-everything`), and a hook sees each MCP call with
// the server it came from. The server's tools are offered as `mcp__<server>__<tool>`.
//
//   npx tsc && node dist/mcp.js
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { createAgent, scriptedModel } from 'agent-runtime-hooks'

const require = createRequire(import.meta.url)
const everything = join(dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')), 'dist', 'index.js')

const agent = await createAgent({
  model: scriptedModel([{ toolCalls: [{ name: 'mcp__everything__echo', input: { message: 'hello over MCP' } }] }, { text: 'The server echoed it.' }]),
  advanced: {
    mcpServers: { everything: { command: process.execPath, args: [everything, 'stdio'] } },
    hooks: [
      {
        id: 'mcp-audit',
        type: 'beforeToolCall',
        matcher: '^mcp__',
        handler: (event) => void console.log(`calling ${event.apiName} on ${event.identifier} (${event.toolSource})`),
      },
    ],
  },
})
const tools = await agent.mcpListTools()
console.log(`${tools.length > 5 ? 'many' : tools.length} tools, echo among them: ${tools.some((tool) => tool.name === 'mcp__everything__echo')}`)
const result = await (await agent.send('echo something')).result()
console.log(`result: ${result.toolCalls[0]?.output}`)
console.log(result.result)
await agent.close()
