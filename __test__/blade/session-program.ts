// A Blade agent written the way third-party programs use @blade-ai/agent-sdk's session API
// (createSession with a provider object, custom tools, inline hooks, canUseTool, allowedTools,
// persistSession: false; the session kept in a class field typed `import('…').ISession`, usage
// typed `import('…').TokenUsage`, every stream event handled in one exhaustive switch).
//
// Moving it from Blade to agent-runtime-hooks changes only the module names: the original reads
//   from '@blade-ai/agent-sdk'        and        from '@blade-ai/agent-sdk/core'
// It must type-check under `strict` (__test__/blade/tsconfig.session.json resolves the package
// through its own package.json "exports", as an installed dependency would be). `runOrderDesk()`
// and `quote()` return what the program saw so that __test__/blade-session.test.ts can check it.
import {
  createSession,
  defineTool,
  prompt,
  ToolKind,
  ToolSideEffect,
  type HookCallback,
  type HookInput,
  type InputSubmission,
  type PromptResult,
  type SessionOptions,
  type SessionStreamEvent,
  type StreamMessage,
  type TokenUsage,
  type ToolExecutionRecord,
} from 'agent-runtime-hooks';
import { InputPriority } from 'agent-runtime-hooks/core';

/** Where the program's model is: an OpenAI-compatible endpoint. */
export interface Target {
  baseUrl: string;
  apiKey: string;
  model: string;
}

export interface OrderDeskRun {
  sessionId: string;
  submission: InputSubmission;
  /** Every stream event, as iterated. */
  events: SessionStreamEvent[];
  /** One line per event, as the program prints them. */
  lines: string[];
  text: string;
  usage: TokenUsage | null;
  /** Built from tool_use and tool_result events, the way prompt() reports them. */
  toolCalls: ToolExecutionRecord[];
  /** `<event>` or `<event>:<tool>`, in the order the hooks ran. */
  hookCalls: string[];
  /** What canUseTool was asked. */
  permissionCalls: Array<{ toolName: string; input: unknown; toolKind: string }>;
  /** Tools that really ran. */
  executed: string[];
  messagesAfter: number;
  closed: boolean;
}

export const SYSTEM_PROMPT = 'You run a small tea shop order desk. Be brief.';
export const ORDER_REFUSAL = 'Orders need a human on the till';
export const REFUND_REFUSAL = 'Refunds are handled by the owner';

const PRICES: Readonly<Record<string, number>> = { sencha: 12, oolong: 18 };

function buildTools(executed: string[]) {
  const lookupPrice = defineTool({
    name: 'lookup_price',
    description: 'Price of one tin of tea, in euros',
    kind: ToolKind.ReadOnly,
    sideEffect: ToolSideEffect.PURE,
    parameters: {
      type: 'object',
      properties: { tea: { type: 'string' } },
      required: ['tea'],
    },
    async *execute({ tea }: { tea: string }) {
      executed.push('lookup_price');
      yield { kind: 'progress', message: `Looking up ${tea}` };
      const price = PRICES[tea];
      const model = price === undefined ? `No tea called ${tea}` : `${tea}: ${price} EUR`;
      return { status: 'success', model, display: { summary: `Price of ${tea}` } };
    },
  });
  const placeOrder = defineTool({
    name: 'place_order',
    description: 'Order tins of tea',
    kind: ToolKind.Write,
    sideEffect: ToolSideEffect.NON_IDEMPOTENT,
    parameters: {
      type: 'object',
      properties: { tea: { type: 'string' }, tins: { type: 'integer' } },
      required: ['tea', 'tins'],
    },
    async *execute({ tea, tins }: { tea: string; tins: number }) {
      executed.push('place_order');
      return { status: 'success', model: `Ordered ${tins} x ${tea}` };
    },
  });
  const refund = defineTool({
    name: 'refund',
    description: 'Refund an order',
    kind: ToolKind.Execute,
    parameters: { type: 'object', properties: { order: { type: 'string' } }, required: ['order'] },
    async *execute({ order }: { order: string }) {
      executed.push('refund');
      return { status: 'success', model: `Refunded ${order}` };
    },
  });
  return [lookupPrice, placeOrder, refund];
}

function optionsFor(target: Target, log: Pick<OrderDeskRun, 'hookCalls' | 'permissionCalls' | 'executed'>): SessionOptions {
  const record: HookCallback = async (input: HookInput) => {
    log.hookCalls.push(input.toolName ? `${input.event}:${input.toolName}` : input.event);
    return { action: 'continue' };
  };
  // The owner's rule: refunds never run from the desk, whatever the model asks.
  const guardRefunds: HookCallback = async (input) => {
    log.hookCalls.push(`${input.event}:${input.toolName ?? ''}`);
    if (input.toolName === 'refund') return { action: 'abort', reason: REFUND_REFUSAL };
    return { action: 'continue' };
  };
  return {
    provider: { type: 'openai-compatible', apiKey: target.apiKey, baseUrl: target.baseUrl },
    model: target.model,
    systemPrompt: SYSTEM_PROMPT,
    tools: buildTools(log.executed),
    allowedTools: ['lookup_price', 'place_order', 'refund'],
    persistSession: false,
    maxTurns: 6,
    hooks: {
      SessionStart: [record],
      PreToolUse: [guardRefunds],
      PostToolUse: [record],
      SessionEnd: [record],
    },
    canUseTool: async (toolName, input, options) => {
      log.permissionCalls.push({ toolName, input, toolKind: options.toolKind });
      if (options.toolKind === 'write') return { behavior: 'deny', message: ORDER_REFUSAL };
      return { behavior: 'allow' };
    },
  };
}

/** One line for any of the 17 stream events; fails to compile if the union gains or loses one. */
export function describeEvent(event: SessionStreamEvent): string {
  switch (event.type) {
    case 'turn_start':
      return `turn ${event.turn} started`;
    case 'turn_end':
      return `turn ${event.turn} ended`;
    case 'turn_interrupted':
      return `turn ${event.turn} interrupted by ${event.inputId} (${event.requestId})`;
    case 'input_applied':
      return `input ${event.inputId} applied (${event.priority}) at turn ${event.turn} of ${event.requestId}`;
    case 'content':
      return `text: ${event.delta}`;
    case 'thinking':
      return `thinking: ${event.delta}`;
    case 'tool_use':
      return `tool ${event.name} (${event.id}) called with ${JSON.stringify(event.input)}`;
    case 'tool_progress':
      return `tool ${event.name} progress ${JSON.stringify(event.progress)}`;
    case 'tool_message':
      return `tool ${event.name} says ${JSON.stringify(event.content)}`;
    case 'tool_runtime_patch':
      return `tool ${event.name} runtime patch ${JSON.stringify(event.patch)}`;
    case 'tool_context_patch':
      return `tool ${event.name} context patch ${JSON.stringify(event.patch)}`;
    case 'tool_new_messages':
      return `tool ${event.name} added ${event.messages.length} message(s)`;
    case 'tool_permission_updates':
      return `tool ${event.name} permission updates ${JSON.stringify(event.updates)}`;
    case 'tool_result':
      return `tool ${event.name} ${event.isError ? 'failed' : 'completed'}: ${typeof event.output === 'string' ? event.output : JSON.stringify(event.output)}`;
    case 'usage':
      return `usage ${event.usage.inputTokens}+${event.usage.outputTokens}=${event.usage.totalTokens}`;
    case 'result':
      return event.subtype === 'success' ? `done: ${event.content ?? ''}` : `failed: ${event.error ?? ''}`;
    case 'error':
      return `error${event.code ? ` ${event.code}` : ''}: ${event.message}`;
    default: {
      const unreachable: never = event;
      return unreachable;
    }
  }
}

/** A desk that keeps its session between questions, as BladeDiagramAgent does. */
export class OrderDesk {
  private session: import('agent-runtime-hooks').ISession | null = null;
  private lastUsage: import('agent-runtime-hooks').TokenUsage | null = null;
  readonly log = { hookCalls: [] as string[], permissionCalls: [] as OrderDeskRun['permissionCalls'], executed: [] as string[] };

  constructor(private readonly target: Target) {}

  async open(): Promise<string> {
    this.session = await createSession(optionsFor(this.target, this.log));
    return this.session.sessionId;
  }

  async ask(question: string): Promise<Omit<OrderDeskRun, 'hookCalls' | 'permissionCalls' | 'executed' | 'closed'>> {
    const session = this.session;
    if (!session) throw new Error('open() first');
    const submission = await session.send(question, { priority: InputPriority.NEXT });
    const events: SessionStreamEvent[] = [];
    const lines: string[] = [];
    const toolCalls: ToolExecutionRecord[] = [];
    const started = new Map<string, number>();
    let text = '';
    for await (const event of session.stream()) {
      events.push(event);
      lines.push(describeEvent(event));
      if (event.type === 'content') text += event.delta;
      if (event.type === 'usage') this.lastUsage = event.usage;
      if (event.type === 'tool_use') {
        started.set(event.id, Date.now());
        toolCalls.push({ id: event.id, name: event.name, input: event.input, output: '', duration: 0 });
      }
      if (event.type === 'tool_result') {
        const call = toolCalls.find((candidate) => candidate.id === event.id);
        if (call) {
          call.output = event.output;
          call.duration = Date.now() - (started.get(event.id) ?? Date.now());
          if (event.isError !== undefined) call.isError = event.isError;
        }
      }
    }
    return { sessionId: session.sessionId, submission, events, lines, text, usage: this.lastUsage, toolCalls, messagesAfter: session.messages.length };
  }

  async close(): Promise<boolean> {
    await this.session?.close();
    return this.session?.isClosed ?? false;
  }
}

/** The whole program: open the desk, ask one question, close. */
export async function runOrderDesk(target: Target, question: string): Promise<OrderDeskRun> {
  const desk = new OrderDesk(target);
  await desk.open();
  try {
    const run = await desk.ask(question);
    return { ...run, ...desk.log, closed: await desk.close() };
  } finally {
    await desk.close();
  }
}

/** The one-shot form of the same desk. */
export async function quote(target: Target, question: string): Promise<PromptResult & { executed: string[] }> {
  const log = { hookCalls: [] as string[], permissionCalls: [] as OrderDeskRun['permissionCalls'], executed: [] as string[] };
  const result: PromptResult = await prompt(question, optionsFor(target, log));
  // A StreamMessage is the same thing as a SessionStreamEvent (Blade keeps both names).
  const sameType = (event: StreamMessage): SessionStreamEvent => event;
  void sameType;
  return { ...result, executed: log.executed };
}
