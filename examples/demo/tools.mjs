// The demo's tools. They do real, harmless work: they read this project's files, and write only
// into a temporary folder (`release/` to the model) that the demo removes when it ends.
import { rmSync } from 'node:fs'
import { mkdtemp, readdir, readFile, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, isAbsolute, join, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { defineTool } from '../../index.mjs'

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..')

// A release config with a made-up token, so there is a secret for the redaction hook to catch.
const NPMRC = `registry=https://registry.npmjs.org/
//registry.npmjs.org/:_authToken=npm_d3m0T0k3nN0tR3alD3m0T0k3nN0tR3al00
access=public
`

const SKIPPED = new Set(['node_modules', 'target', '.git'])

/** Resolves a path the model gave: `release/…` is the temporary folder, anything else the project. */
function resolver(scratch) {
  return (path = '.') => {
    const inRelease = path === 'release' || path.startsWith('release/')
    const [base, rest] = inRelease ? [scratch, `.${path.slice('release'.length)}`] : [root, path]
    const full = resolve(base, rest)
    if (isAbsolute(rest)) throw new Error(`${path} is outside the project`)
    if (full !== base && !full.startsWith(base + sep)) throw new Error(`${path} is outside the project`)
    return full
  }
}

async function sizeOf(full) {
  const info = await stat(full)
  if (!info.isDirectory()) return info.size
  let total = 0
  for (const entry of await readdir(full)) if (!SKIPPED.has(entry)) total += await sizeOf(join(full, entry))
  return total
}

const human = (bytes) => (bytes < 1024 ? `${bytes}B` : bytes < 1024 ** 2 ? `${Math.round(bytes / 1024)}K` : `${(bytes / 1024 ** 2).toFixed(1)}M`)

/** A shell that knows a few read-only commands and runs them in JS. It never starts a process,
 * so nothing the model asks for can delete or change anything, whatever the hooks decide. */
async function runCommand(command, at) {
  const [name, ...args] = command.trim().split(/\s+/)
  const paths = args.filter((arg) => !arg.startsWith('-'))
  switch (name) {
    case 'pwd':
      return root
    case 'echo':
      return args.join(' ')
    case 'ls':
      return (await readdir(at(paths[0]))).filter((entry) => !entry.startsWith('.') && !SKIPPED.has(entry)).sort().join('\n')
    case 'cat':
      return (await Promise.all(paths.map((path) => readFile(at(path), 'utf8')))).join('')
    case 'wc':
      return (await Promise.all(paths.map(async (path) => `${(await readFile(at(path), 'utf8')).split('\n').length - 1} ${path}`))).join('\n')
    case 'du':
      return (await Promise.all((paths.length ? paths : ['.']).map(async (path) => `${human(await sizeOf(at(path)))}\t${path}`))).join('\n')
    default:
      return { status: 'error', error: { message: `the demo's shell runs only pwd, echo, ls, cat, wc and du; "${name}" was not run` } }
  }
}

/** Creates the temporary folder (removed when the process exits) and the tools; `executions`
 * counts the calls each tool really ran. */
export async function createTools() {
  const scratch = await mkdtemp(join(tmpdir(), 'arh-demo-'))
  process.on('exit', () => rmSync(scratch, { recursive: true, force: true }))
  process.once('SIGINT', () => process.exit(130)) // Ctrl-C exits through 'exit' too
  await writeFile(join(scratch, '.npmrc'), NPMRC)
  const at = resolver(scratch)
  const executions = { shell: 0, read_file: 0, registry_lookup: 0, write_file: 0 }

  const shell = defineTool({
    name: 'shell',
    description: 'Runs a shell command in the project directory and returns its output.',
    parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] },
    kind: 'execute',
    async execute({ command }) {
      executions.shell++
      return runCommand(String(command), at)
    },
  })

  const readProjectFile = defineTool({
    name: 'read_file',
    description: 'Reads a text file of the project; paths starting with release/ are in the release folder.',
    parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
    kind: 'readonly',
    sideEffect: 'pure',
    async execute({ path }) {
      executions.read_file++
      const text = await readFile(at(path), 'utf8')
      return text.length > 4000 ? `${text.slice(0, 4000)}\n[… ${text.length - 4000} more characters]` : text
    },
  })

  const registryLookup = defineTool({
    name: 'registry_lookup',
    description: 'Looks a package up on the npm registry (network) and returns its dist-tags.',
    parameters: { type: 'object', properties: { package: { type: 'string' } }, required: ['package'] },
    kind: 'readonly',
    async execute({ package: name }, { signal }) {
      executions.registry_lookup++
      const answer = await fetch(`https://registry.npmjs.org/${encodeURIComponent(name)}`, { signal: AbortSignal.any([signal, AbortSignal.timeout(5000)]) })
      return { name, 'dist-tags': (await answer.json())['dist-tags'] ?? {} }
    },
  })

  const writeReleaseFile = defineTool({
    name: 'write_file',
    description: 'Writes a text file into the release folder (the path must start with release/).',
    parameters: { type: 'object', properties: { path: { type: 'string' }, content: { type: 'string' } }, required: ['path', 'content'] },
    kind: 'write',
    async execute({ path, content }) {
      executions.write_file++
      if (!String(path).startsWith('release/')) return { status: 'error', error: { message: 'write_file writes only under release/' } }
      await writeFile(at(path), String(content))
      return `wrote ${Buffer.byteLength(String(content))} bytes to ${path}`
    },
  })

  return {
    scratch,
    tools: [shell, readProjectFile, registryLookup, writeReleaseFile],
    executions,
  }
}
