// An example policy server for webhook hooks. It answers result controls:
//   beforeToolCall: denies shell commands that would wipe or format disks;
//   afterToolCall:  withholds results that contain a private key;
// and logs every notification it receives.
//
//   node examples/policy-server.mjs            listens on 127.0.0.1:8787 (PORT to change)
//
// Point an agent at it with hooks like:
//   { id: 'policy', type: 'beforeToolCall', webhook: { url: 'http://127.0.0.1:8787/hooks',
//     responseHandling: 'toolCall', onError: 'block',
//     headers: { Authorization: 'Bearer ${POLICY_TOKEN}' }, allowedEnvVars: ['POLICY_TOKEN'] } }
import { createServer } from 'node:http'
import { fileURLToPath } from 'node:url'

const DANGEROUS = [/rm\s+-rf\s+\//, /mkfs/, /dd\s+if=/]

/** Decides one hook request; returns the JSON to answer, or null for "no opinion" (204). */
export function decide(event) {
  if (event.hookType === 'beforeToolCall' || event.event === 'PreToolUse') {
    const command = String(event.toolInput?.command ?? '')
    if (DANGEROUS.some((pattern) => pattern.test(command))) return { decision: 'deny', reason: `Policy: "${command}" is not allowed` }
    return { decision: 'allow' }
  }
  if (event.hookType === 'afterToolCall' || event.event === 'PostToolUse') {
    if (String(event.result?.content ?? '').includes('PRIVATE KEY')) return { decision: 'deny', reason: 'Policy: the result contained a private key' }
    return { decision: 'allow' }
  }
  return null
}

export function createPolicyServer({ token, log = console.log } = {}) {
  return createServer(async (req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405).end()
    if (token && req.headers.authorization !== `Bearer ${token}`) return void res.writeHead(401).end()
    let text = ''
    for await (const chunk of req) text += chunk
    let event
    try {
      event = JSON.parse(text)
    } catch {
      return void res.writeHead(400).end()
    }
    const answer = decide(event)
    log(`${event.hookType} ${event.toolName ?? ''} -> ${answer ? answer.decision : 'noted'}`)
    if (!answer) return void res.writeHead(204).end()
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer))
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.env.PORT ?? 8787)
  createPolicyServer({ token: process.env.POLICY_TOKEN }).listen(port, '127.0.0.1', () => console.log(`policy server on http://127.0.0.1:${port}/hooks`))
}
