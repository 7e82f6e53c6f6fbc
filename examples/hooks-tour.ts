// The README's hooks tour as a program: `npm test` compiles it in a `tsc --init` project and
// runs it.
import { createAgent, defineTool, HookEvent, scriptedModel, type HookCallback } from 'agent-runtime-hooks'

const bash = defineTool<{ command: string }>({ name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }, execute: ({ command }) => `ran ${command}` })
const readFile = defineTool<{ path: string }>({ name: 'Read', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }, kind: 'readonly', execute: ({ path }) => `contents of ${path}` })
const auditLog: string[] = []
async function flushAuditLog(): Promise<void> {
  auditLog.length = 0
}

const guard: HookCallback = async (input) => {
  const command = String(input.toolInput?.command ?? '')
  return input.toolName === 'Bash' && /rm\s+-rf|mkfs/.test(command)
    ? { action: 'abort', reason: `Blocked: ${command}` }
    : { action: 'continue' }
}

const redact: HookCallback = async (input) => ({
  action: 'continue',
  modifiedOutput: String(input.toolOutput).replace(/SECRET_KEY=\w+/g, 'SECRET_KEY=***'),
})

const tenant: HookCallback = async (input) => ({
  action: 'continue',
  modifiedInput: { userPrompt: `[tenant:acme]\n${input.userPrompt}` },
})

export async function tour(): Promise<string> {
  const agent = await createAgent({
    model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'rm -rf /' } }] }, { text: 'blocked it' }]),
    tools: [bash, readFile],
    advanced: {
      hooks: {
        [HookEvent.PreToolUse]: [guard],
        [HookEvent.PostToolUse]: [redact],
        [HookEvent.UserPromptSubmit]: [tenant],
        [HookEvent.SessionEnd]: [async () => (await flushAuditLog(), { action: 'continue' })],
      },
      hookTimeoutMs: 5_000,
      permission: async (request) => (request.kind === 'readonly' ? 'allow' : { behavior: 'deny', message: 'read-only agent' }),
    },
  })
  const text = await (await agent.send('clean up')).text()
  await agent.close()
  return text
}

console.log(await tour())
