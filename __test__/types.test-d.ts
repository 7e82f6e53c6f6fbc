// Compile-time checks of index.d.ts (run by `tsc` in `npm test`): the types accept what the
// contract allows and reject what it does not.
import { createAgent, defineTool, scriptedModel, type Agent, type AgentHook, type HookObject, type HookTypeName, type AgentOptions, type FinishReason, type HookCallback, type HookInput, type HookOutput, type PromptResult, type StreamEvent } from '../index.js'

export const allowed: AgentOptions[] = [
  { model: 'gpt-4o-mini', provider: 'deepseek' },
  { model: scriptedModel([{ text: 'hi' }]), advanced: { hooks: { PreToolUse: [() => ({ action: 'skip', reason: 'r' })] } } },
]

// @ts-expect-error — not a provider
export const badProvider: AgentOptions = { model: 'm', provider: 'mistral' }

// @ts-expect-error — not a hook action
export const badAction: HookOutput = { action: 'proceed' }

// @ts-expect-error — not a tool kind
export const badKind = defineTool({ name: 't', kind: 'admin', execute: () => 'x' })

// @ts-expect-error — not a hook type
export const badHookType: AgentHook = { id: 'x', type: 'beforeEverything', handler: () => undefined }

export function stopReasons(result: PromptResult): 'done' | 'max_tokens' | 'max_turns' | 'aborted' | 'interrupted' | 'error' {
  // @ts-expect-error — not a stop reason
  const impossible: PromptResult['stopReason'] = 'paused'
  void impossible
  return result.stopReason
}

export async function narrowing(options: AgentOptions): Promise<string> {
  const agent = await createAgent(options)
  let text = ''
  for await (const event of (await agent.send('go')).stream()) {
    const typed: StreamEvent = event
    if (typed.type === 'content') text += typed.delta
    // @ts-expect-error — a tool_use event has no delta
    if (typed.type === 'tool_use') text += typed.delta
  }
  return text
}

// A bare callback gets its own event's input; a HookInput narrows on `event`.
export const narrowedHooks: AgentOptions['advanced'] = {
  hooks: {
    PreToolUse: [(input) => ({ action: input.toolCallId.length > 0 && input.stepIndex >= 0 ? 'continue' : 'abort' })],
    PermissionRequest: [(input) => ({ action: input.affectedPaths.length > 0 && input.toolKind === 'write' ? 'skip' : 'continue' })],
    TaskCompleted: [(input) => ({ action: input.success ? 'continue' : 'abort', reason: input.reason })],
    // @ts-expect-error — UserPromptSubmit has no toolCallId: it may be undefined
    UserPromptSubmit: [(input) => ({ action: 'continue', reason: input.toolCallId.toUpperCase() })],
  },
}

export function fieldsOf(input: HookInput): string {
  if (input.event === 'PostToolUseFailure') return `${input.error.message} ${input.result.content} ${input.mocked}`
  if (input.event === 'SessionStart') return String(input.isResume)
  // @ts-expect-error — isResume is not a field of every event
  const resumed: boolean = input.isResume
  void resumed
  // Blade's loose reading still type-checks: the tool fields are optional on every event.
  return input.toolName ?? input.sessionId
}

// A callback written against the whole union fits every event.
export const anyEvent: HookCallback = (input) => ({ action: input.event === 'SessionEnd' && input.reason === 'other' ? 'continue' : 'continue' })
export const everywhere: AgentOptions['advanced'] = { hooks: { PreToolUse: [anyEvent], SessionEnd: [anyEvent] } }

export async function toolChoices(agent: Agent): Promise<void> {
  await agent.send('x', { toolChoice: 'required' })
  await agent.send('x', { toolChoice: { name: 'get_weather' } })
  // @ts-expect-error — not a tool choice
  await agent.send('x', { toolChoice: 'any' })
  const options: AgentOptions = { model: 'm', toolChoice: 'none' }
  void options
}

export function finishReasons(event: StreamEvent): FinishReason | undefined {
  return event.type === 'turn_end' ? event.finishReason : undefined
}

// Blade's session API: a provider object, Blade's permission forms; a provider name is not one.
import { createSession, type InputSubmission, type SessionOptions } from '../index.js'
export const sessionOptions: SessionOptions = {
  provider: { type: 'azure-openai', apiKey: 'k', baseUrl: 'https://res.openai.azure.com', apiVersion: '2024-08-01-preview' },
  model: 'deploy',
  permissionMode: 'plan',
  canUseTool: async (_name, _input, { toolKind }) => (toolKind === 'readonly' ? { behavior: 'allow' } : { behavior: 'deny', message: 'no' }),
}
// @ts-expect-error — a session's provider is an object
export const badSessionProvider: SessionOptions = { provider: 'openai', model: 'm' }
// @ts-expect-error — not a priority
export const badPriority = async () => (await createSession(sessionOptions)).send('x', { priority: 'soon' })
export const submitted = async (): Promise<InputSubmission> => (await createSession(sessionOptions)).send('x', { priority: 'later' })

// Hook objects' handlers get the input of the event their `type` names, alias or not.
export const typedHandlers: AgentHook[] = [
  { id: 'pre', type: 'beforeToolCall', handler: (event) => void event.mock({ content: 'canned', success: true }) },
  { id: 'post', type: 'PostToolUse', handler: (event) => void (event.toolOutput satisfies string) },
  { id: 'step', type: 'afterStep', handler: (event) => void (event.totalTokens satisfies number) },
  { id: 'fail', type: 'onError', handler: (event) => void (event.errorMessage satisfies string) },
  { id: 'ask', type: 'beforeHumanIntervention', handler: (event) => void (event.pendingTools[0]?.toolName satisfies string | undefined) },
  { id: 'child', type: 'beforeCallAgent', handler: (event) => void (event.instruction satisfies string) },
  { id: 'queued', type: 'afterStep', webhook: { url: 'https://policy.example/hooks', delivery: 'queue' } },
]

// @ts-expect-error — a StepStart input has no tool name
export const stepHasNoTool: AgentHook = { id: 's', type: 'beforeStep', handler: (event) => void event.toolName }

// @ts-expect-error — only PreToolUse handlers can mock
export const postCannotMock: AgentHook = { id: 'p', type: 'afterToolCall', handler: (event) => void event.mock('x') }

// Listed under an event, a hook object's handler and a bare callback get that event's input.
export const typedInline: AgentOptions['advanced'] = {
  hooks: {
    PostToolUse: [{ id: 'log', handler: (event) => void (event.result.success satisfies boolean) }, (input) => ({ action: 'continue', reason: input.toolOutput })],
    afterCompact: [{ id: 'compacted', type: 'PostCompact', handler: (event) => void (event.summary satisfies string) }],
  },
}

// @ts-expect-error — a hook listed under PostToolUse cannot say it is a PreToolUse hook
export const misfiled: AgentOptions['advanced'] = { hooks: { PostToolUse: [{ id: 'x', type: 'PreToolUse', handler: () => undefined }] } }

// A function building hook objects of a type it is given is generic in that type.
export function failing<T extends HookTypeName>(type: T): HookObject<T> {
  return { id: `fail-${type}`, type, handler: () => ({ action: 'abort', reason: type }) }
}
export const built: AgentHook[] = [failing('SessionStart'), failing('onCompactError')]
