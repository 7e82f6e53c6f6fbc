// How the demo shows what happened: it times every hook, notes each decision, prints the run's
// stream with each decision beside the tool call it was about, and ends with a summary table.
//
// What is timed: a JS hook, the permission function and the confirmation handler from the call
// to the settling of what they return (performance.now(), inside JS; the runtime's own dispatch
// cost is not included); the policy server from the arrival of the webhook request to the
// moment its answer is sent.
import { performance } from 'node:perf_hooks'
import { createInterface } from 'node:readline/promises'

const clip = (text, max = 96) => (text.length > max ? `${text.slice(0, max - 1)}…` : text)
const oneLine = (text) => clip(String(text).split('\n').filter(Boolean).slice(0, 3).join(' | '))
const time = (us) => (us < 1000 ? `${Math.round(us)} µs` : us < 1e6 ? `${(us / 1000).toFixed(1)} ms` : `${(us / 1e6).toFixed(1)} s`)
/** Calls `fn`, then `after(value, µs)` once what it returned has settled (synchronously if it was not a promise). */
function timed(fn, after) {
  const started = performance.now()
  const value = fn()
  const settle = (settled) => after(settled, (performance.now() - started) * 1000)
  return value && typeof value.then === 'function' ? value.then(settle) : settle(value)
}
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b)
  const middle = sorted.length >> 1
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}
const ROWS = ['UserPromptSubmit', 'PreToolUse', 'permission', 'confirmation', 'beforeToolCall', 'PostToolUse']

export function createReport({ interactive, write = (text) => process.stdout.write(text) }) {
  const paint = (code, text) => (process.stdout.isTTY ? `\x1b[${code}m${text}\x1b[0m` : text)
  const line = (text = '') => write(`${text}\n`)
  const runs = [] // { event, who, key, us, decision? }
  const waiting = new Map() // key -> decision lines not printed yet
  const anchored = new Set() // keys whose anchor (a tool_result, the first turn) was printed
  const shown = new Set() // tool call ids whose tool_use was printed
  const onShown = new Map() // tool call id -> resolve(), for the interactive prompt
  const asks = new Map() // tool name + arguments -> tool call id, from the permission function

  function decide(event, who, key, us, what) {
    runs.push({ event, who, key, us, decision: what })
    if (!what) return
    const text = `  ${paint('1;33', '⚑')} ${event.padEnd(16)} ${who}: ${what}  [${time(us)}]`
    if (anchored.has(key)) line(text)
    else waiting.set(key, [...(waiting.get(key) ?? []), text])
  }
  function flush(key) {
    anchored.add(key)
    for (const text of waiting.get(key) ?? []) line(text)
    waiting.delete(key)
  }

  /** Wraps a hook object's handler: it runs unchanged, timed, and what it decided is noted. */
  function hook(definition) {
    if (!definition.handler) return definition
    return {
      ...definition,
      handler(event) {
        let mocked = false
        if (event.mock) {
          const mock = event.mock
          event.mock = (result) => (mocked = mock(result))
        }
        return timed(() => definition.handler(event), (output, us) => {
          const tool = `${event.toolName} ${JSON.stringify(event.toolInput)}`
          let what
          if (mocked) what = `answered ${tool} with mock(); the tool did not run`
          else if (output?.action === 'abort' || output?.action === 'skip') what = `${output.action === 'abort' ? 'blocked' : 'skipped'} ${tool}`
          else if (event.event === 'UserPromptSubmit' && output?.modifiedInput) {
            const prompt = String(output.modifiedInput.userPrompt ?? output.modifiedInput)
            what = prompt.endsWith(event.userPrompt) ? `rewrote the prompt: put "${prompt.slice(0, -event.userPrompt.length).trim()}" in front` : `rewrote the prompt to "${clip(prompt, 60)}"`
          } else if (output?.modifiedInput) what = `rewrote the input of ${tool}`
          else if (output?.modifiedOutput !== undefined && output.modifiedOutput !== event.toolOutput) {
            const changed = String(output.modifiedOutput).split('\n').find((text) => !String(event.toolOutput).includes(text))
            what = `rewrote the output of ${tool}: "${changed}"`
          }
          decide(event.event, `${definition.id} (JS)`, event.toolCallId ?? 'prompt', us, what)
          return output
        })
      },
    }
  }

  /** Wraps `advanced.permission`: timed; an 'ask' or a denial is a decision. */
  function permission(decideRequest) {
    return (request) =>
      timed(() => decideRequest(request), (answer, us) => {
        const behavior = typeof answer === 'string' ? answer : answer.behavior
        if (behavior === 'ask') asks.set(request.toolName + JSON.stringify(request.input), request.toolCallId)
        const what = behavior === 'allow' ? undefined : `${behavior === 'ask' ? 'asks before' : 'denies'} ${request.toolName} ${JSON.stringify(request.affectedPaths)} (kind ${request.kind})`
        decide('permission', 'permission()', request.toolCallId, us, what)
        return answer
      })
  }

  /** Wraps `advanced.confirmationHandler`: timed (a person's answer included), always a decision. */
  function confirmation(handler) {
    return {
      async requestConfirmation(request) {
        const key = asks.get(request.toolName + JSON.stringify(request.args))
        // At a terminal, ask only once the transcript has shown the call being asked about.
        if (interactive) await new Promise((resolve) => (shown.has(key) ? resolve() : onShown.set(key, resolve)))
        return timed(() => handler.requestConfirmation(request), (answer, us) => {
          const how = interactive ? 'by you' : 'automatically (stdout is not a terminal)'
          const what = `${answer.approved ? 'approved' : 'rejected'} ${request.toolName} ${JSON.stringify(request.affectedFiles)} ${how}`
          decide('confirmation', 'confirmationHandler', key, us, what)
          return answer
        })
      },
    }
  }

  /** A y/n question at the terminal, for the interactive confirmation handler. */
  async function askUser({ title, message, abortSignal }) {
    const terminal = createInterface({ input: process.stdin, output: process.stdout })
    terminal.on('SIGINT', () => process.exit(130)) // Ctrl-C at the question ends the demo
    try {
      const reply = await terminal.question(`  ${paint('1;36', '?')} ${title} ${message} [y/n] `, { signal: abortSignal })
      return /^y(es)?$/i.test(reply.trim()) ? { approved: true } : { approved: false, reason: 'you said no' }
    } finally {
      terminal.close()
    }
  }

  /** Times the policy server's answers (request in → answer sent) and notes its decisions. */
  function watchPolicyServer(server) {
    server.prependListener('request', (request, response) => {
      const started = performance.now()
      const chunks = []
      request.on('data', (chunk) => chunks.push(chunk))
      const end = response.end
      let answer = ''
      response.end = function (body, ...rest) {
        answer = body ?? ''
        return end.call(this, body, ...rest)
      }
      response.on('finish', () => {
        const payload = JSON.parse(Buffer.concat(chunks).toString() || '{}')
        const { decision, reason } = answer ? JSON.parse(answer) : {}
        const tool = `${payload.toolName} ${JSON.stringify(payload.toolInput)}`
        const what = decision ? `${decision === 'allow' ? 'allowed' : 'denied'} ${tool}${reason ? ` (${reason})` : ''}` : undefined
        decide(payload.hookType ?? 'webhook', `${payload.hookId} (webhook)`, payload.toolCallId, (performance.now() - started) * 1000, what)
      })
    })
    return server
  }

  let inText = false
  /** Prints one stream event; decisions print beside the event they were about. */
  function print(event, agent) {
    if (inText && event.type !== 'content') {
      write('\n')
      inText = false
    }
    switch (event.type) {
      case 'turn_start':
        if (event.turn === 1) flush('prompt')
        line(paint('2', `── model turn ${event.turn}`))
        if (event.turn === 1) {
          line(`  model received: "${clip(agent.messages.find((message) => message.role === 'user')?.content ?? '')}"`)
        }
        break
      case 'content':
        if (!inText) write('  assistant: ')
        inText = true
        write(event.delta)
        break
      case 'tool_use':
        line(`  → ${event.name} ${clip(JSON.stringify(event.input))}`)
        shown.add(event.id)
        onShown.get(event.id)?.()
        break
      case 'tool_result':
        flush(event.id)
        line(paint('2', `  ← ${event.name} ${event.status}: ${oneLine(event.output)}`))
        break
      case 'result':
        line(paint('2', `── done: ${event.result.turns} model turns, ${event.result.toolCalls.length} tool calls, stop reason ${event.result.stopReason}`))
        break
      case 'error':
        line(`── failed: ${event.message}`)
        process.exitCode = 1
        break
    }
  }

  /** The closing table: per event, callbacks run, decisions, median time per dispatch. */
  function summary() {
    for (const key of [...waiting.keys()]) flush(key) // decisions about calls the stream never finished
    line('\nSummary (µs: inside the JS callbacks of one dispatch; for the webhook, at the policy server)')
    const header = ['event', 'who', 'callbacks run', 'decisions', 'median µs/dispatch']
    const rows = ROWS.map((event) => {
      const mine = runs.filter((run) => run.event === event)
      const perDispatch = new Map()
      for (const run of mine) perDispatch.set(run.key, (perDispatch.get(run.key) ?? 0) + run.us)
      const who = [...new Set(mine.map((run) => run.who.replace(/ \(.*\)$/, '')))].join(', ') || '-'
      return [event, who, String(mine.length), String(mine.filter((run) => run.decision).length), mine.length ? String(Math.round(median([...perDispatch.values()]))) : '-']
    })
    const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)))
    const format = (row) => `  ${row.map((cell, column) => (column < 2 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]))).join('  ')}`.trimEnd()
    line(format(header))
    for (const row of rows) line(format(row))
  }

  return { hook, permission, confirmation, askUser, watchPolicyServer, print, summary, line }
}
