// The durable-approval peer: LangGraph's `interrupt()` + `Command({ resume })` on its own
// checkpointers, in the flow bench/approvals.mjs runs for ours — `sessions` sessions each send a
// message, the model asks for one `write` call, the call pauses for a person, and every session's
// state is in the store; then each is resumed with an approval, the tool runs, the model answers.
// The graph is the ReAct shape (agent → tools → agent) written as a StateGraph with a scripted
// agent node, as LangGraph's human-in-the-loop docs show; the tools node asks `interrupt()`
// before running the tool. The resume phase compiles the graph again on the same saver, as another
// process would.
import { Annotation, Command, END, interrupt, START, StateGraph } from '@langchain/langgraph'
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite'

let executions = 0
const Conversation = Annotation.Root({ messages: Annotation({ reducer: (left, right) => left.concat(right), default: () => [] }) })

function graphOn(checkpointer) {
  return new StateGraph(Conversation)
    .addNode('agent', (state) => {
      const answered = state.messages.some((message) => message.role === 'tool')
      return { messages: [answered ? { role: 'assistant', content: 'done' } : { role: 'assistant', content: '', toolCalls: [{ id: 'w0', name: 'write', input: { i: 0 } }] }] }
    })
    .addNode('tools', (state) => {
      const call = state.messages.at(-1).toolCalls[0]
      const decision = interrupt({ toolCallId: call.id, toolName: call.name, input: call.input })
      if (decision !== 'approve') return { messages: [{ role: 'tool', toolCallId: call.id, content: 'rejected' }] }
      executions++
      return { messages: [{ role: 'tool', toolCallId: call.id, content: 'ok' }] }
    })
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (state) => (state.messages.at(-1).toolCalls ? 'tools' : END))
    .addEdge('tools', 'agent')
    .compile({ checkpointer })
}

/** A SQLite saver on `path`; `synchronous` is `'default'` (the saver's own setting) or `'FULL'`. */
export function sqliteSaver(path, synchronous) {
  const saver = SqliteSaver.fromConnString(path)
  if (synchronous === 'FULL') saver.db.pragma('synchronous = FULL')
  return saver
}

/** The saver's durability settings, as it runs. */
export function sqliteSettings(saver) {
  return { journal_mode: saver.db.pragma('journal_mode', { simple: true }), synchronous: ['OFF', 'NORMAL', 'FULL', 'EXTRA'][saver.db.pragma('synchronous', { simple: true })] }
}

/** `sessions` threads pause concurrently, then each is resumed; wall times in ms. */
export async function pauseAndResume(saver, sessions, prefix) {
  const before = executions
  const started = performance.now()
  const paused = graphOn(saver)
  const threads = Array.from({ length: sessions }, (_, i) => ({ configurable: { thread_id: `${prefix}-${i}` } }))
  await Promise.all(
    threads.map(async (config) => {
      const state = await paused.invoke({ messages: [{ role: 'user', content: 'go' }] }, config)
      if (!state.__interrupt__?.length) throw new Error('langgraph: the call did not pause')
    }),
  )
  const pausedAt = performance.now()
  if (executions !== before) throw new Error('langgraph: a tool ran before its approval')
  const resumed = graphOn(saver)
  await Promise.all(
    threads.map(async (config) => {
      const state = await resumed.invoke(new Command({ resume: 'approve' }), config)
      if (state.messages.at(-1).content !== 'done') throw new Error(`langgraph: the resumed run ended with ${JSON.stringify(state.messages.at(-1))}`)
    }),
  )
  const finished = performance.now()
  if (executions - before !== sessions) throw new Error(`langgraph: the tool ran ${executions - before} times, expected ${sessions}`)
  return { wallMs: finished - started, pauseMs: pausedAt - started, resumeMs: finished - pausedAt }
}

/** LangGraph's PostgreSQL checkpointer on `url`, its tables created. */
export async function postgresSaver(url) {
  const { PostgresSaver } = await import('@langchain/langgraph-checkpoint-postgres')
  const saver = PostgresSaver.fromConnString(url)
  await saver.setup()
  return saver
}
