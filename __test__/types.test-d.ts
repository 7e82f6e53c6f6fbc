// Compile-time checks of index.d.ts (run by `tsc` in `npm test`): the types accept what the
// contract allows and reject what it does not.
import { createAgent, defineTool, scriptedModel, type AgentHook, type AgentOptions, type HookOutput, type PromptResult, type StreamEvent } from '../index.js'

export const allowed: AgentOptions[] = [
  { model: 'gpt-4o-mini', provider: 'deepseek' },
  { model: scriptedModel([{ text: 'hi' }]), advanced: { hooks: { PreToolUse: [() => ({ action: 'skip', reason: 'r' })] } } },
]

// @ts-expect-error — not a provider
export const badProvider: AgentOptions = { model: 'm', provider: 'gemini' }

// @ts-expect-error — not a hook action
export const badAction: HookOutput = { action: 'proceed' }

// @ts-expect-error — not a tool kind
export const badKind = defineTool({ name: 't', kind: 'admin', execute: () => 'x' })

// @ts-expect-error — not a hook type
export const badHookType: AgentHook = { id: 'x', type: 'beforeEverything', handler: () => undefined }

export function stopReasons(result: PromptResult): 'done' | 'max_turns' | 'aborted' | 'interrupted' | 'error' {
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
