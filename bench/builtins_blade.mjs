// The builtins benchmark's child for Blade: its Grep or Glob tool from `getBuiltinTools()`, run
// with `tool.execute(params, context)` and a context snapshot giving the filesystem roots and
// cwd, as Blade's runtime calls it. Which Grep backend Blade picks (system `rg`, bundled rg,
// `@vscode/ripgrep`, git grep, system grep, JS) depends on the PATH the parent gave this process;
// the answer reports the one it used (`metadata.strategy`).
import { performance } from 'node:perf_hooks'
import { serve } from './builtins_child.mjs'

const blade = await import(process.env.BLADE_ENTRY)
const tools = await blade.getBuiltinTools()
const root = process.env.BENCH_TREE
const contextSnapshot = blade.createContextSnapshot('bench', 'turn', { capabilities: { filesystem: { roots: [root], cwd: root } } })

serve(async ({ tool, input }) => {
  const found = tools.find((candidate) => candidate.name === tool)
  const started = performance.now()
  const execution = found.execute(input, { contextSnapshot })
  let step
  while (!(step = await execution.next()).done);
  const ms = performance.now() - started
  const result = step.value
  if (result.status !== 'success') throw new Error(`${tool} failed: ${JSON.stringify(result.model)}`)
  // The model is sent a string as it is and JSON pretty-printed with two spaces.
  const output = typeof result.model === 'string' ? result.model : JSON.stringify(result.model, null, 2)
  return { ms, wallMs: ms, output, strategy: result.metadata?.strategy }
})
