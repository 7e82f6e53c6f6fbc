// The builtins benchmark's child processes: one per system, so each is measured in a process that
// loads only that system. The parent writes one JSON request per line to the child's stdin; the
// child answers each with one JSON line on stdout, in order.
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

/** In the child: answers every request line with `await handle(request)`. */
export function serve(handle) {
  const lines = createInterface({ input: process.stdin })
  let queue = Promise.resolve()
  lines.on('line', (line) => {
    queue = queue.then(async () => {
      let reply
      try {
        reply = await handle(JSON.parse(line))
      } catch (error) {
        reply = { failed: String(error?.stack ?? error) }
      }
      process.stdout.write(`${JSON.stringify(reply)}\n`)
    })
  })
  lines.on('close', () => queue.then(() => process.exit(0)))
}

/** In the parent: starts `script` (beside this file) with `env` merged into the environment. */
export function startChild(script, env = {}) {
  const child = spawn(process.execPath, ['--max-old-space-size=8192', fileURLToPath(new URL(script, import.meta.url))], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  })
  const waiting = []
  let buffered = ''
  child.stdout.setEncoding('utf8')
  child.stdout.on('data', (part) => {
    buffered += part
    let end
    while ((end = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, end)
      buffered = buffered.slice(end + 1)
      waiting.shift()?.resolve(JSON.parse(line))
    }
  })
  child.on('exit', (code) => {
    for (const pending of waiting.splice(0)) pending.reject(new Error(`${script} exited (${code}) before answering`))
  })
  return {
    call(request) {
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject })
        child.stdin.write(`${JSON.stringify(request)}\n`)
      })
    },
    stop() {
      child.stdin.end()
      return new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve()))
    },
  }
}
