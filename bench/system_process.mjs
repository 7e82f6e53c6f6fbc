// One system's child process, kept for a whole benchmark and asked for one measurement at a
// time, so that repeats can interleave across systems (A B C … A B C …) and each process loads
// one system's modules only. The child is `script` run with the system's name as its argument;
// it sends `{ ready: true }` once loaded, then answers each request with `{ ok }` or `{ error }`.
import { fork } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

/** Idle and total time of all CPUs so far, in jiffies (`/proc/stat`); `null` off Linux. */
function cpuTimes() {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number)
    return { idle: fields[3] + (fields[4] ?? 0), total: fields.reduce((sum, value) => sum + value, 0) }
  } catch {
    return null
  }
}

/**
 * Waits, up to `limitMs`, for a window of `windowMs` in which the machine's CPUs were at least 90%
 * idle, so that what one system's process still does after its run (a collection finishing, code
 * compiled on a background thread) is not timed as part of the next system's run.
 */
export async function quietMachine({ windowMs = 50, limitMs = 2000 } = {}) {
  let before = cpuTimes()
  if (before === null) return
  const deadline = Date.now() + limitMs
  while (Date.now() < deadline) {
    await sleep(windowMs)
    const after = cpuTimes()
    const total = after.total - before.total
    if (total > 0 && (after.idle - before.idle) / total >= 0.9) return
    before = after
  }
}

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
      await quietMachine()
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
