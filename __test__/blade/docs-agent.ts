// A Blade agent program written the way @blade-ai/agent-sdk's docs show it (createAgent, defineTool,
// ToolKind/ToolSideEffect, an async-generator tool, inline hooks, a permission function, the
// replayable AgentResponse read through on(), stream(), text() and textStream(), and `await using`).
//
// Moving it from Blade to agent-runtime-hooks changes only the import line: the original reads
//   import { ... } from '@blade-ai/agent-sdk'
// Everything below it is what a Blade user would have written. `main()` returns what the program
// saw so that __test__/blade-compat.test.ts can check it against Blade's behaviour.
import {
  AbortError,
  completeToolExecution,
  ConfigError,
  createAgent,
  defineTool,
  HookEvent,
  HookTimeoutError,
  HookTimeoutErrorCode,
  PermissionDecision,
  PermissionMode,
  SdkError,
  ToolKind,
  ToolSideEffect,
  type Agent,
  type AgentAdvancedOptions,
  type AgentOptions,
  type AgentPermission,
  type AgentPermissionDecision,
  type AgentPermissionRequest,
  type HookCallback,
  type HookInput,
  type HookOutput,
  type InlineHooks,
  type PromptResult,
  type StreamMessage,
  type TokenUsage,
  type ToolDefinition,
  type ToolResult,
} from 'agent-runtime-hooks'

/** Where the program runs its model: a real OpenAI-compatible endpoint, or any `model` value
 * (e.g. agent-runtime-hooks' `scriptedModel(...)` in tests). */
export type DocsAgentTarget = { baseUrl: string; apiKey?: string; model?: string } | { model: AgentOptions['model'] }

export interface DocsAgentRun {
  sessionId: string
  /** Every event of `response.stream()`, as iterated. */
  events: StreamMessage[]
  /** What the program printed, one line per event. */
  lines: string[]
  /** `await response.text()`. */
  text: string
  /** The deltas seen by `response.on('content', ...)`. */
  onContent: string[]
  /** The deltas of `response.textStream()`. */
  textStream: string[]
  /** `content` of the `result` event (`subtype: 'success'`). */
  resultContent: string | undefined
  usage: TokenUsage | undefined
  supportedModels: unknown
  /** Hook callbacks as they ran: `<event>` or `<event>:<tool>`. */
  hookCalls: string[]
  hookInputs: HookInput[]
  permissionRequests: Array<{ toolName: string; kind: string; input: unknown; affectedPaths: string[] }>
  /** Tool executions as they ran, with what the tool was given. */
  toolRuns: Array<{ name: string; input: unknown; environment: unknown; metadata: unknown }>
  /** The notes the `save_note` tool wrote (its side effect). */
  savedNotes: Record<string, string>
  /** Side effects of the generator tool, counted: how many files it actually read. */
  filesRead: string[]
}

export const FILES: Readonly<Record<string, string>> = { 'notes.txt': 'Buy milk. Call Ada at 5.' }

/** Turns any error into one line the way Blade's docs do it (instanceof on the SDK's classes). */
export function describeError(error: unknown): string {
  if (error instanceof HookTimeoutError && error.code === HookTimeoutErrorCode) {
    return `hook ${error.event} timed out after ${error.timeoutMs}ms`
  }
  if (error instanceof ConfigError) return `configuration error: ${error.message}`
  if (error instanceof AbortError) return `aborted: ${error.message}`
  if (error instanceof SdkError) return `SDK error ${error.code}: ${error.message}`
  return `error: ${error instanceof Error ? error.message : String(error)}`
}

/** One line for a finished run (Blade's PromptResult fields). */
export function describeResult(result: PromptResult): string {
  const calls = result.toolCalls
    .map((call) => `${call.name}${call.isError ? ' (failed)' : ''} in ${Math.round(call.duration)}ms`)
    .join(', ')
  const usage: TokenUsage = result.usage
  return `${result.result} [${result.turnsCount} turns, ${Math.round(result.duration)}ms, ${usage.totalTokens} tokens; ${calls}]`
}

/** The code a docs program would compare a caught hook error with. */
export const HOOK_TIMEOUT_CODE: HookTimeoutErrorCode = HookTimeoutErrorCode

export async function main(target: DocsAgentTarget, question = 'Summarise notes.txt and save the summary.'): Promise<DocsAgentRun> {
  const run: Omit<DocsAgentRun, 'sessionId' | 'text' | 'resultContent' | 'usage' | 'supportedModels'> = {
    events: [],
    lines: [],
    onContent: [],
    textStream: [],
    hookCalls: [],
    hookInputs: [],
    permissionRequests: [],
    toolRuns: [],
    savedNotes: {},
    filesRead: [],
  }
  const log = (line: string) => run.lines.push(line)

  // --- Tools (Blade docs: "Custom tools") -----------------------------------------------------

  // A read-only, side-effect-free tool whose execute is an async generator: it reports progress
  // while it works and returns a ToolResult whose `display` is for the UI and `model` for the LLM.
  const readFile = defineTool({
    name: 'read_file',
    description: 'Read a text file from the workspace',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string', description: 'Path relative to the workspace' } },
      required: ['path'],
    },
    kind: ToolKind.ReadOnly,
    sideEffect: ToolSideEffect.PURE,
    async *execute(params: { path: string }, context) {
      run.toolRuns.push({ name: 'read_file', input: params, environment: context.environment, metadata: context.metadata })
      yield { kind: 'progress', message: `Opening ${params.path}`, completed: 0, total: 1 }
      const text = FILES[params.path]
      if (text === undefined) {
        const failed: ToolResult = { status: 'error', error: { message: `No such file: ${params.path}` } }
        return failed
      }
      run.filesRead.push(params.path)
      yield { kind: 'progress', message: 'Read complete', completed: 1, total: 1 }
      const result: ToolResult = {
        status: 'success',
        model: text,
        display: { summary: `Read ${text.length} characters from ${params.path}` },
      }
      return result
    },
  })

  // A plain tool: a synchronous function returning a string.
  const currentTime = defineTool({
    name: 'current_time',
    description: 'The current time, in ISO 8601',
    parameters: { type: 'object', properties: {} },
    kind: ToolKind.ReadOnly,
    sideEffect: ToolSideEffect.IDEMPOTENT,
    execute: (_params, context) => {
      run.toolRuns.push({ name: 'current_time', input: _params, environment: context.environment, metadata: context.metadata })
      return '2026-01-01T12:00:00.000Z'
    },
  })

  // A write tool: a plain function that hands back a finished execution with Blade's helper.
  const saveNote = defineTool({
    name: 'save_note',
    description: 'Save a note under notes/',
    parameters: {
      type: 'object',
      properties: { path: { type: 'string' }, text: { type: 'string' } },
      required: ['path', 'text'],
    },
    kind: ToolKind.Write,
    sideEffect: ToolSideEffect.NON_IDEMPOTENT,
    execute: (params: { path: string; text: string; author?: string }, context) => {
      run.toolRuns.push({ name: 'save_note', input: params, environment: context.environment, metadata: context.metadata })
      run.savedNotes[params.path] = params.text
      return completeToolExecution({ status: 'success', model: `Saved ${params.path}`, display: { summary: `📝 ${params.path}` } })
    },
  })

  const tools: ToolDefinition[] = [readFile, currentTime, saveNote]

  // --- Hooks (Blade docs: "Hooks") ---------------------------------------------------------------

  const record = (input: HookInput) => {
    run.hookInputs.push(input)
    run.hookCalls.push(input.toolName ? `${input.event}:${input.toolName}` : input.event)
  }
  const audit: HookCallback = async (input: HookInput): Promise<HookOutput> => {
    record(input)
    return { action: 'continue' }
  }
  const hooks: InlineHooks = {
    [HookEvent.SessionStart]: [audit],
    [HookEvent.UserPromptSubmit]: [
      async (input) => {
        record(input)
        return { action: 'continue', modifiedInput: { userPrompt: `${String(input.userPrompt)}\nAnswer in one sentence.` } }
      },
    ],
    [HookEvent.PreToolUse]: [
      async (input) => {
        record(input)
        // Stamp every note with its author before it is checked and saved.
        if (input.toolName === 'save_note') return { action: 'continue', modifiedInput: { author: 'docs-agent' } }
        return { action: 'continue' }
      },
    ],
    [HookEvent.PermissionRequest]: [audit],
    [HookEvent.PostToolUse]: [
      async (input) => {
        record(input)
        if (input.toolName === 'current_time') return { action: 'continue', modifiedOutput: `${String(input.toolOutput)} (UTC)` }
        return { action: 'continue' }
      },
    ],
    [HookEvent.PostToolUseFailure]: [audit],
    [HookEvent.TaskCompleted]: [audit],
    [HookEvent.SessionEnd]: [audit],
  }

  // --- Permission (Blade docs: "Permissions": one function decides) ------------------------------

  const permission: AgentPermission = async (request: AgentPermissionRequest): Promise<AgentPermissionDecision> => {
    run.permissionRequests.push({ toolName: request.toolName, kind: request.kind, input: request.input, affectedPaths: request.affectedPaths })
    if (request.kind === ToolKind.ReadOnly) return PermissionDecision.ALLOW
    const path = request.input.path
    if (typeof path === 'string' && path.startsWith('notes/')) return { behavior: 'allow' }
    return { behavior: 'deny', message: `Writes outside notes/ are not allowed: ${String(path)}` }
  }

  const advanced: AgentAdvancedOptions = {
    hooks,
    hookTimeoutMs: 30_000,
    sessionEndHookTimeoutMs: 3_000,
    permission,
    toolTimeoutMs: 60_000,
    defaultContext: { environment: { APP_ENV: 'docs' }, metadata: { tenant: 'acme' } },
  }
  const options: AgentOptions =
    'baseUrl' in target
      ? {
          model: target.model ?? 'docs-model',
          apiKey: target.apiKey ?? 'sk-docs',
          provider: 'openai-compatible',
          baseUrl: target.baseUrl,
          systemPrompt: 'You are a concise notes assistant.',
          maxTurns: 8,
          tools,
          advanced,
        }
      : { model: target.model, systemPrompt: 'You are a concise notes assistant.', maxTurns: 8, tools, advanced }

  // Blade's docs: the Agent is AsyncDisposable, so `await using` closes it (SessionEnd runs once
  // even though the program also closes it explicitly below).
  try {
    await using agent: Agent = await createAgent(options)
    const supportedModels = await agent.supportedModels()
    log(`models: ${JSON.stringify(supportedModels)}`)

    const response = await agent.send(question)
    response.on('content', (event) => {
      run.onContent.push(event.delta)
    })

    let resultContent: string | undefined
    let usage: TokenUsage | undefined
    for await (const event of response.stream()) {
      run.events.push(event)
      switch (event.type) {
        case 'turn_start':
          log(`turn ${event.turn} started`)
          break
        case 'content':
          log(`text: ${event.delta}`)
          break
        case 'thinking':
          log(`thinking: ${event.delta}`)
          break
        case 'tool_use':
          log(`→ ${event.name} ${JSON.stringify(event.input)}`)
          break
        case 'tool_progress':
          log(`… ${event.name}: ${JSON.stringify(event.progress)}`)
          break
        case 'tool_result':
          log(`${event.isError ? '✗' : '✓'} ${event.name}: ${event.output}${event.display === undefined ? '' : ` [${JSON.stringify(event.display)}]`}`)
          break
        case 'turn_end':
          log(`turn ${event.turn} ended`)
          break
        case 'usage':
          usage = event.usage
          log(`tokens: ${event.usage.inputTokens} in, ${event.usage.outputTokens} out, ${event.usage.totalTokens} total of ${event.usage.maxContextTokens}`)
          break
        case 'result':
          if (event.subtype === 'success') resultContent = event.content
          log(event.subtype === 'success' ? `done: ${event.content ?? ''}` : `failed: ${event.error ?? ''}`)
          break
        case 'error':
          log(`error${event.code ? ` ${event.code}` : ''}: ${event.message}`)
          break
        default:
          break
      }
    }

    const text = await response.text()
    for await (const delta of response.textStream()) run.textStream.push(delta)
    log(`answer: ${text}`)
    if (agent.isClosed) throw new Error('the agent closed by itself')
    log(`permission modes: ${Object.values(PermissionMode).join(', ')}`)
    await agent.close()
    return { ...run, sessionId: agent.sessionId, text, resultContent, usage, supportedModels }
  } catch (error) {
    log(describeError(error))
    throw error
  }
}
