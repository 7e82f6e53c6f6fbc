// The tree the builtins benchmark searches: generated once from a fixed seed into a folder outside
// the repository (/var/tmp, kept across reboots), then reused. A realistic mix: 100 000+ source-like text files of varied
// sizes in nested package folders, a few large files (one of 100 MB, for Read), binary assets,
// and a `.gitignore` that excludes `node_modules/` and `target/`. It is a git repository whose
// files are in the index (`git add`), as a user's checkout would be, so `git grep` sees them too.
//
// Rare markers are planted at fixed rates so the queries have known, moderate answers:
// `TODO(perf)`, `FIXME: race`, `DeprecatedApi` in mixed case, `config-*.json` names. None of
// them occurs in the line pool the files are made of.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'

/** Bump when the recipe changes: a tree of another version is rebuilt. */
const VERSION = 1
const SEED = 0x5eed_b111

// Not under ~/.cache: Blade's JS Grep skips every path containing `.cache`, `out`, `build`, `dist`
// (its exclusions are substring tests on the absolute path), so it would find nothing there.
export const TREE_DIR = process.env.BENCH_TREE_DIR ?? join('/var/tmp', 'agent-runtime-hooks', `bench-tree-v${VERSION}`)
const SUMMARY = '.bench-tree.json'

/** mulberry32: small, fast, deterministic. */
function random(seed) {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const WORDS = (
  'alpha beta gamma delta value result index count buffer stream handler request response config options ' +
  'state cache entry token parser writer reader session agent event message queue worker thread pool item ' +
  'list map set key name path file folder record schema field input output error status timeout signal ' +
  'limit offset range chunk frame batch task job step phase node edge graph tree root child parent sibling'
).split(' ')
const VERBS = 'get set load save parse build create update delete resolve compute format render handle check apply merge split emit flush open close'.split(' ')
const TYPES = 'string number boolean Buffer Map Set Promise Vec Option Result usize u64 i32 str'.split(' ')

/** Code-like lines (TypeScript-, Rust- and Python-flavoured), none holding a marker. */
function linePool(next, size) {
  const pick = (list) => list[Math.floor(next() * list.length)]
  const ident = () => pick(VERBS) + pick(WORDS)[0].toUpperCase() + pick(WORDS).slice(1)
  const indent = () => '  '.repeat(Math.floor(next() * 4))
  const shapes = [
    () => `${indent()}const ${pick(WORDS)}${Math.floor(next() * 100)} = ${ident()}(${pick(WORDS)}, ${Math.floor(next() * 1000)})`,
    () => `${indent()}export function ${ident()}(${pick(WORDS)}: ${pick(TYPES)}, ${pick(WORDS)}: ${pick(TYPES)}): ${pick(TYPES)} {`,
    () => `${indent()}if (${pick(WORDS)}.${pick(WORDS)} > ${Math.floor(next() * 64)}) return ${ident()}(${pick(WORDS)})`,
    () => `${indent()}let ${pick(WORDS)} = ${pick(WORDS)}.iter().map(|${pick(WORDS)}| ${ident()}(${pick(WORDS)})).collect::<${pick(TYPES)}>();`,
    () => `${indent()}fn ${pick(VERBS)}_${pick(WORDS)}(${pick(WORDS)}: &${pick(TYPES)}) -> ${pick(TYPES)} {`,
    () => `${indent()}def ${pick(VERBS)}_${pick(WORDS)}(self, ${pick(WORDS)}, ${pick(WORDS)}=None):`,
    () => `${indent()}// ${pick(VERBS)} the ${pick(WORDS)} before the ${pick(WORDS)} is ${pick(VERBS)}d by the ${pick(WORDS)} ${pick(WORDS)}`,
    () => `${indent()}return { ${pick(WORDS)}: ${pick(WORDS)}, ${pick(WORDS)}: ${Math.floor(next() * 1e6)}, ${pick(WORDS)}: '${pick(WORDS)}-${pick(WORDS)}' }`,
    () => `${indent()}}`,
    () => '',
  ]
  return Array.from({ length: size }, () => Buffer.from(`${pick(shapes)()}\n`))
}

const EXTENSIONS = ['ts', 'ts', 'ts', 'js', 'rs', 'rs', 'py', 'md', 'json', 'go']

/** Text of about `bytes` bytes from the pool, with `markers` lines spread through it. */
function text(next, pool, bytes, markers) {
  const parts = []
  let size = 0
  let planted = 0
  while (size < bytes) {
    const line = pool[Math.floor(next() * pool.length)]
    parts.push(line)
    size += line.length
    if (planted < markers.length && next() < 0.02) parts.push(Buffer.from(`${markers[planted++]}\n`))
  }
  while (planted < markers.length) parts.push(Buffer.from(`${markers[planted++]}\n`))
  return Buffer.concat(parts)
}

function write(root, relative, content, counts) {
  const file = join(root, relative)
  mkdirSync(dirname(file), { recursive: true })
  writeFileSync(file, content)
  counts.files++
  counts.bytes += content.length
}

/** The planted markers of one source file, drawn at the recipe's rates. */
function markersFor(next) {
  const markers = []
  if (next() < 0.004) markers.push(`    // TODO(perf): ${Math.floor(next() * 1e6)} allocations per call`)
  if (next() < 0.01) for (let i = 1 + Math.floor(next() * 3); i > 0; i--) markers.push(`    // FIXME: race between writer and reader ${Math.floor(next() * 1e4)}`)
  if (next() < 0.003) markers.push(`    ${['DeprecatedApi', 'deprecatedapi', 'DEPRECATEDAPI', 'deprecatedApi'][Math.floor(next() * 4)]}.call()`)
  return markers
}

function generate(root) {
  const next = random(SEED)
  const pool = linePool(next, 20_000)
  const counts = { files: 0, bytes: 0 }
  const ignored = { files: 0, bytes: 0 }
  const binaries = { files: 0, bytes: 0 }
  writeFileSync(join(root, '.gitignore'), 'node_modules/\ntarget/\n*.tmp\n')
  writeFileSync(join(root, 'README.md'), '# bench tree\n\nGenerated by bench/builtins_tree.mjs.\n')

  // Sources: 50 packages × nested modules, 100 000 files, log-uniform sizes 300 B .. 40 KB.
  const SOURCES = 100_000
  for (let i = 0; i < SOURCES; i++) {
    const pkg = i % 50
    const depth = 1 + Math.floor(next() * 4)
    const folders = Array.from({ length: depth }, (_, d) => `${['src', 'lib', 'core', 'util', 'api', 'impl'][Math.floor(next() * 6)]}-${Math.floor(next() * (d === 0 ? 8 : 5))}`)
    const ext = EXTENSIONS[Math.floor(next() * EXTENSIONS.length)]
    const name = next() < 0.0008 ? `config-${i}.json` : `file-${i}.${ext}`
    const bytes = Math.round(Math.exp(Math.log(300) + next() * (Math.log(40_000) - Math.log(300))))
    write(root, join('packages', `pkg-${String(pkg).padStart(2, '0')}`, ...folders, name), text(next, pool, bytes, markersFor(next)), counts)
  }

  // A few large files: 100 MB of numbered log lines (the Read benchmark's file) and three of 50 MB.
  const large = []
  for (const [name, mb] of [['data/huge-100mb.txt', 100], ['data/events.csv', 50], ['data/dump.sql', 50], ['data/trace.jsonl', 50]]) {
    const parts = []
    let size = 0
    let line = 0
    while (size < mb * 1_000_000) {
      const body = pool[Math.floor(next() * pool.length)]
      const row = Buffer.concat([Buffer.from(`${String(++line).padStart(8, '0')} `), body])
      parts.push(row)
      size += row.length
      if (line % 250_000 === 0) parts.push(Buffer.from(`${String(++line).padStart(8, '0')}     // TODO(perf): large file marker\n`))
    }
    write(root, name, Buffer.concat(parts), counts)
    large.push({ name, bytes: size })
  }

  // Binary assets in the searched part: NUL bytes early, as images and blobs have.
  for (let i = 0; i < 2000; i++) {
    const bytes = 4096 + Math.floor(next() * 28_000)
    const content = Buffer.alloc(bytes)
    for (let b = 0; b < bytes; b++) content[b] = next() < 0.1 ? 0 : Math.floor(next() * 256)
    // Some hold a marker's text: a search must leave them out as binary.
    if (i % 10 === 0) content.write('TODO(perf) FIXME: race', 64)
    write(root, join('assets', `set-${i % 20}`, `blob-${i}.${i % 2 ? 'png' : 'bin'}`), content, binaries)
  }

  // The ignored part: dependencies and build output, markers included (a search must skip them).
  for (let i = 0; i < 15_000; i++) {
    const bytes = 200 + Math.floor(next() * 4000)
    write(root, join('node_modules', `dep-${i % 300}`, 'lib', `index-${i}.js`), text(next, pool, bytes, markersFor(next)), ignored)
  }
  for (let i = 0; i < 500; i++) {
    const bytes = 4 * (5_000 + Math.floor(next() * 25_000))
    const content = Buffer.alloc(bytes)
    for (let b = 0; b < bytes; b += 4) content.writeUInt32LE(Math.floor(next() * 2 ** 32), b)
    write(root, join('target', 'release', 'deps', `lib-${i}.rlib`), content, ignored)
  }
  return { sources: counts, binaries, ignored, large }
}

/** The tree, generated if absent; returns its summary (files, bytes, parts). */
export function ensureTree(log = console.log) {
  const summaryFile = join(TREE_DIR, SUMMARY)
  if (existsSync(summaryFile)) return JSON.parse(readFileSync(summaryFile, 'utf8'))
  const building = `${TREE_DIR}.partial`
  rmSync(building, { recursive: true, force: true })
  mkdirSync(building, { recursive: true })
  log(`generating the benchmark tree in ${TREE_DIR} (once; about 1.2 GB) ...`)
  const started = Date.now()
  const parts = generate(building)
  // Files tracked in the index, nothing committed: git grep searches them, rg and ours see a repository.
  execFileSync('git', ['init', '-q'], { cwd: building })
  execFileSync('git', ['add', '-A'], { cwd: building, stdio: 'ignore', maxBuffer: 1 << 30 })
  const all = [parts.sources, parts.binaries, parts.ignored]
  const summary = {
    version: VERSION,
    seed: SEED,
    files: all.reduce((sum, part) => sum + part.files, 0) + 2,
    bytes: all.reduce((sum, part) => sum + part.bytes, 0),
    ...parts,
    generatedInSeconds: Math.round((Date.now() - started) / 1000),
  }
  writeFileSync(join(building, SUMMARY), JSON.stringify(summary, null, 2))
  renameSync(building, TREE_DIR)
  return summary
}

export const HUGE_FILE = join(TREE_DIR, 'data', 'huge-100mb.txt')

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop())) {
  const summary = ensureTree()
  console.log(`${TREE_DIR}: ${summary.files} files, ${(summary.bytes / 1e9).toFixed(2)} GB (huge file ${statSync(HUGE_FILE).size} bytes)`)
}
