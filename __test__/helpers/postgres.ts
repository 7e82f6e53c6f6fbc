// A PostgreSQL database of a test suite's own: created before its tests and dropped after them.
// With no server (or no psql) at ARH_TEST_POSTGRES_URL (default
// postgres://postgres@127.0.0.1:5432/postgres), the suite's tests skip themselves and a line says why.
import { execFileSync } from 'node:child_process'
import { afterAll, beforeAll } from 'vitest'

export const adminUrl = new URL(process.env.ARH_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres')

/** Runs `sql` with psql on database `at` (the admin database by default): its output, unaligned. */
export function psql(sql: string, at = adminUrl.toString()): string {
  return execFileSync('psql', [at, '-v', 'ON_ERROR_STOP=1', '-qAtc', sql], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 10_000 }).toString()
}

/**
 * Registers, in the enclosing suite, the creation of a database named `<prefix>_<pid>_<time>` and
 * its removal. `available()` says whether it was created; `url()` is its URL. `what` names the
 * tests in the line printed when they are skipped.
 */
export function scratchDatabase(prefix: string, what: string) {
  const name = `${prefix}_${process.pid}_${Date.now()}`
  let available = false
  beforeAll(() => {
    try {
      psql(`CREATE DATABASE ${name}`)
      available = true
    } catch (error) {
      // psql's own words (connection refused, no such role) before the exec wrapper's.
      const stderr = String((error as { stderr?: unknown }).stderr ?? '').trim()
      const reason = (stderr || (error instanceof Error ? error.message : String(error))).split('\n')[0]
      process.stderr.write(`skipping ${what}: no server or psql at ${adminUrl.host} (${reason}); set ARH_TEST_POSTGRES_URL to test against one\n`)
    }
  })
  afterAll(() => {
    if (available) psql(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  })
  return {
    available: () => available,
    url: () => {
      const target = new URL(adminUrl.toString())
      target.pathname = `/${name}`
      return target.toString()
    },
  }
}
