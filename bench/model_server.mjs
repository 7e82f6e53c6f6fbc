// An OpenAI-compatible chat-completions server for the HTTP benchmarks, run in its own process.
// The model name says how many tool calls a run makes (`bench-200`): while the conversation has
// fewer tool results than that, the answer streams one `noop` tool call; then it streams "done".
// It prints its port on stdout and stops when stdin closes. LATENCY_MS delays each answer's first
// byte, as a real model's time to first token would. Like OpenAI's, each completion has an id of
// its own (LangChain keys a message by it: a repeated id would replace the earlier message).
// It serves streaming `POST /v1/chat/completions` only; anything else is an error, so a client
// that asks for another endpoint or for a whole JSON answer fails instead of being measured.
import { createServer } from 'node:http'

const LATENCY_MS = Number(process.env.LATENCY_MS ?? 0)
let completions = 0

const server = createServer((req, res) => {
  let text = ''
  req.on('data', (part) => (text += part))
  req.on('end', () => (LATENCY_MS ? setTimeout(answer, LATENCY_MS) : answer()))
  function answer() {
    const body = req.method === 'POST' && req.url === '/v1/chat/completions' ? JSON.parse(text) : null
    if (body?.stream !== true) {
      res.writeHead(body ? 400 : 404, { 'content-type': 'application/json' })
      return res.end(JSON.stringify({ error: { message: body ? 'this server only streams' : `no route ${req.method} ${req.url}`, type: 'invalid_request_error' } }))
    }
    const head = { id: `chatcmpl-${++completions}`, object: 'chat.completion.chunk', created: Math.floor(Date.now() / 1000), model: body.model }
    const chunk = (delta, finish = null) => `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
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
    if (body.stream_options?.include_usage) res.write(`data: ${JSON.stringify({ ...head, choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })}\n\n`)
    res.end('data: [DONE]\n\n')
  }
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`))
process.stdin.on('end', () => process.exit(0))
process.stdin.resume()
