// `npm run bench`: runs every benchmark, prints a table and writes bench/results.json.
import { writeFileSync } from 'node:fs'
import { cpus, totalmem } from 'node:os'
import { hookDispatch } from './hook_dispatch.mjs'

const machine = `${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, ${process.platform}-${process.arch}`
const results = { machine, node: process.version, date: new Date().toISOString().slice(0, 10), benchmarks: {} }

console.log(`machine: ${machine}\nnode: ${process.version}\n`)

const dispatch = await hookDispatch()
results.benchmarks.hook_dispatch = {
  unit: dispatch.unit,
  ours: dispatch.perEventUs,
  perCallUs: dispatch.perCallUs,
  turns: dispatch.turns,
  repeats: dispatch.repeats,
  callbacksInvokedWithNone: dispatch.callbacksInvokedWithNone,
  callbacksInvokedWithNoMatch: dispatch.callbacksInvokedWithNoMatch,
}
console.log('hook_dispatch (PreToolUse, sync JS callbacks returning { action: "continue" })')
console.log('callbacks | µs per tool call | µs per event (dispatch cost)')
for (const count of Object.keys(dispatch.perCallUs)) {
  console.log(`${String(count).padStart(9)} | ${dispatch.perCallUs[count].toFixed(1).padStart(16)} | ${dispatch.perEventUs[count].toFixed(1).padStart(10)}`)
}
console.log(`callbacks invoked in a run with none registered: ${dispatch.callbacksInvokedWithNone}`)
console.log(`callbacks invoked in a run with 10 non-matching matchers: ${dispatch.callbacksInvokedWithNoMatch}`)

writeFileSync(new URL('./results.json', import.meta.url), JSON.stringify(results, null, 2) + '\n')
console.log('\nwrote bench/results.json')
