// One system's child process, kept for a whole benchmark and asked for one measurement at a
// time, so that repeats can interleave across systems (A B C … A B C …) and each process loads
// one system's modules only. The child is `script` run with the system's name as its argument;
// it sends `{ ready: true }` once loaded, then answers each request with `{ ok }` or `{ error }`.
import { fork } from 'node:child_process'

export function startSystem(script, system) {
  const worker = fork(script, [system], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  let waiting
  worker.on('message', (message) => waiting?.(message))
  worker.on('exit', (code) => waiting?.({ error: `${system}'s process exited (${code})` }))
  const next = () => new Promise((resolve) => (waiting = resolve))
  const ready = next()
  return {
    ready: ready.then((message) => {
      if (message.error) throw new Error(message.error)
    }),
    /** Sends `request` and resolves with the child's answer. */
    async measure(request) {
      const answer = next()
      worker.send(request)
      const message = await answer
      if (message.error) throw new Error(`${system}: ${message.error}`)
      return message.ok
    },
    stop: () => worker.kill(),
  }
}

/** In the child: answers each request with `measure(request)`'s value, or the error it threw,
 * then tells the parent it is ready. */
export function serveRequests(measure) {
  process.on('message', async (request) => {
    try {
      process.send({ ok: await measure(request) })
    } catch (error) {
      process.send({ error: error.stack ?? String(error) })
    }
  })
  process.send({ ready: true })
}
