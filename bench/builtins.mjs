// builtins: Grep and Glob over a generated tree of 1.17 GB / 117 506 files (bench/builtins_tree.mjs)
// side by side with the `rg` CLI and with Blade's own Grep and Glob; then Read of a 100 MB file
// and Bash printing 1 GB, whose peak RSS must stay flat and whose answers must respect the caps.
//
// `node bench/builtins.mjs` runs it alone (REPEATS=n to change the repeats); `npm run bench`
// runs it with the others. It needs the release addon (`npm run build`), Debian's `ripgrep`
// (installed with apt-get when missing and running as root) and, for Blade's side, the SDK built
// by `node bench/blade_sdk.mjs <clone>` (said so in the results when absent).
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { performance } from 'node:perf_hooks'
import { fileURLToPath } from 'node:url'
import { BLADE_ENTRY, BLADE_VERSION, HOW_TO_BUILD } from './blade_sdk.mjs'
import { startChild } from './builtins_child.mjs'
import { ensureTree, HUGE_FILE, TREE_DIR } from './builtins_tree.mjs'
import { fmt, median } from './stats.mjs'

const REPEATS = Number(process.env.REPEATS ?? 5)
/** Blade's slow backends (git grep, grep -r, fast-glob) run fewer times, without a warm-up. */
const SLOW_REPEATS = Math.min(REPEATS, Number(process.env.SLOW_REPEATS ?? 3))
/** Blade's JS Grep reads the whole tree into strings (~100 s a query here): once, on three queries. */
const JS_QUERIES = ['files_with_matches', 'content', 'no match']
/** Threads for `rg -j`: ours walks and searches with two (src/builtins/search/walk.rs). */
const THREADS = 2

/** Each query: what the model asks the tool, and the `rg` command a user would type instead. */
const GREP = [
  { name: 'files_with_matches', input: { pattern: 'TODO\\(perf\\)' }, rg: ['-l', 'TODO\\(perf\\)'] },
  { name: 'content', input: { pattern: 'FIXME: race', output_mode: 'content' }, rg: ['-n', 'FIXME: race'] },
  { name: 'count', input: { pattern: 'FIXME: race', output_mode: 'count' }, rg: ['-c', 'FIXME: race'] },
  { name: '-i', input: { pattern: 'deprecatedapi', '-i': true }, rg: ['-i', '-l', 'deprecatedapi'] },
  { name: 'glob *.rs', input: { pattern: 'TODO\\(perf\\)', glob: '*.rs' }, rg: ['-l', '-g', '*.rs', 'TODO\\(perf\\)'] },
  { name: 'no match', input: { pattern: 'zqxjv_absent' }, rg: ['-l', 'zqxjv_absent'] },
]
// Glob is case-insensitive by default: `--iglob`.
const GLOB = [
  { name: '**/config-*.json', input: { pattern: '**/config-*.json' }, rg: ['--files', '--iglob', '**/config-*.json'] },
  { name: 'packages/pkg-07/**/*.md', input: { pattern: 'packages/pkg-07/**/*.md', max_results: 1000 }, rg: ['--files', '--iglob', 'packages/pkg-07/**/*.md'] },
  { name: '**/*.nomatch', input: { pattern: '**/*.nomatch' }, rg: ['--files', '--iglob', '**/*.nomatch'] },
]

/** Blade's Grep backends, chosen by what its process finds on PATH. */
const BLADE_BACKENDS = [
  { name: 'blade (rg)', commands: ['rg', 'git', 'grep'] },
  { name: 'blade (git grep)', commands: ['git', 'grep'], repeats: SLOW_REPEATS },
  { name: 'blade (grep)', commands: ['grep'], repeats: SLOW_REPEATS },
  { name: 'blade (js)', commands: [], repeats: 1, only: JS_QUERIES },
]

function ensureRipgrep(log) {
  const found = () => {
    try {
      return execFileSync('rg', ['--version'], { encoding: 'utf8' }).split('\n')[0]
    } catch {
      return null
    }
  }
  if (!found() && process.getuid?.() === 0) {
    log('installing Debian\'s ripgrep (apt-get install -y ripgrep) ...')
    execFileSync('sh', ['-c', 'apt-get install -y ripgrep >/dev/null 2>&1 || (apt-get update >/dev/null && apt-get install -y ripgrep >/dev/null)'])
  }
  const version = found()
  if (!version) throw new Error('the builtins benchmark needs the rg CLI: apt-get install -y ripgrep')
  return version
}

/** `rg` as a user runs it: a process whose whole output is read, from spawn to exit. */
function runRg(args, cwd) {
  return new Promise((done, fail) => {
    const started = performance.now()
    const child = spawn('rg', ['-j', String(THREADS), ...args], { cwd })
    const chunks = []
    child.stdout.on('data', (chunk) => chunks.push(chunk))
    child.on('error', fail)
    child.on('close', (code) => {
      const ms = performance.now() - started
      // 1 is "nothing found".
      if (code > 1) fail(new Error(`rg ${args.join(' ')} exited ${code}`))
      else done({ ms, wallMs: ms, output: Buffer.concat(chunks).toString('utf8') })
    })
  })
}

/** A PATH folder holding only `commands` (links to the real ones). */
function pathWith(commands) {
  const dir = mkdtempSync(join(tmpdir(), 'bench-path-'))
  for (const command of commands) symlinkSync(execFileSync('sh', ['-c', `command -v ${command}`], { encoding: 'utf8' }).trim(), join(dir, command))
  return dir
}

// ---------------------------------------------------------------------------------------------
// Answers, reduced to what can be compared across systems: the set of files (with counts or
// lines). A differing answer is reported, not hidden.

const lines = (text) => text.split('\n').filter(Boolean)
const absolute = (path) => resolve(TREE_DIR, path)

function grepAnswer(mode, system, output) {
  if (system === 'rg') {
    const found = lines(output)
    // `path:line:text` → `path:line`; `path:count` and `path` as they are.
    return { entries: found.length, keys: mode === 'content' ? found.map((line) => line.split(':').slice(0, 2).join(':')) : found, complete: true }
  }
  let entries = JSON.parse(output)
  // Ours closes a cut answer with a note naming the full count.
  const note = entries.at(-1)?.note
  if (note) entries = entries.slice(0, -1)
  const total = note ? Number(note.match(/of (?:at least )?(\d+) entries/)[1]) : entries.length
  const path = (entry) => absolute(entry.file_path)
  const key = { content: (entry) => `${path(entry)}:${entry.line_number}`, count: (entry) => `${path(entry)}:${entry.count}` }[mode] ?? path
  return { entries: total, keys: entries.map(key), complete: !note }
}

function globAnswer(system, output) {
  const paths = system === 'rg' ? lines(output) : output.split('\n').filter((line) => line.startsWith('- ')).map((line) => line.slice(2))
  return { entries: paths.length, keys: paths, complete: true }
}

/** Whether `answer` says what rg's says: as many entries, the same ones (those kept, if it was cut). */
function agrees(answer, reference) {
  if (answer.entries !== reference.entries) return false
  const known = new Set(reference.keys)
  return answer.keys.every((key) => known.has(key)) && (!answer.complete || answer.keys.length === reference.keys.length)
}

// ---------------------------------------------------------------------------------------------

async function measureQueries(kind, queries, systems, log) {
  const rows = []
  for (const query of queries) {
    const mode = query.input.output_mode ?? 'files_with_matches'
    const running = systems.filter((system) => !system.only || system.only.includes(query.name))
    const samples = Object.fromEntries(running.map((system) => [system.name, []]))
    const wall = []
    const answers = {}
    const strategies = {}
    // Warm-up (not timed): page cache, JIT, the children's first agent.
    for (const system of running.filter((candidate) => !candidate.repeats)) await system.run(kind, query)
    for (let repeat = 0; repeat < REPEATS; repeat++) {
      for (const system of running) {
        if (repeat >= (system.repeats ?? REPEATS)) continue
        const sample = await system.run(kind, query)
        samples[system.name].push(sample.ms)
        if (system.name === 'ours') wall.push(sample.wallMs)
        if (sample.strategy) strategies[system.name] = sample.strategy
        answers[system.name] ??= kind === 'Grep' ? grepAnswer(mode, system.name, sample.output) : globAnswer(system.name, sample.output)
      }
    }
    const ms = Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, Number(median(values).toFixed(1))]))
    const row = {
      name: query.name,
      input: query.input,
      rg: `rg -j ${THREADS} ${query.rg.map((arg) => (/[\s*()\\]/.test(arg) ? `'${arg}'` : arg)).join(' ')}${kind === 'Grep' ? ' <tree>' : ''}`,
      entries: answers.rg.entries,
      ms,
      oursWallMs: Number(median(wall).toFixed(1)),
      /** ours / rg: the target is ≤ 1.3. */
      ratioToRg: Number((ms.ours / ms.rg).toFixed(3)),
      /** Blade's time / ours: the target is ≥ 5. */
      speedupOverBlade: Object.fromEntries(Object.keys(ms).filter((name) => name.startsWith('blade')).map((name) => [name, Number((ms[name] / ms.ours).toFixed(2))])),
      sameAnswerAsRg: Object.fromEntries(Object.keys(answers).filter((name) => name !== 'rg').map((name) => [name, agrees(answers[name], answers.rg)])),
      samples: Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, values.map((value) => Number(value.toFixed(1)))])),
      ...(Object.keys(strategies).length ? { bladeStrategy: strategies } : {}),
    }
    rows.push(row)
    log(`${kind} ${query.name.padEnd(24)} ${Object.entries(ms).map(([name, value]) => `${name} ${fmt(value)}`).join(', ')} ms; ours/rg ${row.ratioToRg}`)
  }
  return rows
}

export async function memory(log = console.log) {
  const cases = [
    { name: 'Read, whole 100 MB file', tool: 'Read', input: { file_path: HUGE_FILE }, warmup: { file_path: join(TREE_DIR, 'README.md') } },
    { name: 'Read, offset 1 200 000, limit 2000', tool: 'Read', input: { file_path: HUGE_FILE, offset: 1_200_000, limit: 2000 }, warmup: { file_path: join(TREE_DIR, 'README.md'), offset: 0, limit: 1 } },
    { name: 'Read, offset 0, limit 2 000 000 (every line)', tool: 'Read', input: { file_path: HUGE_FILE, offset: 0, limit: 2_000_000 }, warmup: { file_path: join(TREE_DIR, 'README.md'), offset: 0, limit: 1 } },
    { name: 'Bash, 1 GB on one line', tool: 'Bash', input: { command: "head -c 1000000000 /dev/zero | tr '\\0' a", timeout: 300_000 }, warmup: { command: 'echo warm' } },
    { name: 'Bash, 1 GB of lines (yes)', tool: 'Bash', input: { command: 'yes | head -c 1000000000', timeout: 300_000 }, warmup: { command: 'echo warm' } },
  ]
  const rows = []
  for (const { name, tool, input, warmup } of cases) {
    const child = startChild('builtins_memory.mjs', { BENCH_TREE: TREE_DIR })
    const reply = await child.call({ tool, input, warmup })
    await child.stop()
    if (reply.failed) throw new Error(`${name}: ${reply.failed}`)
    const row = {
      name,
      tool,
      input,
      ms: Number(reply.ms.toFixed(0)),
      peakBeforeMb: Number(reply.peakBeforeMb.toFixed(1)),
      peakAfterMb: Number(reply.peakAfterMb.toFixed(1)),
      growthMb: Number((reply.peakAfterMb - reply.peakBeforeMb).toFixed(1)),
      sampledPeakMb: Number(reply.sampledPeakMb.toFixed(1)),
      isError: reply.isError,
      answerChars: reply.outputChars,
      answerStart: reply.output.slice(0, 160),
    }
    if (tool === 'Bash') {
      const answer = JSON.parse(reply.output)
      row.stdoutChars = answer.stdout.length
      row.answer = `stdout ${answer.stdout.length} chars; truncation_info: ${answer.truncation_info}`
    } else if (reply.isError) {
      row.answer = `error: ${reply.output.replace(HUGE_FILE, '<file>')}`
    } else {
      const numbered = reply.output.split('\n').filter((line) => /^ *\d+→/.test(line)).length
      const cut = reply.output.match(/\.\.\. \(output cut at .*\)$/)
      row.answer = `${numbered} numbered lines${cut ? `, then "${cut[0]}"` : ''}`
    }
    rows.push(row)
    log(`memory ${name}: peak RSS ${row.peakBeforeMb} → ${row.peakAfterMb} MB (+${row.growthMb}), answer ${row.answerChars} chars, ${row.ms} ms`)
  }
  return rows
}

const load = () => Number(loadavg()[0].toFixed(2))

export async function builtins(log = console.log) {
  const loadAtStart = load()
  const rgVersion = ensureRipgrep(log)
  const tree = ensureTree(log)
  log(`tree: ${TREE_DIR}, ${tree.files} files, ${(tree.bytes / 1e9).toFixed(2)} GB (${tree.ignored.files} files, ${(tree.ignored.bytes / 1e6).toFixed(0)} MB of them git-ignored)`)

  const ours = startChild('builtins_ours.mjs', { BENCH_TREE: TREE_DIR })
  const call = (child) => async (kind, query) => {
    const reply = await child.call({ tool: kind, input: query.input })
    if (reply.failed) throw new Error(`${kind} ${query.name}: ${reply.failed}`)
    return reply
  }
  const systems = [
    { name: 'ours', run: call(ours) },
    { name: 'rg', run: (kind, query) => runRg(kind === 'Grep' ? [...query.rg, TREE_DIR] : query.rg, TREE_DIR) },
  ]
  const children = [ours]
  const paths = []
  let blade = { version: BLADE_VERSION, skipped: HOW_TO_BUILD }
  if (existsSync(BLADE_ENTRY)) {
    blade = { version: BLADE_VERSION, entry: BLADE_ENTRY, backends: BLADE_BACKENDS.map(({ name, commands }) => ({ name, path: commands })) }
    for (const backend of BLADE_BACKENDS) {
      const path = pathWith(backend.commands)
      paths.push(path)
      const child = startChild('builtins_blade.mjs', { BENCH_TREE: TREE_DIR, BLADE_ENTRY, PATH: path })
      children.push(child)
      systems.push({ name: backend.name, run: call(child), repeats: backend.repeats, only: backend.only, grepOnly: backend.name !== 'blade (rg)' })
    }
  } else log(`Blade not run: ${HOW_TO_BUILD}`)

  try {
    const grep = await measureQueries('Grep', GREP, systems, log)
    // Blade's Glob has one implementation (fast-glob): run it once, not once per Grep backend.
    const glob = await measureQueries('Glob', GLOB, systems.filter((system) => !system.grepOnly).map((system) => (system.name === 'blade (rg)' ? { ...system, name: 'blade', repeats: SLOW_REPEATS } : system)), log)
    const mem = await memory(log)
    return {
      tree: { dir: TREE_DIR, ...tree },
      rg: rgVersion,
      threads: `ours: ${THREADS} threads walking and searching (src/builtins/search/walk.rs); rg -j ${THREADS}; Blade's rg: its default (one per core, ${THREADS} here)`,
      cache: 'warm: the tree (1.17 GB) fits in the page cache; every query runs once per fast system before timing',
      repeats: REPEATS,
      loadAverage: { start: loadAtStart, end: load() },
      slowRepeats: SLOW_REPEATS,
      jsQueries: JS_QUERIES,
      blade,
      grep,
      glob,
      memory: mem,
    }
  } finally {
    await Promise.all(children.map((child) => child.stop()))
    for (const path of paths) rmSync(path, { recursive: true, force: true })
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { writeFileSync, readFileSync } = await import('node:fs')
  const result = await builtins()
  // Alone, it updates only its own entry of results.json (and RESULTS.md from it).
  const file = new URL('./results.json', import.meta.url)
  const results = JSON.parse(readFileSync(file, 'utf8'))
  results.benchmarks.builtins = { date: new Date().toISOString().slice(0, 10), ...result }
  writeFileSync(file, JSON.stringify(results, null, 2) + '\n')
  const { writeReport } = await import('./report.mjs')
  writeReport()
  console.log('wrote bench/results.json (benchmarks.builtins) and bench/RESULTS.md')
}
