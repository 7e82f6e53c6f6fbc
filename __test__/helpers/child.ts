// Runs a script in a child Node process, with the package's entry point in `process.env.ENTRY`,
// the test process's environment without its OTEL_* variables, and `env`.
import { execFile } from 'node:child_process'
import { resolve } from 'node:path'

const entry = resolve(__dirname, '..', '..', 'index.js')

export interface ChildResult {
  code: number | null
  /** The signal that killed the child (`SIGSEGV` for a crash), or null. */
  signal?: string | null
  stdout: string
  stderr: string
  timedOut: boolean
}

/** The test process's environment without its OTEL_* variables (a child decides from them
 * whether it exports spans: only what a test gives counts), plus `env`. */
export function childEnv(env: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('OTEL_')))
  return { ...inherited, ...env }
}

export function runScript(source: string, { timeoutMs = 8000, env = {} }: { timeoutMs?: number; env?: Record<string, string> } = {}): Promise<ChildResult> {
  return new Promise((done) => {
    const started = Date.now()
    execFile(process.execPath, ['-e', source], { timeout: timeoutMs, env: childEnv({ ...env, ENTRY: entry }) }, (error, stdout, stderr) => {
      const timedOut = Boolean(error && (error as any).killed) && Date.now() - started >= timeoutMs - 100
      done({ code: error ? ((error as any).code ?? null) : 0, signal: error ? ((error as any).signal ?? null) : null, stdout, stderr, timedOut })
    })
  })
}
