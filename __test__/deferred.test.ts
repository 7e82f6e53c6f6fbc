// Deferred results (SPEC §8.2), as a user runs them: a tool returns `deferred()`, the run pauses
// with a `pendingApprovals` entry of `reason: 'deferred'`; `completeToolCall` publishes the result
// once through the store, after the session's stored after-controls and PostToolUse webhooks; the
// first final result wins (a denial included); `resume()` goes on with it. Written from the
// contract and docs/approvals.md, not the implementation.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { completeToolCall, createAgent, deferred, defineTool, resumeAgent, scriptedModel, type AgentHook, type ScriptRequest } from '../index.js'
import { json, startServer, type ModelServer } from './helpers/server.js'

let dir = ''
let receiver: ModelServer
const store = () => ({ sqlite: join(dir, 'sessions.db') })

beforeAll(async () => {
  receiver = await startServer()
})
afterAll(async () => {
  await receiver.close()
})
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'arh-deferred-'))
  receiver.requests.length = 0
})
afterEach(() => {
  rmSync(dir, { recursive: true, force: true })
})

const sendEmail = defineTool<{ to: string }>({
  name: 'send_email',
  parameters: { type: 'object', properties: { to: { type: 'string' } }, required: ['to'] },
  execute: () => deferred(),
})

/** Calls send_email once, then answers with what the tool said; keeps every request. */
function model(requests: ScriptRequest[] = []) {
  return scriptedModel((request) => {
    requests.push(structuredClone(request))
    const result = request.messages.find((message) => message.role === 'tool')
    if (!result) return { toolCalls: [{ id: 'call_mail', name: 'send_email', input: { to: 'ops@example.com' } }] }
    return { text: `tool said: ${String(result.content)}` }
  })
}

/** A new agent whose first run pauses on the deferred call: its session id. */
async function paused(hooks: AgentHook[] = []) {
  const agent = await createAgent({ model: model(), tools: [sendEmail], advanced: { store: store(), hooks } })
  const result = await (await agent.send('mail ops')).result()
  await agent.close()
  return { sessionId: agent.sessionId, result }
}

async function resumed(sessionId: string, requests: ScriptRequest[] = []) {
  const agent = await resumeAgent({ sessionId, model: model(requests), tools: [sendEmail], advanced: { store: store() } })
  try {
    return await (await agent.resume()).result()
  } finally {
    await agent.close()
  }
}

describe('deferred results', () => {
  it('a deferred call pauses the run; completeToolCall publishes its result once and resume goes on with it', async () => {
    const { sessionId, result } = await paused()
    expect(result.stopReason).toBe('interrupted')
    expect(result.pendingApprovals).toMatchObject([{ toolCallId: 'call_mail', toolName: 'send_email', input: { to: 'ops@example.com' }, reason: 'deferred' }])

    const first = await completeToolCall({ store: store(), sessionId, toolCallId: 'call_mail', result: 'queued as #42' })
    expect(first).toEqual({ published: true, result: { output: 'queued as #42', isError: false } })
    // Later completions change nothing and get the first result back.
    const second = await completeToolCall({ store: store(), sessionId, toolCallId: 'call_mail', result: 'queued as #43' })
    expect(second).toEqual({ published: false, result: { output: 'queued as #42', isError: false } })

    const requests: ScriptRequest[] = []
    const after = await resumed(sessionId, requests)
    expect(after).toMatchObject({ stopReason: 'done', content: 'tool said: queued as #42' })
    expect(requests[0]!.messages.filter((message) => message.role === 'tool')).toEqual([{ role: 'tool', tool_call_id: 'call_mail', content: 'queued as #42' }])
  })

  it('the stored PostToolUse webhook hears the published result, and an after-control denial is the result that stands', async () => {
    receiver.reply((req, res) => (req.url === '/control' ? json({ decision: 'deny', reason: 'mail is off today' })(req, res) : void res.writeHead(204).end()))
    const hooks: AgentHook[] = [
      { id: 'gate', type: 'afterToolCall', webhook: { url: `${receiver.url}/control`, responseHandling: 'toolCall' } },
      { id: 'audit', type: 'PostToolUseFailure', webhook: { url: `${receiver.url}/audit` } },
    ]
    const { sessionId } = await paused(hooks)
    const completed = await completeToolCall({ store: store(), sessionId, toolCallId: 'call_mail', result: 'sent' })
    expect(completed).toEqual({ published: true, result: { output: 'mail is off today', isError: true } })
    const control = receiver.requests.find((request) => request.url === '/control')!
    expect(control.body).toMatchObject({ event: 'PostToolUse', hookId: 'gate', toolName: 'send_email', toolCallId: 'call_mail', toolOutput: 'sent', result: { content: 'sent', success: true } })
    // The denied result is a failure: PostToolUseFailure hears it, with the denial as the output.
    const audit = receiver.requests.find((request) => request.url === '/audit')!
    expect(audit.body).toMatchObject({ event: 'PostToolUseFailure', hookId: 'audit', toolCallId: 'call_mail', toolOutput: 'mail is off today', result: { success: false } })
    // The denial was first: a later completion cannot replace it.
    expect(await completeToolCall({ store: store(), sessionId, toolCallId: 'call_mail', result: 'sent after all' })).toMatchObject({ published: false, result: { output: 'mail is off today', isError: true } })
    expect(await resumed(sessionId)).toMatchObject({ stopReason: 'done', content: 'tool said: mail is off today' })
  })

  it('a call that is not waiting for a deferred result is refused by name', async () => {
    const { sessionId } = await paused()
    await expect(completeToolCall({ store: store(), sessionId, toolCallId: 'call_other', result: 'x' })).rejects.toMatchObject({
      code: 'APPROVAL_NOT_PENDING',
      message: 'Tool call call_other is not waiting for a deferred result',
    })
    await expect(completeToolCall({ store: store(), sessionId: 'no-such-session', toolCallId: 'call_mail', result: 'x' })).rejects.toMatchObject({ code: 'SESSION_NOT_FOUND' })
  })
})
