// A webhook receiver in its own process: counts deliveries and answers 204. It prints its
// port, then, on SIGTERM or stdin closing, the number of requests it received.
import { createServer } from 'node:http'

let received = 0
const server = createServer((req, res) => {
  req.resume()
  req.on('end', () => {
    received++
    res.writeHead(204).end()
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`))
const report = () => {
  process.stdout.write(`received ${received}\n`)
  process.exit(0)
}
process.on('SIGTERM', report)
process.stdin.on('end', report)
process.stdin.resume()
