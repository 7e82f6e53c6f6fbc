// `npm test`: builds the addon, then runs every suite — cargo test (the Rust core), tsc (types
// under strict), vitest (forks, then a worker-thread run) and Jest (VM realm) — and ends with
// one plain `N passed, N failed` line summing them all. Before vitest it sets up the real model
// servers (scripts/real-servers/setup.py); a failed setup is printed, and those tests then skip
// saying why.
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'

const scratch = mkdtempSync(join(tmpdir(), 'arh-test-'))
const totals = { passed: 0, failed: 0 }
const broken = []

const notes = []
// Each step's wall time, printed at the end: where a slow run spent its minutes.
const durations = []
// The last lines a failed or timed-out captured step printed, repeated at the end (the end of
// the output is what survives a long log).
const tails = []

// The machine's load and its busiest processes: a step slowed or timed out by something else
// running shows it here (ps's %CPU is over each process's life: one spinning since it started
// shows ~100).
function machineNote() {
  const load = loadavg()
    .map((n) => n.toFixed(2))
    .join(' ')
  let busiest = ''
  try {
    busiest = execFileSync('ps', ['-eo', 'pcpu,etimes,args', '--sort=-pcpu'], { encoding: 'utf8' })
      .split('\n')
      .slice(0, 6)
      .map((line) => line.slice(0, 160))
      .join('\n')
  } catch {}
  return `load averages ${load}${busiest ? `; busiest processes:\n${busiest}` : ''}`
}

console.log(`machine at start: ${machineNote()}`)

// CI allows 90 minutes; the run ends itself before that, so a step that hangs is named as
// timed out in the summary instead of the whole run being cut off without one.
const startedAt = Date.now()
const runBudgetMs = Number(process.env.ARH_TEST_BUDGET_MINUTES ?? 85) * 60_000

// The step running now: each runs in its own process group (so a timeout can stop all of it),
// which a Ctrl-C on this script no longer reaches by itself.
let current = null
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    try {
      if (current && process.platform !== 'win32') process.kill(-current.pid, 'SIGKILL')
    } catch {}
    process.exit(130)
  })
}

// `optional`: a failure is printed (and repeated at the end) but does not fail the run.
// `minutes`: the step's own cap (never past the run's budget); on expiry its process group is
// killed and the step fails as timed out.
function run(label, command, args, { capture = false, optional = false, minutes = 30 } = {}) {
  console.log(`\n=== ${label}: ${command} ${args.join(' ')}`)
  const allowedMs = Math.max(0, Math.min(minutes * 60_000, runBudgetMs - (Date.now() - startedAt)))
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'],
      shell: process.platform === 'win32',
      detached: process.platform !== 'win32',
    })
    current = child
    const timer = setTimeout(() => {
      console.log(`--- ${label}: still running after ${Math.round(allowedMs / 60_000)} min; stopping it`)
      // Read before the kill: what was running (or spinning) then.
      tails.push(`--- when ${label} was stopped, ${machineNote()}`)
      try {
        process.kill(process.platform === 'win32' ? child.pid : -child.pid, 'SIGKILL')
      } catch {}
      settle(`timed out after ${Math.round(allowedMs / 60_000)} min`)
    }, allowedMs)
    let output = ''
    child.stdout?.on('data', (chunk) => {
      output += chunk
      process.stdout.write(chunk)
    })
    let settled = false
    const began = Date.now()
    const settle = (code) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      durations.push(`${label} ${((Date.now() - began) / 60_000).toFixed(1)} min`)
      if (code !== 0) {
        const what = `${label} (${typeof code === 'number' ? `exit ${code}` : code})`
        if (capture) tails.push(`--- the last lines ${label} printed:\n${output.trimEnd().split('\n').slice(-30).join('\n')}`)
        if (optional) {
          notes.push(what)
          console.log(`--- ${what}: not counted as a failure`)
        } else broken.push(what)
      }
      resolve({ code, output })
    }
    child.on('error', (error) => settle(error.message))
    child.on('close', settle)
  })
}

function count(label, passed, failed) {
  totals.passed += passed
  totals.failed += failed
  console.log(`--- ${label}: ${passed} passed, ${failed} failed`)
}

function countJson(label, file) {
  try {
    const report = JSON.parse(readFileSync(file, 'utf8'))
    // A suite that failed outside any test (a failing hook, an import error) counts as a failure.
    const brokenSuites = (report.testResults ?? []).filter((suite) => suite.status === 'failed' && (suite.assertionResults ?? []).every((test) => test.status !== 'failed')).length
    count(label, report.numPassedTests, report.numFailedTests + brokenSuites)
  } catch {
    broken.push(`${label} (no report)`)
  }
}

const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx'

const build = await run('build', 'npm', ['run', 'build'], { minutes: 25 })
if (build.code !== 0) {
  console.log('\n0 passed, 1 failed')
  process.exit(1)
}

await run('cargo fmt', 'cargo', ['fmt', '--check'], { minutes: 2 })
await run('cargo clippy', 'cargo', ['clippy', '--all-targets', '--quiet', '--', '-D', 'warnings'], { minutes: 15 })

// ~7 min to compile the test profile from a clean clone and ~1.5 min to run, on 2 cores.
const cargo = await run('cargo test', 'cargo', ['test', '--quiet'], { capture: true, minutes: 30 })
let cargoPassed = 0
let cargoFailed = 0
for (const match of cargo.output.matchAll(/test result: \w+\. (\d+) passed; (\d+) failed/g)) {
  cargoPassed += Number(match[1])
  cargoFailed += Number(match[2])
}
count('cargo test', cargoPassed, cargoFailed)

await run('tsc', npx, ['tsc', '-p', 'tsconfig.json'], { minutes: 5 })
// A program in Blade's createSession style, resolved through package.json "exports" as an
// installed dependency is.
await run('tsc (Blade session programs)', npx, ['tsc', '-p', '__test__/blade/tsconfig.session.json'], { minutes: 5 })

// The real model servers of __test__/real-servers/ (a venv in .cache/real-servers); when this
// fails those tests skip, each file saying why.
await run('real-servers setup', process.platform === 'win32' ? 'python' : 'python3', ['scripts/real-servers/setup.py'], { optional: true, minutes: 35 })

const forks = join(scratch, 'vitest.json')
await run('vitest (forks)', npx, ['vitest', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${forks}`], { minutes: 30 })
countJson('vitest (forks)', forks)

const threads = join(scratch, 'vitest-threads.json')
await run('vitest (threads)', npx, ['vitest', 'run', '-c', 'vitest.threads.config.mts', '--reporter=default', '--reporter=json', `--outputFile.json=${threads}`], { minutes: 25 })
countJson('vitest (threads)', threads)

const jest = join(scratch, 'jest.json')
await run('jest', npx, ['jest', '--json', `--outputFile=${jest}`], { minutes: 15 })
countJson('jest', jest)

rmSync(scratch, { recursive: true, force: true })
for (const tail of tails) console.log(`\n${tail}`)
console.log(`\nSteps: ${durations.join(', ')}`)
if (notes.length) console.log(`\nOptional steps that failed: ${notes.join(', ')}`)
if (broken.length) console.log(`\nFailed steps: ${broken.join(', ')}`)
console.log(`\n${totals.passed} passed, ${totals.failed} failed`)
process.exit(broken.length || totals.failed ? 1 : 0)
