// Every TypeScript example of the README and docs/ compiles as written, each a module of its
// own, in the project a user starts from: `npm init` with `"type": "module"`, the tsconfig.json
// that `tsc --init` writes (strict, exactOptionalPropertyTypes, noUncheckedIndexedAccess,
// verbatimModuleSyntax, module nodenext) with Node's types added, and this package resolved
// through node_modules by its `exports` map. Blocks fenced as `ts shape` show a type's shape or
// a fragment of options, and are not compiled.
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, normalize, resolve } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const root = resolve(__dirname, '..')
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc')

function examples(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8')
  return [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1])
}

const FILES = [
  ['README.md', 18],
  ['docs/builtins.md', 2],
  ['docs/migrating-from-blade.md', 1],
  ['docs/hooks.md', 8],
  ['docs/webhooks.md', 1],
  ['docs/command-hooks.md', 4],
  ['docs/approvals.md', 3],
  ['docs/compaction.md', 1],
  ['docs/subagents.md', 1],
  ['docs/mcp.md', 1],
  ['docs/workers.md', 2],
] as const

const moduleName = (file: string, index: number) => `${file.replace(/\W/g, '_')}_${index + 1}`

let project: string

/** The user's project: package.json, `tsc --init`'s tsconfig.json, node_modules, one file per block. */
function makeProject(): string {
  const dir = mkdtempSync(join(tmpdir(), 'arh-readme-'))
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'readme-examples', private: true, type: 'module' }))
  execFileSync(process.execPath, [tsc, '--init'], { cwd: dir, stdio: 'ignore' })
  const config = readFileSync(join(dir, 'tsconfig.json'), 'utf8')
  // What TypeScript's own error tells a Node user to do: `"types": ["node"]`.
  const withNode = config.replace(/"types": \[\]/, '"types": ["node"]')
  if (withNode === config) throw new Error(`tsc --init no longer writes "types": []; look again at what it writes:\n${config}`)
  writeFileSync(join(dir, 'tsconfig.json'), withNode)
  mkdirSync(join(dir, 'node_modules', '@types'), { recursive: true })
  symlinkSync(root, join(dir, 'node_modules', 'agent-runtime-hooks'), 'dir')
  symlinkSync(join(root, 'node_modules', '@types', 'node'), join(dir, 'node_modules', '@types', 'node'), 'dir')
  // The test runners the testing examples import.
  symlinkSync(join(root, 'node_modules', 'vitest'), join(dir, 'node_modules', 'vitest'), 'dir')
  symlinkSync(join(root, 'node_modules', '@jest'), join(dir, 'node_modules', '@jest'), 'dir')
  // The schema library the tool examples use.
  symlinkSync(join(root, 'node_modules', 'zod'), join(dir, 'node_modules', 'zod'), 'dir')
  for (const [file] of FILES) examples(file).forEach((source, index) => writeFileSync(join(dir, `${moduleName(file, index)}.ts`), source))
  return dir
}

/** `tsc --noEmit`'s errors, as `<module>:<line> <message>`. */
function typeErrors(dir: string): string[] {
  try {
    execFileSync(process.execPath, [tsc, '-p', dir, '--noEmit', '--pretty', 'false'], { cwd: dir, encoding: 'utf8' })
    return []
  } catch (error) {
    const output = String((error as { stdout?: string }).stdout ?? error)
    return output
      .split('\n')
      .filter((line) => /error TS\d+/.test(line))
      .map((line) => line.replace(/^(\S+?)\.ts\((\d+),\d+\): /, '$1:$2 '))
  }
}

describe('documentation examples', () => {
  let errors: string[]
  // One program for every example: a few seconds on an idle machine, more on a busy one.
  beforeAll(() => {
    project = makeProject()
    errors = typeErrors(project)
  }, 120_000)
  afterAll(() => rmSync(project, { recursive: true, force: true }))
  for (const [file, count] of FILES) {
    it(`${file}: every TypeScript example compiles in a \`tsc --init\` project`, () => {
      expect(examples(file).length).toBeGreaterThanOrEqual(count)
      expect(errors.filter((error) => error.startsWith(`${file.replace(/\W/g, '_')}_`))).toEqual([])
    })
  }
  it('nothing else fails to compile', () => {
    expect(errors.filter((error) => !FILES.some(([file]) => error.startsWith(`${file.replace(/\W/g, '_')}_`)))).toEqual([])
  })
  it('the project is the one tsc --init makes, strict and with its stricter defaults', () => {
    const config = readFileSync(join(project, 'tsconfig.json'), 'utf8')
    for (const option of ['"strict": true', '"exactOptionalPropertyTypes": true', '"noUncheckedIndexedAccess": true', '"verbatimModuleSyntax": true', '"module": "nodenext"']) {
      expect(config).toContain(option)
    }
  })
})

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes. */
const slug = (heading: string) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')

describe('links in the installed package', () => {
  // What `npm publish` would ship: the README's and docs' relative links must land in it.
  const packed = new Set<string>(
    JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }))[0].files.map((file: { path: string }) => file.path),
  )
  const documents = ['README.md', ...FILES.map(([file]) => file).filter((file) => file !== 'README.md'), 'docs/security.md', 'docs/testing.md', 'docs/architecture.md', 'docs/decisions.md', 'docs/store.md']
  for (const document of new Set(documents)) {
    it(`${document}: every relative link names a file the package ships, and its anchor a heading there`, () => {
      const text = readFileSync(join(root, document), 'utf8').replace(/^```[\s\S]*?^```$/gm, '')
      const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((match) => match[1]).filter((link) => !/^[a-z]+:/.test(link))
      for (const link of links) {
        const [path, anchor] = link.split('#')
        const target = path === '' ? document : normalize(join(dirname(document), path))
        expect(packed.has(target) || [...packed].some((file) => file.startsWith(`${target}/`)), `${document} links ${link}, which the package does not ship`).toBe(true)
        if (anchor && target.endsWith('.md')) {
          const headings = [...readFileSync(join(root, target), 'utf8').matchAll(/^#+ (.+)$/gm)].map((match) => slug(match[1]))
          expect(headings, `${document} links ${link}: no such heading`).toContain(anchor)
        }
      }
    })
  }
  it('the package says where it comes from: a README for users first, its licence, its engines', () => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))
    expect(manifest.engines.node).toBe('>= 20')
    expect(manifest.scripts.prepare).toBeUndefined() // an install of the tarball runs no script, so npm warns of none
    expect(packed.has('README.md')).toBe(true)
    const readme = readFileSync(join(root, 'README.md'), 'utf8')
    expect(readme.indexOf('npm install agent-runtime-hooks')).toBeLessThan(readme.indexOf('npm install && npm run demo'))
  })
})
