// Every TypeScript example of the README and docs/ type-checks under strict against index.d.ts,
// each as a module of its own, as a user would paste it. Names a README example takes from an
// earlier one (a tool, jest's `expect`) are declared once, below. Blocks fenced as `ts shape`
// show a type's shape or a fragment of options, and are not checked.
import { readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import ts from 'typescript'
import { beforeAll, describe, expect, it } from 'vitest'

const root = resolve(__dirname, '..')
const CONTINUED = `
declare const listFiles: import('agent-runtime-hooks').ToolDefinition<{ dir: string }>
declare const readFile: import('agent-runtime-hooks').ToolDefinition
declare const expect: (value: unknown) => { toBe(expected: unknown): void }
`

function examples(file: string): string[] {
  const text = readFileSync(join(root, file), 'utf8')
  return [...text.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((match) => match[1])
}

const FILES = [
  ['README.md', 12],
  ['docs/builtins.md', 2],
  ['docs/migrating-from-blade.md', 1],
  ['docs/hooks.md', 8],
  ['docs/webhooks.md', 1],
  ['docs/approvals.md', 3],
  ['docs/compaction.md', 1],
  ['docs/subagents.md', 1],
  ['docs/mcp.md', 1],
  ['docs/workers.md', 2],
] as const

/** Type errors of every example, as `<file>_<n>.ts:<line> <message>`, from one program. */
function typeErrors(): string[] {
  const sources = new Map<string, string>([[join(root, '__examples__', 'continued.d.ts'), CONTINUED]])
  for (const [file] of FILES) {
    examples(file).forEach((source, index) => sources.set(join(root, '__examples__', `${file.replace(/\W/g, '_')}_${index + 1}.ts`), source))
  }
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.Preserve,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    moduleDetection: ts.ModuleDetectionKind.Force,
    types: ['node'],
    typeRoots: [join(root, 'node_modules', '@types')],
    paths: { 'agent-runtime-hooks': [join(root, 'index.d.ts')] },
  }
  const host = ts.createCompilerHost(options)
  const readFile = host.readFile
  host.readFile = (name) => sources.get(name) ?? readFile(name)
  const fileExists = host.fileExists
  host.fileExists = (name) => sources.has(name) || fileExists(name)
  const program = ts.createProgram([...sources.keys()], options, host)
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const where = diagnostic.file ? `${diagnostic.file.fileName.replace(`${root}/__examples__/`, '')}:${diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start ?? 0).line + 1}` : ''
    return `${where} ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`
  })
}

describe('documentation examples', () => {
  let errors: string[]
  // One program for every example: a few seconds on an idle machine, more on a busy one.
  beforeAll(() => {
    errors = typeErrors()
  }, 60_000)
  for (const [file, count] of FILES) {
    it(`${file}: every TypeScript example type-checks`, () => {
      expect(examples(file).length).toBeGreaterThanOrEqual(count)
      expect(errors.filter((error) => error.startsWith(`${file.replace(/\W/g, '_')}_`))).toEqual([])
    })
  }
  it('nothing else fails to type-check', () => {
    expect(errors.filter((error) => !FILES.some(([file]) => error.startsWith(`${file.replace(/\W/g, '_')}_`)))).toEqual([])
  })
})
