// An OpenAI-compatible chat-completions server for the HTTP benchmarks, run in its own process.
// The model name says how many tool calls a run makes (`bench-200`): while the conversation has
// fewer tool results than that, the answer streams one `noop` tool call; then it streams "done".
// It prints its port on stdout and stops when stdin closes. LATENCY_MS delays each answer's first
// byte, as a real model's time to first token would.
import { createServer } from 'node:http'

const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`

const LATENCY_MS = Number(process.env.LATENCY_MS ?? 0)

const server = createServer((req, res) => {
  let text = ''
  req.on('data', (part) => (text += part))
  req.on('end', () => (LATENCY_MS ? setTimeout(answer, LATENCY_MS) : answer()))
  function answer() {
    const body = JSON.parse(text)
    const wanted = Number(/(\d+)$/.exec(body.model)?.[1] ?? 1)
    const done = body.messages.filter((message) => message.role === 'tool').length
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    if (done < wanted) {
      res.write(chunk({ role: 'assistant', content: null, tool_calls: [{ index: 0, id: `call_${done}`, type: 'function', function: { name: 'noop', arguments: '' } }] }))
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: `{"i":${done}}` } }] }))
      res.write(chunk({}, 'tool_calls'))
    } else {
      res.write(chunk({ role: 'assistant', content: 'do' }))
      res.write(chunk({ content: 'ne' }))
      res.write(chunk({}, 'stop'))
    }
    if (body.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ id: 'c', choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })}\n\n`)
    res.end('data: [DONE]\n\n')
  }
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`))
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
