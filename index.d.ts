// Public types of agent-runtime-hooks. Hand-written: the generated `binding.d.ts` describes the
// internal native layer only.

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }
export type JsonObject = { [key: string]: JsonValue }
/** A JSON Schema object describing a tool's input. */
export type JsonSchemaObject = { [key: string]: JsonValue }

export declare const HookEvent: {
  readonly PreToolUse: 'PreToolUse'
  readonly PostToolUse: 'PostToolUse'
  readonly PostToolUseFailure: 'PostToolUseFailure'
  readonly PermissionRequest: 'PermissionRequest'
  readonly UserPromptSubmit: 'UserPromptSubmit'
  readonly SessionStart: 'SessionStart'
  readonly SessionEnd: 'SessionEnd'
  readonly TaskCompleted: 'TaskCompleted'
}
export type HookEventName = (typeof HookEvent)[keyof typeof HookEvent]

/** Blade's tool kinds: what the permission presets decide by. */
export declare const ToolKind: { readonly ReadOnly: 'readonly'; readonly Write: 'write'; readonly Execute: 'execute' }
export type ToolKind = (typeof ToolKind)[keyof typeof ToolKind]
/** Blade's side-effect classes of a tool. */
export declare const ToolSideEffect: {
  readonly PURE: 'pure'
  readonly IDEMPOTENT: 'idempotent'
  readonly NON_IDEMPOTENT: 'non_idempotent'
}
export type ToolSideEffect = (typeof ToolSideEffect)[keyof typeof ToolSideEffect]
/** Blade's permission modes, for `agent.setPermissionMode()`. */
export declare const PermissionMode: {
  readonly DEFAULT: 'default'
  readonly AUTO_EDIT: 'autoEdit'
  readonly YOLO: 'yolo'
  readonly PLAN: 'plan'
}
export type PermissionMode = (typeof PermissionMode)[keyof typeof PermissionMode]
/** Blade's permission decisions. */
export declare const PermissionDecision: { readonly ALLOW: 'allow'; readonly DENY: 'deny'; readonly ASK: 'ask' }
export type PermissionDecision = (typeof PermissionDecision)[keyof typeof PermissionDecision]
/** `HookTimeoutError`'s code. */
export declare const HookTimeoutErrorCode: 'HOOK_TIMEOUT'
export type HookTimeoutErrorCode = typeof HookTimeoutErrorCode

export declare class SdkError extends Error {
  constructor(code: string, message: string, options?: { cause?: unknown })
  readonly code: string
  cause?: unknown
  /** HTTP status, on a `MODEL_ERROR` caused by a non-2xx answer. */
  status?: number
  toJSON(): { name: string; code: string; message: string; cause?: unknown }
}
export declare class HookTimeoutError extends SdkError {
  constructor(event: HookEventName, timeoutMs: number)
  readonly event: HookEventName
  readonly timeoutMs: number
  toJSON(): { name: string; code: string; message: string; cause?: unknown; event: HookEventName; timeoutMs: number }
}
export declare class ConfigError extends SdkError {
  constructor(message: string, options?: { cause?: unknown; field?: string | undefined })
  /** The option at fault, as the message names it: `advanced.hookTimeoutMs`, `tools[2].name`. */
  readonly field?: string | undefined
}
export declare class AbortError extends SdkError {
  constructor(message?: string, options?: { cause?: unknown })
}
export declare class CriticalHookDeliveryError extends SdkError {
  constructor(hookId: string, cause?: unknown)
  readonly hookId: string
}

/** What `scriptedModel` returns; pass it as `model`. */
export interface ModelProvider {
  readonly kind: 'scripted'
}

export interface ScriptedToolCall {
  id?: string | undefined
  name: string
  input?: JsonObject | undefined
  /** Raw argument text instead of `input`, e.g. to send the loop arguments that are not JSON. */
  arguments?: string | undefined
}
export interface ScriptedTurn {
  text?: string | undefined
  toolCalls?: ScriptedToolCall[] | undefined
  usage?: { inputTokens?: number | undefined; outputTokens?: number | undefined } | undefined
}
/** What the function form of `scriptedModel` is asked with: what a model would have been sent. */
export interface ScriptRequest {
  /** 1 for the first model call of a run. */
  turn: number
  /** The conversation, system prompt first (when set). */
  messages: Array<{ role: 'system'; content: string } | Message>
  tools: Array<{ name: string; description?: string | undefined; parameters: JsonSchemaObject }>
  /** The run's `toolChoice` for this call, when one is set. */
  toolChoice?: ToolChoice | undefined
}
export type ScriptFn = (request: ScriptRequest) => ScriptedTurn | Promise<ScriptedTurn>

export type UserMessageContent =
  | string
  | Array<{ type: 'text'; text: string } | { type: 'image_url'; image_url: { url: string; detail?: string | undefined } }>

/** The conversation, in the OpenAI chat shape. */
export type Message =
  | { role: 'user'; content: UserMessageContent }
  | {
      role: 'assistant'
      content: string | null
      tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> | undefined
    }
  | { role: 'tool'; tool_call_id: string; content: string }

/** What a tool may return: `model` is what the model is sent; `display` reaches the stream's
 * `tool_result` only. */
export type ToolResult =
  | { status: 'success'; model: JsonValue; display?: JsonValue | undefined }
  | { status: 'error'; model?: JsonValue | undefined; display?: JsonValue | undefined; error: { message: string; type?: string | undefined } }

export interface ToolContext {
  /** Aborted when the run is aborted (`agent.abort()` or the caller's signal) or at `toolTimeoutMs`. */
  signal: AbortSignal
  toolCallId: string
  sessionId: string
  /** From `advanced.defaultContext` (and `filesystem`, as `capabilities.filesystem`). */
  environment?: Record<string, string> | undefined
  metadata?: JsonObject | undefined
  capabilities?: JsonObject | undefined
}

/** What `deferred()` returns. */
export interface Deferred {
  readonly __deferred: unique symbol
}

/** What `execute` may return: a value, a promise of one, or a generator whose yields (JSON)
 * are `tool_progress` events and whose return value is the result. */
export type ToolExecution =
  | Promise<JsonValue | ToolResult | Deferred | void>
  | JsonValue
  | ToolResult
  | Deferred
  | void
  | AsyncGenerator<unknown, JsonValue | ToolResult | void, unknown>
  | Generator<unknown, JsonValue | ToolResult | void, unknown>

/**
 * A schema of a library that implements Standard Schema (standardschema.dev) and Standard JSON
 * Schema: zod 4.2 or newer, ArkType, Valibot through its converter. As a tool's `parameters` it
 * is sent to the model as the JSON Schema the library writes, and the model's arguments pass
 * its `validate` (defaults and transforms applied) before `execute` sees them.
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': {
    readonly version: 1
    readonly vendor: string
    readonly validate: (value: unknown) => StandardSchemaResult<Output> | Promise<StandardSchemaResult<Output>>
    readonly types?: { readonly input: Input; readonly output: Output } | undefined
    readonly jsonSchema?: { readonly input: (options: { readonly target: string }) => Record<string, unknown> } | undefined
  }
}
export type StandardSchemaResult<Output> =
  | { readonly value: Output; readonly issues?: undefined }
  | { readonly issues: ReadonlyArray<{ readonly message: string; readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined }> }
/** What a Standard Schema's `validate` makes of its input: the type `execute` receives. */
export type InferSchemaOutput<S extends StandardSchemaV1> = NonNullable<S['~standard']['types']>['output']

/** A tool's input schema: JSON Schema (TypeBox's schemas are), or a schema library's schema. */
export type ToolParameters = JsonSchemaObject | StandardSchemaV1

interface ToolDefinitionFields<I> {
  name: string
  description?: string | undefined
  /** Default `'execute'`. */
  kind?: ToolKind | undefined
  /** Default `'non_idempotent'`. */
  sideEffect?: ToolSideEffect | undefined
  execute(input: I, context: ToolContext): ToolExecution
}

/**
 * A tool. `parameters` is sent to the model (default `{ type: 'object', properties: {} }`); a
 * tool whose input has required fields must say so in its schema, so it is required then.
 */
export type ToolDefinition<I = JsonObject> = ToolDefinitionFields<I> &
  ({} extends I ? { parameters?: ToolParameters | undefined } : { parameters: ToolParameters })

export interface ConnectionOptions {
  headers?: Record<string, string> | undefined
  organization?: string | undefined
  projectId?: string | undefined
  /** Budget of one HTTP attempt, headers to last byte; default 600000. */
  requestTimeoutMs?: number | undefined
  /** Further attempts after a 429 or 5xx answer; default 2. */
  maxRetries?: number | undefined
  /** Stream answers over SSE; default true. */
  stream?: boolean | undefined
  /**
   * Cap, in bytes, of a non-streamed answer's body, of one SSE line (or event) and of one tool
   * call's arguments; past it the run fails with MODEL_ERROR. Default 16 MiB (16777216).
   */
  maxResponseBytes?: number | undefined
  /** Anthropic: the `anthropic-version` header; OpenAI-compatible: the `api-version` query parameter. */
  apiVersion?: string | undefined
  /** A streamed answer that sends nothing for this long fails (`MODEL_ERROR`). */
  streamIdleTimeoutMs?: number | undefined
}

/**
 * What every hook input has. The tool fields Blade's `HookInput` declares are optional here on
 * every event, so code written against Blade's loose type still type-checks; narrow on `event`
 * to get each event's own fields (`src/agent/payloads.rs` is the Rust side).
 */
export interface HookInputBase {
  event: HookEventName
  sessionId: string
  /** Aborts at the event's deadline (reason: HookTimeoutError) or with the caller's signal. */
  abortSignal: AbortSignal
  toolName?: string | undefined
  toolInput?: JsonObject | undefined
  /** The model-facing output (PostToolUse, PostToolUseFailure). */
  toolOutput?: string | undefined
  toolCallId?: string | undefined
  /** PostToolUseFailure: what failed (the thrown error itself when a tool or hook threw one). */
  error?: Error | undefined
  [key: string]: unknown
}

/** The fields of every tool event, in both vocabularies. */
export interface ToolHookInput extends HookInputBase {
  event: 'PreToolUse' | 'PermissionRequest' | 'PostToolUse' | 'PostToolUseFailure'
  toolName: string
  toolInput: JsonObject
  toolCallId: string
  /** Counts model turns from 0. */
  stepIndex: number
  /** The call's place among its turn's calls, from 0. */
  callIndex: number
  /** One id per run. */
  operationId: string
  /** = `toolName`; an MCP tool's own name (without `mcp__<server>__`). */
  apiName: string
  /** An MCP tool's server; else the part of the tool name before the first `/`, else `''`. */
  identifier: string
  /** `'mcp'` for a tool of an `advanced.mcpServers` server; absent for the agent's own tools. */
  toolSource?: 'mcp' | undefined
  /** = `toolInput`. */
  args: JsonObject
  /** Sub-agent names from the root's child down to the agent making the call; `[]` in the root. */
  agentPath: string[]
  /** Inside a sub-agent: the `Task` call that started it. */
  parentToolCallId?: string | undefined
}
export interface PreToolUseInput extends ToolHookInput {
  event: 'PreToolUse'
}
export interface PermissionRequestInput extends ToolHookInput {
  event: 'PermissionRequest'
  toolKind: ToolKind
  affectedPaths: string[]
}
export interface PostToolUseInput extends ToolHookInput {
  event: 'PostToolUse'
  toolOutput: string
  result: { content: string; success: boolean }
  /** The result came from a PreToolUse `mock()`. */
  mocked: boolean
}
export interface PostToolUseFailureInput extends ToolHookInput {
  event: 'PostToolUseFailure'
  toolOutput: string
  result: { content: string; success: boolean }
  mocked: boolean
  error: Error
}
export interface UserPromptSubmitInput extends HookInputBase {
  event: 'UserPromptSubmit'
  userPrompt: string
  hasImages: boolean
  imageCount: number
  operationId: string
}
export interface SessionStartInput extends HookInputBase {
  event: 'SessionStart'
  isResume: boolean
}
export interface SessionEndInput extends HookInputBase {
  event: 'SessionEnd'
  reason: 'other'
}
export interface TaskCompletedInput extends HookInputBase {
  event: 'TaskCompleted'
  taskId: string
  taskDescription: string
  /** The final text, or the error's message. */
  resultSummary: string
  success: boolean
  reason: 'done' | 'max_tokens' | 'max_turns' | 'aborted' | 'interrupted' | 'error'
  operationId: string
  lastAssistantContent: string
  steps: number
  totalInputTokens: number
  totalOutputTokens: number
  totalTokens: number
  totalToolCalls: number
}
/** What a hook callback receives: one shape per event, told apart by `event`. */
export type HookInput =
  | PreToolUseInput
  | PermissionRequestInput
  | PostToolUseInput
  | PostToolUseFailureInput
  | UserPromptSubmitInput
  | SessionStartInput
  | SessionEndInput
  | TaskCompletedInput
/** The input of event `E`. */
export type HookInputOf<E extends HookEventName> = Extract<HookInput, { event: E }>

export interface HookOutput {
  action: 'continue' | 'skip' | 'abort'
  /** Merged into a tool's input; for UserPromptSubmit, `{ userPrompt }` or the new prompt itself. */
  modifiedInput?: JsonObject | string | undefined
  modifiedOutput?: JsonValue | undefined
  reason?: string | undefined
}

export type HookCallback = (input: HookInput) => HookOutput | Promise<HookOutput>

/** Events of the server-side contract that fire besides the session events. */
export type LifecycleEventName =
  | 'StepStart'
  | 'StepEnd'
  | 'StopFailure'
  | 'HumanInterventionRequest'
  | 'HumanInterventionResult'
  | 'HumanInterventionStop'
  | 'PreCompact'
  | 'PostCompact'
  | 'CompactFailure'
  | 'SubagentStart'
  | 'SubagentStarted'
  | 'SubagentFailure'
export type LifecycleAlias =
  | 'beforeToolCall'
  | 'afterToolCall'
  | 'onToolCallError'
  | 'onComplete'
  | 'onError'
  | 'beforeStep'
  | 'afterStep'
  | 'beforeHumanIntervention'
  | 'afterHumanIntervention'
  | 'onStopByHumanIntervention'
  | 'beforeCompact'
  | 'afterCompact'
  | 'onCompactError'
  | 'beforeCallAgent'
  | 'afterCallAgent'
  | 'onCallAgentError'
export type HookTypeName = HookEventName | LifecycleEventName | LifecycleAlias

/** What a mocked PreToolUse call returns instead of running the tool. */
export type MockResult = string | { content: string; success?: boolean | undefined }

/** What hook objects' handlers of the other lifecycle events receive (StepStart, StepEnd, …). */
export interface LifecycleHookInput {
  event: LifecycleEventName
  sessionId: string
  abortSignal: AbortSignal
  operationId?: string | undefined
  stepIndex?: number | undefined
  toolName?: string | undefined
  [key: string]: unknown
}

/** The run's totals so far, which StepEnd, TaskCompleted and StopFailure carry. */
export type RunTotals = {
  steps: number
  totalInputTokens: number
  totalOutputTokens: number
  totalTokens: number
  totalToolCalls: number
}
/** The fields every lifecycle handler gets. */
type LifecycleBase<E extends LifecycleEventName> = { event: E; sessionId: string; abortSignal: AbortSignal }
/** StepStart (`beforeStep`), before each model call. */
export type StepStartInput = LifecycleBase<'StepStart'> & {
  operationId: string
  /** Counts model calls from 0. */
  stepIndex: number
  /** Steps finished before this one. */
  steps: number
}
/** StepEnd (`afterStep`): the step's text, tool calls and results, and the run's totals. */
export type StepEndInput = LifecycleBase<'StepEnd'> &
  RunTotals & {
    operationId: string
    stepIndex: number
    /** `'call_llm'` for a turn without tool calls. */
    stepType: 'call_llm' | 'call_tool'
    content: string
    /** What the model asked for; `arguments` is the model's JSON text. */
    toolCalls: Array<{ id: string; name: string; arguments: string }>
    toolsResult: ToolCallRecord[]
    /** Another model call follows. */
    shouldContinue: boolean
  }
/** StopFailure (`onError`), when a run failed. */
export type StopFailureInput = LifecycleBase<'StopFailure'> &
  RunTotals & {
    operationId: string
    reason: 'error'
    errorMessage: string
    /** The error's code, e.g. `MODEL_ERROR`. */
    errorType: string
    /** The error as JSON: `message`, `code` and what its kind adds. */
    errorDetail: { message: string; code?: string | undefined; [key: string]: unknown }
    lastAssistantContent: string
  }
/** A call waiting for a person, as HumanInterventionRequest lists it. */
/** A waiting call of the paused tree: `agentPath` is `[]` for the root's own calls (§8.7). */
export type PendingToolCall = {
  toolCallId: string
  toolName: string
  apiName: string
  identifier: string
  input: JsonObject
  agentPath: string[]
  /** The `Task` call that started the sub-agent making this call (absent for the root's). */
  parentToolCallId?: string | undefined
}
/** HumanInterventionRequest (`beforeHumanIntervention`): a run paused for approvals. */
export type HumanInterventionRequestInput = LifecycleBase<'HumanInterventionRequest'> & {
  operationId: string
  stepIndex: number
  pendingTools: PendingToolCall[]
}
/** HumanInterventionResult (`afterHumanIntervention`), before a decided call goes on, and
 * HumanInterventionStop (`onStopByHumanIntervention`), for a rejection that ends the run. */
export type HumanInterventionResultInput = LifecycleBase<'HumanInterventionResult' | 'HumanInterventionStop'> & {
  operationId: string
  stepIndex: number
  action: 'approve' | 'reject'
  toolCallId: string
  toolName: string
  /** Where the decided call sits: `[]` in the root, else the sub-agents down to its agent. */
  agentPath: string[]
  parentToolCallId?: string | undefined
}
/** PreCompact (`beforeCompact`), before older messages are replaced by a summary. */
export type PreCompactInput = LifecycleBase<'PreCompact'> & {
  operationId: string
  stepIndex: number
  /** Messages in the conversation now. */
  messageCount: number
  /** The count that passed the threshold. */
  tokenCount: number
}
/** PostCompact (`afterCompact`), once the summary replaced the older messages. */
export type PostCompactInput = LifecycleBase<'PostCompact'> & {
  operationId: string
  stepIndex: number
  /** One id per compaction. */
  groupId: string
  messagesBefore: number
  messagesAfter: number
  summary: string
}
/** CompactFailure (`onCompactError`): no summary; the run goes on uncompacted. */
export type CompactFailureInput = LifecycleBase<'CompactFailure'> & { operationId: string; stepIndex: number; error: string; tokenCount: number }
/** SubagentStart (`beforeCallAgent`), on the parent before a `Task` call starts its sub-agent. */
export type SubagentStartInput = LifecycleBase<'SubagentStart'> & {
  operationId: string
  /** The sub-agent's key in `advanced.agents`. */
  agentId: string
  /** The `Task` call's `prompt`. */
  instruction: string
  toolCallId: string
  /** The parent's place in the tree. */
  agentPath: string[]
}
/** SubagentStarted (`afterCallAgent`), once the sub-agent started (`success: false` if it could not). */
export type SubagentStartedInput = LifecycleBase<'SubagentStarted'> & {
  operationId: string
  agentId: string
  /** The sub-agent's run id. */
  subOperationId: string
  success: boolean
  agentPath: string[]
}
/** SubagentFailure (`onCallAgentError`): the sub-agent failed; its `Task` call fails too. */
export type SubagentFailureInput = LifecycleBase<'SubagentFailure'> & { operationId: string; agentId: string; error: string; agentPath: string[] }

/** The event each alias stands for. */
export interface HookAliases {
  beforeToolCall: 'PreToolUse'
  afterToolCall: 'PostToolUse'
  onToolCallError: 'PostToolUseFailure'
  onComplete: 'TaskCompleted'
  onError: 'StopFailure'
  beforeStep: 'StepStart'
  afterStep: 'StepEnd'
  beforeHumanIntervention: 'HumanInterventionRequest'
  afterHumanIntervention: 'HumanInterventionResult'
  onStopByHumanIntervention: 'HumanInterventionStop'
  beforeCompact: 'PreCompact'
  afterCompact: 'PostCompact'
  onCompactError: 'CompactFailure'
  beforeCallAgent: 'SubagentStart'
  afterCallAgent: 'SubagentStarted'
  onCallAgentError: 'SubagentFailure'
}
/** The event a hook object's `type` names (an alias resolved). */
export type EventOfHookType<T extends HookTypeName> = T extends LifecycleAlias ? HookAliases[T] : T
interface LifecycleInputs {
  StepStart: StepStartInput
  StepEnd: StepEndInput
  StopFailure: StopFailureInput
  HumanInterventionRequest: HumanInterventionRequestInput
  HumanInterventionResult: HumanInterventionResultInput & { event: 'HumanInterventionResult' }
  HumanInterventionStop: HumanInterventionResultInput & { event: 'HumanInterventionStop' }
  PreCompact: PreCompactInput
  PostCompact: PostCompactInput
  CompactFailure: CompactFailureInput
  SubagentStart: SubagentStartInput
  SubagentStarted: SubagentStartedInput
  SubagentFailure: SubagentFailureInput
}
/** The input of the event a hook type names (callbacks and handlers alike; handlers of PreToolUse add `mock()`). */
export type InputOfHookType<T extends HookTypeName> =
  EventOfHookType<T> extends infer E ? (E extends HookEventName ? HookInputOf<E> : E extends keyof LifecycleInputs ? LifecycleInputs[E] : never) : never
/** What the handler of a hook object of type `T` receives; PreToolUse's adds `mock()`. */
export type HookObjectInput<T extends HookTypeName> =
  EventOfHookType<T> extends 'PreToolUse'
    ? PreToolUseInput & {
        /** Answer the call without running the tool; the first mock wins. `true` if it did. */
        mock: (result: MockResult) => boolean
      }
    : InputOfHookType<T>
/** Every name of the event `T` names: the event and its alias. */
export type NamesOfHookType<T extends HookTypeName> = {
  [N in HookTypeName]: EventOfHookType<N> extends EventOfHookType<T> ? N : never
}[HookTypeName]

/** Any hook object's input: the loose shape, for a handler shared by several types. */
export type HookEventPayload = (HookInput | LifecycleHookInput) & {
  /** PreToolUse only: answer the call without running the tool; the first mock wins. */
  mock?: ((result: MockResult) => boolean) | undefined
  operationId?: string | undefined
  stepIndex?: number | undefined
  callIndex?: number | undefined
  apiName?: string | undefined
  identifier?: string | undefined
  toolSource?: 'mcp' | undefined
  args?: JsonObject | undefined
  result?: { content: string; success: boolean } | undefined
  mocked?: boolean | undefined
}

export interface WebhookConfig {
  /** An absolute http(s) URL without credentials. */
  url: string
  /**
   * `'fetch'` (default): sent during the event's dispatch. `'queue'` (notifications only): written
   * to the store's outbox before the run goes on and delivered by any process attached to the
   * store, at least once, with an `Idempotency-Key` header; retry n waits min(2^(n-1) s, 60 s).
   */
  delivery?: 'fetch' | 'queue' | undefined
  /** With `delivery: 'queue'` only: attempts before the row is given up; default 8. */
  maxAttempts?: number | undefined
  /** Seconds; default 30. */
  timeout?: number | undefined
  /** Values may use `${NAME}` for names listed in `allowedEnvVars`, resolved at send time. */
  headers?: Record<string, string> | undefined
  allowedEnvVars?: string[] | undefined
  /** Merged over the payload last (it wins). Not for controls. */
  body?: Record<string, JsonValue> | undefined
  /** Send only these event fields (plus hookId, hookType). Not for controls. */
  eventFields?: string[] | undefined
  /** `'toolCall'`: the answer may allow or deny (PreToolUse/PostToolUse only). Default `'ignore'`. */
  responseHandling?: 'ignore' | 'toolCall' | undefined
  /** For controls: what a failed control does. Default `'continue'`. */
  onError?: 'continue' | 'block' | undefined
  /** `'none'`: a failed delivery fails the dispatch with CriticalHookDeliveryError. */
  fallback?: 'fetch' | 'none' | undefined
}

/** A hook object of type `T`: its handler gets that event's input (`HookObjectInput<T>`). */
export interface HookObject<T extends HookTypeName = HookTypeName> {
  id: string
  type: T
  /** A Rust-syntax regex tested against the tool name (tool events only); `''`/`'*'` match all. */
  matcher?: string | undefined
  /** May return a HookOutput, or nothing (continue). */
  handler?: ((event: HookObjectInput<T>) => HookOutput | void | Promise<HookOutput | void>) | undefined
  webhook?: WebhookConfig | undefined
  /** What this hook's failure (a throw, nonsense returned) does on a gating event. Default `'block'`. */
  onFailure?: 'block' | 'continue' | undefined
}
/** A hook object with a webhook and no handler: nothing in it depends on its `type`. */
export interface WebhookHookObject {
  id: string
  type: HookTypeName
  matcher?: string | undefined
  webhook: WebhookConfig
  handler?: undefined
  onFailure?: 'block' | 'continue' | undefined
}
/** A process run per event, as Claude Code runs command hooks (docs/command-hooks.md). */
export interface CommandConfig {
  /** A shell line run by `bash -c`; with `args`, the program started directly with that argv. */
  command: string
  args?: string[] | undefined
  /** Added to the process's environment (over `CLAUDE_PROJECT_DIR`, which is set to `cwd`). */
  env?: Record<string, string> | undefined
  /** The process's working directory; default the agent process's. */
  cwd?: string | undefined
  /** Default 600000 (ten minutes); at the timeout its whole process group is killed. */
  timeoutMs?: number | undefined
}
/** A command hook: gets Claude Code's input JSON on stdin; exit 2 blocks, stdout's JSON decides. */
export interface CommandHookObject {
  id: string
  type: HookTypeName
  /** As on other hook objects: a Rust-syntax regex tested against the tool name. */
  matcher?: string | undefined
  command: CommandConfig
  /**
   * A process that times out, crashes, exits with a code other than 0 or 2, or prints broken
   * JSON blocks a gating event's action (`'block'`, the default) or is logged (`'continue'`).
   */
  onFailure?: 'block' | 'continue' | undefined
  handler?: undefined
  webhook?: undefined
  http?: undefined
}
/**
 * A hook object of any type; a literal's `type` picks its handler's input type. A function that
 * builds hook objects for a `type` it is given returns `HookObject<T>` for a generic `T`.
 */
/** Where a Claude-style HTTP hook posts: the command hook's input JSON; a 2xx JSON body decides. */
export interface HttpHookConfig {
  url: string
  /** Values may use `${NAME}` for names listed in `allowedEnvVars`, resolved at send time. */
  headers?: Record<string, string> | undefined
  allowedEnvVars?: string[] | undefined
  /** Default 600000. */
  timeoutMs?: number | undefined
}
/** Claude Code's HTTP hook: read like a command hook (not a LobeHub webhook). */
export interface HttpHookObject {
  id: string
  type: HookTypeName
  matcher?: string | undefined
  http: HttpHookConfig
  /** Another status, no connection, the timeout: blocks a gating event (`'block'`, the default) or is logged. */
  onFailure?: 'block' | 'continue' | undefined
  handler?: undefined
  webhook?: undefined
  command?: undefined
}
export type AgentHook = { [T in HookTypeName]: HookObject<T> }[HookTypeName] | WebhookHookObject | CommandHookObject | HttpHookObject
/** A hook object listed under its event in `hooks`: `type` may be left out (it is the event). */
export type InlineHookObject<K extends HookTypeName> = { [T in NamesOfHookType<K>]: Omit<HookObject<T>, 'type'> & { type?: T | undefined } }[NamesOfHookType<K>]
/** A bare callback listed under `K` in `hooks`: it gets the event's input. */
export type HookCallbackOfType<K extends HookTypeName> = (input: InputOfHookType<K>) => HookOutput | Promise<HookOutput>
export type HookEntry = HookCallback | { [T in HookTypeName]: InlineHookObject<T> }[HookTypeName]
/** A bare callback of event `E`: it gets that event's input. */
export type HookCallbackOf<E extends HookEventName> = (input: HookInputOf<E>) => HookOutput | Promise<HookOutput>
/** Callbacks and hook objects per event or alias; both get the event's own input type. */
export type InlineHooks = { [K in HookTypeName]?: Array<HookCallbackOfType<K> | InlineHookObject<K> | InlineCommandHookObject> }
/** A command or HTTP hook listed under its event: `type` may be left out. */
export type InlineCommandHookObject =
  | (Omit<CommandHookObject, 'type'> & { type?: HookTypeName | undefined })
  | (Omit<HttpHookObject, 'type'> & { type?: HookTypeName | undefined })

export type AgentPermissionPreset = 'default' | 'accept-edits' | 'bypass-permissions' | 'plan'

/** One entry of `advanced.agents`; its key is the `subagent_type` that runs it (and its `agentId`). */
export interface SubagentDefinition {
  /** Blade's `AgentDefinition.name`: when given, the same as its key. */
  name?: string | undefined
  /** Shown to the model in the `Task` tool's description. */
  description: string
  systemPrompt?: string | undefined
  /** This agent's tools the sub-agent may use (`'Task'` included, to delegate further); default all. */
  allowedTools?: string[] | undefined
  /** Default: this agent's model. A model id uses this agent's provider and connection. */
  model?: string | ModelProvider | undefined
  /** Default: this agent's. */
  maxTurns?: number | undefined
}

/**
 * `advanced.compaction`. PreCompact (`beforeCompact`: `messageCount`, `tokenCount`) may return
 * `{ action: 'abort' }` to skip one compaction; PostCompact (`afterCompact`: `groupId`,
 * `messagesBefore`, `messagesAfter`, `summary`) follows it; CompactFailure (`onCompactError`:
 * `error`, `tokenCount`) reports a summary that could not be written (the run goes on).
 */
export interface CompactionOptions {
  /** Compact when the next prompt would be this many tokens or more; default 80% of `maxContextTokens`. */
  thresholdTokens?: number | undefined
  /** Model turns (an assistant message with its tool results) kept verbatim; default 2. */
  keepRecentTurns?: number | undefined
  /** Writes the summary of the older messages; without it the model writes it (a call without tools). */
  summarize?: ((messages: JsonObject[]) => string | Promise<string>) | undefined
  /** The summary's deadline in ms, whoever writes it; past it the compaction fails (CompactFailure) and the run goes on uncompacted. Default 300000. */
  timeoutMs?: number | undefined
}

/** One question of AskUserQuestion, as the model asked it. */
export interface UserQuestion {
  question: string
  /** At most 12 characters; the key of its answer in `answers`. */
  header: string
  multiSelect: boolean
  options: Array<{ label: string; description: string }>
}
/**
 * What Blade's confirmation handler is asked: when a permission says `'ask'` (no `type`), and
 * by the built-ins that talk to the person: `'enterPlanMode'`, `'exitPlanMode'` (with the
 * plan in `planContent`) and `'askUserQuestion'` (with `questions`).
 */
export interface ConfirmationRequest {
  type?: 'enterPlanMode' | 'exitPlanMode' | 'askUserQuestion' | undefined
  toolName: string
  args: JsonObject
  title: string
  message: string
  /** Aborts at `hookTimeoutMs` or with the caller's signal. */
  abortSignal: AbortSignal
  kind: ToolKind
  affectedFiles: string[]
  details?: string | undefined
  planContent?: string | undefined
  questions?: UserQuestion[] | undefined
}
export interface ConfirmationResult {
  /** For AskUserQuestion, `false` is the person cancelling. */
  approved: boolean
  reason?: string | undefined
  /** `'session'`: the same tool with the same arguments is approved for the rest of the session. */
  scope?: 'once' | 'session' | undefined
  /** ExitPlanMode approved: the mode the session goes on in (default: the one before plan mode). */
  targetMode?: PermissionMode | undefined
  /** ExitPlanMode rejected: what the model is told. */
  feedback?: string | undefined
  /** AskUserQuestion: the answer to each question by its `header`, a label or several. */
  answers?: Record<string, string | string[]> | undefined
}
export interface ConfirmationHandler {
  requestConfirmation(request: ConfirmationRequest): ConfirmationResult | Promise<ConfirmationResult>
}
export interface AgentPermissionRequest {
  toolName: string
  input: JsonObject
  kind: ToolKind
  affectedPaths: string[]
  /** Aborts at `hookTimeoutMs` or with the caller's signal. */
  signal: AbortSignal
  sessionId: string
  toolCallId: string
}
export type AgentPermissionDecision =
  | 'allow'
  | 'deny'
  | 'ask'
  | { behavior: 'allow'; updatedInput?: JsonObject | undefined }
  | { behavior: 'deny'; message?: string | undefined; interrupt?: boolean | undefined }
  | { behavior: 'ask'; message?: string | undefined }
export type AgentPermission =
  | AgentPermissionPreset
  | ((request: AgentPermissionRequest) => AgentPermissionDecision | Promise<AgentPermissionDecision>)

/** One thing the runtime reports without failing: `{ level, message, ...fields }`. */
export interface LogEntry {
  level: 'debug' | 'info' | 'warn' | 'error'
  message: string
  [field: string]: unknown
}
/** A function given each entry, or a console-like object (`console` works). */
export type AgentLogger =
  | ((entry: LogEntry) => void)
  | {
      debug?: ((message: string, fields: Record<string, unknown>) => void) | undefined
      info?: ((message: string, fields: Record<string, unknown>) => void) | undefined
      warn?: ((message: string, fields: Record<string, unknown>) => void) | undefined
      error?: ((message: string, fields: Record<string, unknown>) => void) | undefined
    }

/** Blade's filesystem option: merged into the tools' context as `capabilities.filesystem`. */
export interface AgentFilesystemOptions {
  roots: readonly string[]
  cwd?: string | undefined
}
export type AgentProfile = 'local' | 'server'

/** What tools receive besides their signal and ids. */
export interface DefaultContext {
  environment?: Record<string, string> | undefined
  metadata?: JsonObject | undefined
  capabilities?: JsonObject | undefined
}

export interface AgentAdvancedOptions {
  /** Callbacks and hook objects per event, or hook objects with their `type`; run in order. */
  hooks?: InlineHooks | AgentHook[] | undefined
  /** Default 600000: one budget per event dispatch, shared by its callbacks. */
  hookTimeoutMs?: number | undefined
  /** Adds `hook_started` / `hook_response` events to the stream, one pair per hook that runs. Default false. */
  includeHookEvents?: boolean | undefined
  /** Default 3000. */
  sessionEndHookTimeoutMs?: number | undefined
  /** Who may run which tool; without it every tool runs. */
  permission?: AgentPermission | undefined
  /** Answers a permission's `'ask'` (without it an `'ask'` denies: it never auto-approves), AskUserQuestion and the plan-mode confirmations. */
  confirmationHandler?: ConfirmationHandler | undefined
  /** Makes the session's confirmation handler, on its first `'ask'`. */
  confirmationHandlerFactory?: ((sessionId: string) => ConfirmationHandler | Promise<ConfirmationHandler>) | undefined
  /**
   * Receives what the runtime logs (failed observers, webhooks not delivered, failed controls,
   * failed summaries, …). Without one, warnings and errors go to stderr, one line each;
   * `false` keeps them to `tracing`.
   */
  logger?: AgentLogger | false | undefined
  connection?: ConnectionOptions | undefined
  /** What tools receive as their context. */
  defaultContext?: DefaultContext | undefined
  /** The tools offered to the model (`[]` offers none); the rest cannot be called. */
  allowedTools?: string[] | undefined
  /** Tools never offered. */
  disallowedTools?: string[] | undefined
  /** Budget of one tool call; default 600000. */
  toolTimeoutMs?: number | undefined
  /** Reported as `usage.maxContextTokens`; default 128000. */
  maxContextTokens?: number | undefined
  /** Older messages become one summary when the next model call would pass the threshold. */
  compaction?: CompactionOptions | undefined
  /** Pending approvals carry an HMAC token that `approve` must be given (approvals relayed by an untrusted client cannot be forged or moved). */
  approvalSecret?: string | undefined
  /**
   * Where sessions are kept: absent = in memory (a pause lives as long as the process); `{ sqlite: path }`
   * survives restarts; `{ postgres: url }` (`postgres://user:password@host:5432/db?sslmode=verify-full`)
   * is shared by many workers. One of the two. A SQLite path names a file (`':memory:'` is refused).
   * Ids longer than 1024 bytes or holding U+0000 are refused by every store (`STORE_ERROR`).
   */
  store?: { sqlite: string; postgres?: undefined } | { postgres: string; sqlite?: undefined } | undefined
  /**
   * How long a run's claim on its session outlives its last renewal; default 30000. A run claims
   * the session (`send` / `resume` reject `SESSION_LEASED` while another agent's claim is live),
   * renews it every third of this while it runs, and releases it when it settles; a dead
   * process's claim expires after this.
   */
  leaseTtlMs?: number | undefined
  /** Blade's: with `persistSession` not `false`, the store `{ sqlite: <storagePath>/sessions.db }`. */
  storagePath?: string | undefined
  persistSession?: boolean | undefined
  /** Sub-agents the model may delegate to with the `Task` tool; every hook and policy of this agent applies inside them. */
  agents?: Record<string, SubagentDefinition> | undefined
  /** How deep sub-agents may delegate (children of this agent are at depth 1); default 3, at most 32. */
  maxSubagentDepth?: number | undefined
  /**
   * How many sub-agents one run's whole tree may start, at every depth together; default 100, at
   * most 10000. A `Task` call past it fails (a tool error the model sees) and the run goes on.
   */
  maxSubagentCalls?: number | undefined
  /** MCP servers whose tools are offered as `mcp__<server>__<tool>`; started by `createAgent`, stopped by `close()`. Stdio (`command`) or streamable HTTP (`url`). A server's name is letters, digits, `_` and `-`, without `__` and not starting or ending with `_`. */
  mcpServers?: Record<string, McpServerConfig> | undefined
  /**
   * The built-in tools (Read, Write, Edit, Glob, Grep, Bash, KillShell, TaskOutput, WebFetch,
   * NotebookEdit, TodoWrite, EnterPlanMode, ExitPlanMode, AskUserQuestion; see docs/builtins.md).
   * Default: on for a session and for an agent with `filesystem` or
   * `profile: 'local'`, off otherwise. Narrowed by `allowedTools` / `disallowedTools`.
   */
  builtinTools?: boolean | undefined
  /**
   * Where the built-in WebFetch may go (Blade's `WebFetchSecurityPolicy`). By default: any public
   * http(s) host; never `localhost`, `*.local` or a private, loopback or link-local address.
   */
  webFetch?: WebFetchOptions | undefined
  // Blade options accepted for compatibility and not built here: each is warned about once
  // per process (`ARH_UNSUPPORTED_OPTION`) and ignored.
  sessionRepository?: unknown
  sessionEventStore?: unknown
  skills?: unknown
  tokenBudget?: unknown
  providerOptions?: unknown
  thinkingEnabled?: boolean | undefined
  thinkingBudget?: number | undefined
  middleware?: unknown
  plugins?: unknown
  sandbox?: unknown
  observability?: unknown
  durableEventStore?: unknown
  executionLease?: unknown
  outputFormat?: unknown
  memoryManager?: unknown
  providerRegistry?: unknown
  subagent?: unknown
  permissions?: unknown
  toolSourcePolicy?: unknown
}

/** `webFetch`: the built-in WebFetch's network boundary (docs/builtins.md, docs/security.md). */
export interface WebFetchOptions {
  /** Only these hosts: exact names or addresses, or `*.example.com` (its subdomains, not itself). */
  allowedHosts?: readonly string[] | undefined
  /** Never these hosts (same patterns); checked before `allowedHosts`. */
  blockedHosts?: readonly string[] | undefined
  /** Let WebFetch reach `localhost`, `*.local` and private, loopback or link-local addresses. Default false. */
  allowPrivateNetwork?: boolean | undefined
  /** Bytes of a response body kept (the rest is not read; the answer says `body_truncated`). Default 5242880, at most 268435456. */
  maxResponseBytes?: number | undefined
}

/** What both `createAgent`'s options and Blade's `SessionOptions` hold at the top, meaning the same. */
export interface ModelOptions {
  model: string | ModelProvider
  systemPrompt?: string | undefined
  temperature?: number | undefined
  /** An answer this limit cuts ends the run with stopReason 'max_tokens'. */
  maxOutputTokens?: number | undefined
  /**
   * Whether the model must call a tool: `'required'` (some tool) or `{ name }` (that one) holds
   * until the model has called a tool in the run, then the run's later calls are `'auto'`.
   * Default: nothing is sent (the server's own default, `'auto'` where tools are offered).
   */
  toolChoice?: ToolChoice | undefined
  /** Default 200; reaching it ends the run with stopReason 'max_turns'. */
  maxTurns?: number | undefined
  tools?: readonly (ToolDefinition<any> | BuiltinTool)[] | undefined
}

export interface AgentOptions extends ModelOptions {
  /** Default: OPENAI_API_KEY / ANTHROPIC_API_KEY / DEEPSEEK_API_KEY / AZURE_OPENAI_API_KEY / GEMINI_API_KEY from the environment. */
  apiKey?: string | undefined
  /** Default 'openai'. `azure-openai` needs `baseUrl` (the resource's endpoint); `gemini` is Google's OpenAI-compatible endpoint. */
  provider?: 'openai' | 'openai-compatible' | 'anthropic' | 'deepseek' | 'azure-openai' | 'gemini' | undefined
  baseUrl?: string | undefined
  baseURL?: string | undefined
  /** `'local'` turns the built-in tools on (as `filesystem` does); default `'server'`. */
  profile?: AgentProfile | undefined
  /** Where the built-in file tools may work (and the tools' `capabilities.filesystem`). */
  filesystem?: AgentFilesystemOptions | undefined
  advanced?: AgentAdvancedOptions | undefined
}

/** Blade's `TokenUsage`: the run's totals. */
export interface TokenUsage {
  inputTokens: number
  outputTokens: number
  totalTokens: number
  maxContextTokens: number
}
/** @deprecated Use `TokenUsage`. */
export type Usage = TokenUsage

export interface ToolCallRecord {
  id: string
  name: string
  input: JsonObject
  /** What the model was sent. */
  output: string
  /** Milliseconds from the call's first hook to its result. */
  duration: number
  isError: boolean
  status: 'success' | 'error'
  /** The result came from a PreToolUse `mock()`. */
  mocked?: boolean | undefined
  /** A result control blocked the call. */
  classification?: 'hook_denied' | 'hook_control_error' | undefined
}

export interface PromptResult {
  /** The final assistant text (Blade's name). */
  result: string
  toolCalls: ToolCallRecord[]
  usage: TokenUsage
  /** Milliseconds from `send` to the end of the run. */
  duration: number
  /** Model calls made in this run (Blade's name). */
  turnsCount: number
  /** = `result`. */
  content: string
  /** = `turnsCount`. */
  turns: number
  /** `'max_tokens'`: the last answer was cut by the output limit (its text is what came). */
  stopReason: 'done' | 'max_tokens' | 'max_turns' | 'aborted' | 'interrupted' | 'error'
  /** The calls a run paused on (`stopReason: 'interrupted'` by an `'ask'` nobody answered). */
  pendingApprovals?: PendingApproval[] | undefined
}

/** A tool call waiting for a person's decision. */
export interface PendingApproval {
  toolCallId: string
  toolName: string
  /** What the call would run with (after PreToolUse and PermissionRequest rewrites). */
  input: JsonObject
  /** SHA-256 (lowercase hex) of the RFC 8785 JSON of `{ input, toolName }`. */
  fingerprint: string
  reason: 'ask' | 'outcome_unknown' | 'deferred'
  /** With `advanced.approvalSecret`: what `approve` must be given. */
  token?: string | undefined
  /**
   * The sub-agents from the root's child down to the agent whose call waits; `[]` for the root's
   * own calls. A sub-agent's `'ask'` pauses the whole tree (§8.7).
   */
  agentPath: string[]
  /** For a sub-agent's call: the `Task` call that started that sub-agent. */
  parentToolCallId?: string | undefined
}

/** Blade's `StreamMessage` variants and fields (ours after Blade's); every event has `sessionId`. */
export type StreamEvent = { sessionId: string } & (
  | { type: 'turn_start'; turn: number }
  | { type: 'turn_end'; turn: number; finishReason: FinishReason }
  | { type: 'content'; delta: string }
  | { type: 'thinking'; delta: string }
  /** The model's arguments, before hooks. */
  /** `agentPath`: set when a sub-agent made the call (its path from this agent's child down). */
  | { type: 'tool_use'; id: string; name: string; input: JsonObject; agentPath?: string[] | undefined }
  /** A generator tool's yield. */
  | { type: 'tool_progress'; progress: JsonValue; id: string; name: string; agentPath?: string[] | undefined }

  | {
      type: 'tool_result'
      id: string
      name: string
      output: string
      isError: boolean
      display?: JsonValue | undefined
      status: 'success' | 'error'
      classification?: 'hook_denied' | 'hook_control_error' | undefined
      agentPath?: string[] | undefined
    }
  | { type: 'usage'; usage: TokenUsage }
  | { type: 'result'; subtype: 'success' | 'error'; content?: string | undefined; error?: string | undefined; result: PromptResult }
  | { type: 'error'; message: string; code?: string | undefined; error: SdkError | Error }
)
export type StreamEventType = StreamEvent['type']
/**
 * What `advanced.includeHookEvents: true` adds to a stream: a pair per hook that runs. Kept out
 * of `StreamEvent`, whose variants are Blade's (an exhaustive switch written for Blade still
 * compiles); read them as `StreamEvent | HookStreamEvent`.
 */
export type HookStreamEvent = { sessionId: string } & (
  | { type: 'hook_started'; hookId: string; event: HookEventName }
  /** `decision` when it decided: a command hook's `deny`/`allow`/`ask`, a callback's `skip`/`abort`. */
  | {
      type: 'hook_response'
      hookId: string
      event: HookEventName
      outcome: 'success' | 'error' | 'timeout' | 'cancelled'
      decision?: 'deny' | 'allow' | 'ask' | 'skip' | 'abort' | undefined
      durationMs: number
    }
)

/** A session's stream (Blade's `SessionStreamEvent`, 17 types): an agent's events, steering's
 * `turn_interrupted` and `input_applied`, and Blade's tool side-channel events (not emitted
 * here, declared so code handling them type-checks). */
export type SessionStreamEvent =
  | StreamEvent
  | ({ sessionId: string } & (
      /** A `'now'` input interrupted the model step of `turn`; its partial answer is dropped. */
      | { type: 'turn_interrupted'; inputId: string; requestId: string; turn: number }
      /** A steering input became a user message; `turn` is the first model turn that sees it. */
      | { type: 'input_applied'; inputId: string; requestId: string; priority: 'now' | 'next'; turn: number }
      | { type: 'tool_message'; id: string; name: string; content: JsonValue }
      | { type: 'tool_runtime_patch'; id: string; name: string; patch: JsonValue }
      | { type: 'tool_context_patch'; id: string; name: string; patch: JsonValue }
      | { type: 'tool_new_messages'; id: string; name: string; messages: JsonValue[] }
      | { type: 'tool_permission_updates'; id: string; name: string; updates: JsonValue[] }
    ))
/** Blade's name for a stream event (an agent's: a session's stream is `SessionStreamEvent`). */
export type StreamMessage = StreamEvent

export interface SendOptions {
  signal?: AbortSignal | undefined
  maxTurns?: number | undefined
  /** This run's `toolChoice` (default: the agent's). */
  toolChoice?: ToolChoice | undefined
}

/** `toolChoice`: OpenAI's words, sent to Anthropic as `auto` / `none` / `any` / `tool`. */
export type ToolChoice = 'auto' | 'none' | 'required' | { name: string }

/**
 * Why a model answer ended, in one vocabulary for both wire formats: `'length'` is the output
 * limit (`finish_reason: "length"`, Anthropic's `max_tokens`), `'content_filter'` the provider
 * withholding the rest (a filter, a refusal).
 */
export type FinishReason = 'stop' | 'tool_calls' | 'length' | 'content_filter'

/** One `send`'s run: its text, events and result. */
export declare class AgentResponse {
  private constructor()
  /** Blade's submission of the run. */
  readonly submission: { status: 'started'; inputId: string; requestId: string }
  /** The final assistant text; rejects with the run's error. */
  text(): Promise<string>
  /** Text deltas as they stream (a run without deltas yields its content once). */
  textStream(): AsyncIterable<string>
  /** Every event of the run; each call starts again from the first. */
  stream(): AsyncIterable<StreamEvent>
  /** Calls `listener` with each event of `type`, awaited in order before iterators see it; starts consumption. */
  on<T extends StreamEventType>(type: T, listener: (event: Extract<StreamEvent, { type: T }>) => unknown): this
  result(): Promise<PromptResult>
  readonly isSettled: boolean
}

/** A stdio MCP server: `command` started with `args`, `cwd` and an environment of only `env` and this process's `HOME`, `LOGNAME`, `PATH`, `SHELL`, `TERM` and `USER` (Windows: the MCP SDKs' list), so API keys and tokens are not inherited. */
export interface McpStdioServerConfig {
  command: string
  args?: string[] | undefined
  env?: Record<string, string> | undefined
  cwd?: string | undefined
}
/** A streamable-HTTP MCP server at `url` (no redirects). `headers` go with every request; a `${NAME}` template in one is read from the environment, for names in `allowedEnvVars` only. */
export interface McpHttpServerConfig {
  url: string
  headers?: Record<string, string> | undefined
  allowedEnvVars?: string[] | undefined
}
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig

export interface McpServerStatus {
  name: string
  /** `closed` once `close()` stopped it or its connection ended. */
  status: 'connected' | 'closed'
  toolCount: number
}

export interface McpToolInfo {
  /** As offered to the model: `mcp__<server>__<tool>`. */
  name: string
  serverName: string
  toolName: string
  description: string
  inputSchema: JsonObject
}

export interface SupportedModel {
  id: string
  name: string
  provider: string
}

/** One registered hook, as `agent.hooks()` lists it. */
export interface HookRegistration {
  /** A hook object's id; a bare callback's place (`advanced.hooks.PreToolUse[0]`); `env-webhook:<type>`. */
  id: string
  /** The canonical event (`PreToolUse` for a hook registered as `beforeToolCall`). */
  event: HookEventName
  kind: 'callback' | 'handler' | 'webhook' | 'command' | 'http' | 'environment'
  matcher: string | null
  /** The hook's own timeout (a command's, a webhook's), or the event's budget. */
  timeoutMs: number
  /** What the hook's failure does: `'block'` fails what it guards, `'continue'` logs it. */
  onFailure: 'block' | 'continue'
}

export interface Agent {
  readonly sessionId: string
  readonly isClosed: boolean
  /** The conversation so far, without the system prompt. */
  readonly messages: Message[]
  /** What is registered, per event in dispatch order; environment hooks (as a run started now would read them) last. */
  hooks(): HookRegistration[]
  /**
   * Starts a run; resolves once the run holds the session (its lease). Rejects `SESSION_BUSY`
   * while this agent's previous response is active, `SESSION_LEASED` while another agent (another
   * process) drives the session, `APPROVALS_PENDING` while a run is paused, `SESSION_CLOSED`.
   */
  send(message: UserMessageContent, options?: SendOptions): Promise<AgentResponse>
  /** Aborts the active run. */
  abort(reason?: unknown): void
  close(): Promise<void>
  /** `[{ id: 'default', name: <model>, provider: <provider> }]`. */
  supportedModels(): Promise<SupportedModel[]>
  /** Each `advanced.mcpServers` server and whether it is connected. */
  mcpServerStatus(): Promise<McpServerStatus[]>
  /** Every tool of the MCP servers (including those `allowedTools`/`disallowedTools` do not offer). */
  mcpListTools(): Promise<McpToolInfo[]>
  /** From the next run. */
  setModel(model: string): Promise<void>
  setMaxTurns(maxTurns: number): Promise<void>
  setPermissionMode(mode: PermissionMode | AgentPermissionPreset): Promise<void>
  getDefaultContext(): DefaultContext
  setDefaultContext(context: DefaultContext): void
  /** A new agent with the same options and a copy of the conversation. */
  fork(): Promise<Agent>
  /** What a paused run waits on now. */
  readonly pendingApprovals: PendingApproval[]
  /** Approves a paused call; `updatedInput` replaces its input. */
  /**
   * Records an approval. With `advanced.approvalSecret`, `token` must be the one over what will
   * run: the pending approval's own `token`, or — with `updatedInput` — `approvalToken()` of
   * that input (else `APPROVAL_TOKEN_INVALID`).
   */
  approve(toolCallId: string, options?: { updatedInput?: JsonObject | undefined; token?: string | undefined }): Promise<void>
  /** Rejects a paused call; `stop` ends the run there instead of telling the model. */
  reject(toolCallId: string, options?: { reason?: string | undefined; stop?: boolean | undefined }): Promise<void>
  /**
   * Goes on with the paused run once every waiting call has a decision (taken here or in another
   * process). Rejects `APPROVALS_PENDING`, `NOTHING_TO_RESUME` or `SESSION_LEASED`.
   */
  resume(options?: SendOptions): Promise<AgentResponse>
  [Symbol.asyncDispose](): Promise<void>
}

/** Blade's `ProviderConnectionConfig`: which provider, where, with which key and connection. */
export interface ProviderConnectionConfig extends ConnectionOptions {
  id?: string | undefined
  /**
   * `openai`, `openai-compatible`, `deepseek` and `gemini` (Google's OpenAI-compatible endpoint)
   * speak Chat Completions; `azure-openai` too, at `{baseUrl}/openai/deployments/{model}` with an
   * `api-key` header; `anthropic` speaks Messages. Any other type must be in `providerRegistry`.
   */
  type: 'openai' | 'openai-compatible' | 'anthropic' | 'deepseek' | 'azure-openai' | 'gemini' | (string & {})
  apiKey?: string | undefined
  baseUrl?: string | undefined
}

/** Blade's `RuntimeContext`: what tools receive as their context. */
export interface RuntimeContext extends DefaultContext {
  id?: string | undefined
}

/** Blade's `canUseTool(toolName, input, options)`. */
export type CanUseTool = (
  toolName: string,
  input: JsonObject,
  options: { signal: AbortSignal; toolKind: ToolKind; sideEffect: ToolSideEffect; affectedPaths: string[] },
) => AgentPermissionDecision | Promise<AgentPermissionDecision>
/** Blade's `PermissionHandler`: called with the request (as `advanced.permission` is). */
export type PermissionHandler = (request: AgentPermissionRequest) => AgentPermissionDecision | Promise<AgentPermissionDecision>

/**
 * Blade's `SessionOptions` (`createSession`, `resumeSession`, `forkSession`, `prompt`): the keys
 * of `AgentAdvancedOptions` at the top, `provider` an object. One reader serves both shapes.
 */
export interface SessionOptions extends ModelOptions, Omit<AgentAdvancedOptions, 'connection' | 'providerRegistry' | 'permission'> {
  provider: ProviderConnectionConfig
  /** Models of the caller's own, by `provider.type`. */
  providerRegistry?: ProviderRegistry | undefined
  /** Blade's modes; with a handler, `'plan'` still denies every call that is not read-only first. */
  permissionMode?: PermissionMode | undefined
  /** Decides each call (before `canUseTool`, as Blade picks). */
  permissionHandler?: PermissionHandler | undefined
  canUseTool?: CanUseTool | undefined
  /** Ours, as `advanced.permission`; not beside the three above. */
  permission?: AgentPermission | undefined
  defaultContext?: RuntimeContext | undefined
  durableExecutionLeaseStore?: unknown
  durableStoreTimeoutMs?: number | undefined
  agentSessionRepository?: unknown
}

/** Options of a session's `send`. `signal`, `maxTurns`, `toolChoice` and `context` only start a request (refused while one runs: `SESSION_INPUT_OPTIONS_UNSUPPORTED`). */
export interface SessionSendOptions extends SendOptions {
  /** While a request runs: `'next'` (default) at its next safe point, `'now'` interrupting the model step, `'later'` as a request of its own. */
  priority?: InputPriority | undefined
  /** The request the input is meant for; another one active (or none) rejects `SESSION_REQUEST_MISMATCH`. */
  expectedRequestId?: string | undefined
  /** Accepted and ignored (warned once): use `setDefaultContext()`. */
  context?: RuntimeContext | undefined
}

export declare const InputPriority: { readonly NOW: 'now'; readonly NEXT: 'next'; readonly LATER: 'later' }
export type InputPriority = (typeof InputPriority)[keyof typeof InputPriority]

/** What `session.send` did with an input. */
export type InputSubmission =
  | { status: 'started'; inputId: string; requestId: string }
  | { status: 'steered'; inputId: string; requestId: string; priority: 'now' | 'next' }
  | { status: 'queued'; inputId: string; priority: 'later' }

/** An input waiting to be applied. */
export interface PendingSessionInput {
  inputId: string
  content: UserMessageContent
  priority: InputPriority
  targetRequestId?: string | undefined
  /** Milliseconds since the epoch. */
  acceptedAt: number
}

/** Blade's `ToolExecutionRecord`: one call of a `PromptResult` (`ToolCallRecord` is one, with more fields). */
export interface ToolExecutionRecord {
  id: string
  name: string
  input: JsonObject
  output: string
  duration: number
  isError?: boolean | undefined
}

/** Blade's `ISession`. */
export interface ISession {
  readonly sessionId: string
  /** The conversation so far, without the system prompt. */
  readonly messages: Message[]
  readonly isClosed: boolean
  /** Starts a request on an idle session; steers or queues while one runs. Rejects `Session is closed` after `close()`. */
  send(message: UserMessageContent, options?: SessionSendOptions): Promise<InputSubmission>
  /** The events of the oldest request not streamed yet (or of the first input queued `'later'`); throws `No pending message. Call send() before stream().` when there is none. */
  stream(options?: { includeThinking?: boolean | undefined }): AsyncGenerator<SessionStreamEvent, void, unknown>
  getPendingInputs(): PendingSessionInput[]
  /** `true` once removed; `false` when the loop took it already (or it is unknown). */
  cancelInput(inputId: string): Promise<boolean>
  /** Ends the active request, not the session. */
  abort(): Promise<void>
  /** Aborts active work, stops MCP servers, runs SessionEnd once; idempotent. */
  close(): Promise<void>
  /** A new session (new id) with a copy of the conversation. `messageId` is refused: messages carry no ids here. */
  fork(options?: { messageId?: undefined }): Promise<ISession>
  getDefaultContext(): DefaultContext
  setDefaultContext(context: DefaultContext): void
  setPermissionMode(mode: PermissionMode | AgentPermissionPreset): Promise<void>
  setModel(model: string): Promise<void>
  setMaxTurns(maxTurns: number): Promise<void>
  supportedModels(): Promise<SupportedModel[]>
  mcpServerStatus(): Promise<McpServerStatus[]>
  mcpListTools(): Promise<McpToolInfo[]>
  /** Ours (approvals): as on an `Agent`; `resume()`'s request is read with `stream()`. */
  readonly pendingApprovals: PendingApproval[]
  approve(toolCallId: string, options?: { updatedInput?: JsonObject | undefined; token?: string | undefined }): Promise<void>
  reject(toolCallId: string, options?: { reason?: string | undefined; stop?: boolean | undefined }): Promise<void>
  resume(options?: SendOptions): Promise<InputSubmission>
  [Symbol.asyncDispose](): Promise<void>
}
export type Session = ISession

/** A model of the caller's own (Blade's `IChatService`): `streamChat` or `chat`. */
export interface ProviderModel {
  chat?(messages: ScriptRequest['messages'], tools?: JsonObject[]): Promise<{ content?: string | undefined; toolCalls?: Array<{ id?: string | undefined; function: { name: string; arguments: string } }> | undefined; usage?: { promptTokens?: number | undefined; completionTokens?: number | undefined; totalTokens?: number | undefined } | undefined }>
  streamChat?(messages: ScriptRequest['messages'], tools?: JsonObject[]): AsyncIterable<{
    content?: string | undefined
    toolCalls?: Array<{ index?: number | undefined; id?: string | undefined; function?: { name?: string | undefined; arguments?: string | undefined } | undefined }> | undefined
    finishReason?: string | undefined
    usage?: { promptTokens?: number | undefined; completionTokens?: number | undefined; totalTokens?: number | undefined } | undefined
  }>
  [member: string]: unknown
}
export interface ProviderDefinition {
  type: string
  create(config: ProviderConnectionConfig & { model: string | ModelProvider }): ProviderModel
}
/** Blade's `ProviderRegistry`: model providers of the caller's own, by `type`. */
export declare class ProviderRegistry {
  constructor(providers?: ProviderDefinition[])
  register(provider: ProviderDefinition): this
  has(type: string): boolean
  get(type: string): ProviderDefinition | undefined
  list(): string[]
}

/** Blade's `createSession`: resolves once SessionStart has run. */
export declare function createSession(options: SessionOptions): Promise<ISession>
/** A stored session (`storagePath` or `store`), in this process, with the same `sessionId`; an unknown id rejects `SESSION_NOT_FOUND`. */
export declare function resumeSession(options: SessionOptions & { sessionId: string }): Promise<ISession>
/** A new session with a copy of the stored session's conversation. */
export declare function forkSession(options: SessionOptions & { sessionId: string; messageId?: undefined }): Promise<ISession>

export declare function createAgent(options: AgentOptions): Promise<Agent>
/**
 * Opens a stored session in this process (any process that reaches its store): its
 * conversation and pending approvals come back, SessionStart fires with `isResume: true`, its
 * stored webhook hooks run first, then the hooks of `options`, then environment hooks.
 * Rejects `SESSION_NOT_FOUND` for an unknown id, `STORE_ERROR` when the store cannot be read.
 */
export declare function resumeAgent(options: AgentOptions & { sessionId: string }): Promise<Agent>
/** One-shot: create an agent, send the message, close it; `createAgent`'s options or Blade's `SessionOptions`. */
export declare function prompt(message: UserMessageContent, options: AgentOptions): Promise<PromptResult>
export declare function prompt(message: UserMessageContent, options: SessionOptions): Promise<PromptResult>
/** The built-in tools' names. */
export type BuiltinToolName =
  | 'Read'
  | 'Write'
  | 'Edit'
  | 'Glob'
  | 'Grep'
  | 'Bash'
  | 'KillShell'
  | 'TaskOutput'
  | 'WebFetch'
  | 'NotebookEdit'
  | 'TodoWrite'
  | 'EnterPlanMode'
  | 'ExitPlanMode'
  | 'AskUserQuestion'
/** One of `getBuiltinTools()`: a tool that runs in Rust, for `tools: [...]`. */
export interface BuiltinTool {
  readonly name: BuiltinToolName
  readonly description: string
  readonly parameters: JsonSchemaObject
  readonly kind: ToolKind
  readonly sideEffect: ToolSideEffect
  readonly builtin: BuiltinToolName
}
/** The built-in tools, as tool objects (Blade's `getBuiltinTools()`); Blade's options are accepted and not read. */
export declare function getBuiltinTools(options?: unknown): BuiltinTool[]
/**
 * The hooks of a Claude Code settings file (`.claude/settings.json`), or of its parsed object,
 * as command and HTTP hook objects in file order, ready for `advanced.hooks`. Entries this runtime cannot
 * run as Claude Code would (an event it does not fire, `prompt`/`agent`/`mcp_tool`
 * entries, `async`, `if`) throw a `ConfigError` naming the entry, unless `unsupported: 'skip'`.
 */
export declare function loadClaudeHooks(
  source: string | { hooks?: Record<string, unknown> },
  options?: { unsupported?: 'error' | 'skip' | undefined },
): Array<CommandHookObject | HttpHookObject>
/** A tool whose input is described by a schema library's schema: `execute`'s input is inferred from it. */
export declare function defineTool<S extends StandardSchemaV1>(definition: ToolDefinitionFields<InferSchemaOutput<S>> & { parameters: S }): ToolDefinition<InferSchemaOutput<S>>
/** A tool with a JSON Schema; `I` is the type of its input. */
export declare function defineTool<I extends JsonObject = JsonObject>(definition: ToolDefinition<I>): ToolDefinition<I>
/** Blade's helper: an execution that returns `result` at once. */
export declare function completeToolExecution<R extends ToolResult | JsonValue>(result: R): AsyncGenerator<never, R, unknown>
export declare function scriptedModel(turns: ScriptedTurn[] | ScriptFn): ModelProvider
/** Returned by `execute` when the result comes later: the call pauses (`pendingApprovals` with `reason: 'deferred'`) until `completeToolCall` publishes it. */
export declare function deferred(): Deferred
/**
 * Publishes a deferred call's result, once, from any process that reaches the store: the
 * session's stored webhook hooks see it first (after-controls, then PostToolUse); the first
 * final result wins, a denial included; later calls change nothing and get the first back.
 */
export declare function completeToolCall(options: {
  store?: { sqlite: string; postgres?: undefined } | { postgres: string; sqlite?: undefined } | undefined
  sessionId: string
  toolCallId: string
  result: JsonValue | ToolResult
}): Promise<{ published: boolean; result: { output: string; isError: boolean } }>
/**
 * Tries every queued webhook notification (`delivery: 'queue'`) of the store once now, whatever
 * its backoff (rows another process is sending right now excepted): for tests and graceful
 * shutdown. `delivered` / `failed`: this call's attempts; `remaining`: rows still queued
 * afterwards (a row given up after its `maxAttempts` is no longer queued).
 */
export declare function drainOutbox(options: {
  store?: { sqlite: string; postgres?: undefined } | { postgres: string; sqlite?: undefined } | undefined
}): Promise<{ delivered: number; failed: number; remaining: number }>
/**
 * The approval token `approve(toolCallId, { updatedInput: input, token })` needs under
 * `advanced.approvalSecret`: HMAC-SHA256 (key: `secret`) over the RFC 8785 JSON of
 * `[sessionId, toolCallId, fingerprint]` — for a sub-agent's call `[sessionId, agentPath, toolCallId,
 * fingerprint]` —, the fingerprint being that of `{ input, toolName }`. Only the secret's holder
 * can make it, so whoever relays a pending approval cannot change the input that runs, nor move
 * the approval to another sub-agent's call.
 */
export declare function approvalToken(options: {
  secret: string
  sessionId: string
  toolCallId: string
  toolName: string
  input: JsonObject
  /** The pending approval's `agentPath` (default `[]`, the root's calls). */
  agentPath?: string[] | undefined
}): string
/**
 * Sends the spans batched for OpenTelemetry export now. Export is on when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and
 * `OTEL_SDK_DISABLED` is not `true`) when the process makes its first agent. Resolves at once
 * when export is off; rejects with the reason when the endpoint could not take them.
 */
export declare function flushTelemetry(): Promise<void>
