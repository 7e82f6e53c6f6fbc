// An approval server: an agent's `deploy` call pauses for a person, the pause is kept in SQLite,
// and a small HTTP server lists what waits and takes the decision; the run then goes on.
//
//   npx tsc && node dist/approval-server.js          runs one approval end to end and exits
//   node dist/approval-server.js --serve             keeps listening (PORT, default 8788):
//     curl localhost:8788/approvals
//     curl -X POST localhost:8788/approvals/<toolCallId>/approve -d '{"token":"…"}'
//
// With `approvalSecret` every pending approval carries a token, and an approval without the
// right one is refused: whoever relays the list cannot change what runs (docs/approvals.md).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createAgent, defineTool, scriptedModel, SdkError } from 'agent-runtime-hooks'

const deploy = defineTool<{ env: string }>({
  name: 'deploy',
  parameters: { type: 'object', properties: { env: { type: 'string' } }, required: ['env'] },
  kind: 'execute',
  execute: ({ env }) => `deployed to ${env}`,
})

const agent = await createAgent({
  model: scriptedModel([{ toolCalls: [{ name: 'deploy', input: { env: 'prod' } }] }, { text: 'Deployed.' }]),
  tools: [deploy],
  advanced: {
    permission: 'default', // asks before anything that is not read-only
    approvalSecret: process.env.APPROVAL_SECRET ?? 'change me: a secret the agent and this server share',
    store: { sqlite: join(mkdtempSync(join(tmpdir(), 'approvals-')), 'sessions.db') },
  },
})

async function body(request: IncomingMessage): Promise<Record<string, unknown>> {
  let text = ''
  for await (const chunk of request) text += chunk
  const parsed: unknown = text ? JSON.parse(text) : {}
  return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : {}
}

function answer(response: ServerResponse, status: number, value: unknown): void {
  response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value))
}

/** GET /approvals; POST /approvals/<id>/approve { token } or /reject { reason }. */
async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
  const [, collection, id, decision] = (request.url ?? '').split('/')
  if (collection !== 'approvals') return answer(response, 404, { error: 'not found' })
  if (request.method === 'GET' && !id) return answer(response, 200, agent.pendingApprovals)
  if (request.method !== 'POST' || !id || (decision !== 'approve' && decision !== 'reject')) return answer(response, 405, { error: 'POST /approvals/<id>/approve or /reject' })
  const given = await body(request)
  try {
    if (decision === 'approve') await agent.approve(id, { token: typeof given.token === 'string' ? given.token : undefined })
    else await agent.reject(id, { reason: typeof given.reason === 'string' ? given.reason : undefined })
  } catch (error) {
    // APPROVAL_TOKEN_INVALID, APPROVAL_NOT_PENDING, …: the decision is refused, nothing runs.
    return answer(response, 409, { error: error instanceof SdkError ? error.code : 'ERROR', message: (error as Error).message })
  }
  if (agent.pendingApprovals.length > 0) return answer(response, 202, { waiting: agent.pendingApprovals.length })
  const result = await (await agent.resume()).result()
  answer(response, 200, { stopReason: result.stopReason, text: result.result, outputs: result.toolCalls.map((call) => call.output) })
}

const server = createServer((request, response) => {
  route(request, response).catch((error: Error) => answer(response, 500, { error: error.message }))
})

const paused = await (await agent.send('ship it')).result()
console.log(`run ${paused.stopReason}; waiting: ${paused.pendingApprovals?.map((call) => `${call.toolName} ${JSON.stringify(call.input)}`).join(', ')}`)

if (process.argv.includes('--serve')) {
  server.listen(Number(process.env.PORT ?? 8788), '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + (process.env.PORT ?? 8788)))
} else {
  // The demo: a person's client, over real HTTP.
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening))
  const address = server.address()
  const base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/approvals`
  const [first] = (await (await fetch(base)).json()) as Array<{ toolCallId: string; token: string }>
  if (!first) throw new Error('nothing is waiting')
  const forged = await fetch(`${base}/${first.toolCallId}/approve`, { method: 'POST', body: JSON.stringify({ token: 'forged' }) })
  console.log(`forged token: ${forged.status} ${((await forged.json()) as { error: string }).error}`)
  const approved = await fetch(`${base}/${first.toolCallId}/approve`, { method: 'POST', body: JSON.stringify({ token: first.token }) })
  console.log(`approved: ${approved.status} ${JSON.stringify(await approved.json())}`)
  server.close()
  await agent.close()
}
