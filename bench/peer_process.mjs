// Starts a helper server of the benchmarks in its own process. The script prints its port on
// the first line of stdout and stops when its stdin closes.
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'

export async function startProcess(script, env = {}) {
  const child = spawn(process.execPath, [fileURLToPath(new URL(script, import.meta.url))], { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...env } })
  let output = ''
  child.stdout.on('data', (part) => (output += part))
  while (!output.includes('\n')) await once(child.stdout, 'data')
  return {
    port: Number(output.split('\n')[0]),
    /** Closes its stdin and resolves with everything it printed. */
    async stop() {
      child.stdin.end()
      await once(child, 'exit')
      return output
    },
  }
}
