// Runs a script in a child Node process, with the package's entry point in `process.env.ENTRY`,
// the test process's environment without its OTEL_* variables, and `env`.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'

const entry = resolve(__dirname, '..', '..', 'index.js')

export interface ChildResult {
  code: number | null
  stdout: string
  stderr: string
  timedOut: boolean
}

export function runScript(source: string, { timeoutMs = 8000, env = {} }: { timeoutMs?: number; env?: Record<string, string> } = {}): Promise<ChildResult> {
  return new Promise((done) => {
    const started = Date.now()
    // A child decides from OTEL_* whether it exports spans: only what the test gives counts.
    const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')))
    execFile(process.execPath, ['-e', source], { timeout: timeoutMs, env: { ...inherited, ...env, ENTRY: entry } }, (error, stdout, stderr) => {
      const timedOut = Boolean(error && (error as any).killed) && Date.now() - started >= timeoutMs - 100
      done({ code: error ? ((error as any).code ?? null) : 0, stdout, stderr, timedOut })
    })
  })
}
