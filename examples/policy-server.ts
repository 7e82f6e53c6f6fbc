// A policy server for webhook hooks, and an agent that asks it before every shell command: the
// server answers `deny` for commands that would wipe a disk, and the call fails with its reason.
// If the server cannot be reached, `onError: 'block'` blocks the call rather than letting it run.
//
//   npx tsc && node dist/policy-server.js
//
// (examples/policy-server.mjs is a fuller standalone server, also checking results for keys.)
import { createServer } from 'node:http'
import { createAgent, defineTool, scriptedModel } from 'agent-runtime-hooks'

/** What a beforeToolCall webhook is sent (a part of it: docs/webhooks.md lists every field). */
interface ToolCallEvent {
  hookType: string
  toolName: string
  toolInput: { command?: string }
}

const DANGEROUS = [/rm\s+-rf\s+\//, /\bmkfs\b/, /\bdd\s+if=/]

function decide(event: ToolCallEvent): { decision: 'allow' | 'deny'; reason?: string } {
  const command = event.toolInput.command ?? ''
  return DANGEROUS.some((pattern) => pattern.test(command)) ? { decision: 'deny', reason: `Policy: "${command}" is not allowed` } : { decision: 'allow' }
}

const policy = createServer(async (request, response) => {
  if (request.headers.authorization !== `Bearer ${process.env.POLICY_TOKEN}`) return void response.writeHead(401).end()
  let text = ''
  for await (const chunk of request) text += chunk
  const event = JSON.parse(text) as ToolCallEvent
  const answer = decide(event)
  console.log(`policy: ${event.toolName} ${JSON.stringify(event.toolInput)} -> ${answer.decision}`)
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer))
})
await new Promise<void>((listening) => policy.listen(0, '127.0.0.1', listening))
const address = policy.address()
const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/hooks`
process.env.POLICY_TOKEN ??= 'a token the agent and the server share'

const bash = defineTool<{ command: string }>({
  name: 'Bash',
  parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
  execute: ({ command }) => `ran ${command}`,
})

const agent = await createAgent({
  model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'ls' } }, { name: 'Bash', input: { command: 'rm -rf /' } }] }, { text: 'One ran, one was denied.' }]),
  tools: [bash],
  advanced: {
    hooks: [
      {
        id: 'policy',
        type: 'beforeToolCall',
        matcher: '^Bash$',
        // The token is read from the environment when the request is sent, never stored.
        webhook: { url, responseHandling: 'toolCall', onError: 'block', timeout: 5, headers: { Authorization: 'Bearer ${POLICY_TOKEN}' }, allowedEnvVars: ['POLICY_TOKEN'] },
      },
    ],
  },
})
const result = await (await agent.send('tidy up')).result()
for (const call of result.toolCalls) console.log(`${JSON.stringify(call.input)}: ${call.output}`)
console.log(result.result)
await agent.close()
policy.close()
