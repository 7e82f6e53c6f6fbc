// The builtins benchmark's memory child: one case per process (the high-water mark only rises).
// After a warm-up call of the same tool, it reads VmHWM (peak RSS) from /proc/self/status, runs
// the case through an agent while sampling RSS every 10 ms, and reads VmHWM again.
import { readFileSync } from 'node:fs'
import { createAgent, scriptedModel } from '../index.mjs'
import { serve } from './builtins_child.mjs'

const root = process.env.BENCH_TREE

/** VmHWM and VmRSS in MB. */
function status() {
  const text = readFileSync('/proc/self/status', 'utf8')
  const kb = (field) => Number(text.match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'))[1])
  return { peakMb: kb('VmHWM') / 1024, rssMb: kb('VmRSS') / 1024 }
}

async function call(tool, input) {
  const agent = await createAgent({
    model: scriptedModel([{ toolCalls: [{ id: `call_${Math.random()}`, name: tool, input }] }, { text: 'done' }]),
    filesystem: { roots: [root], cwd: root },
  })
  const started = performance.now()
  const result = await (await agent.send('go')).result()
  const ms = performance.now() - started
  await agent.close()
  return { ms, record: result.toolCalls[0] }
}

serve(async ({ tool, input, warmup }) => {
  await call(tool, warmup)
  globalThis.gc?.()
  const before = status()
  let sampledPeakMb = before.rssMb
  const sampler = setInterval(() => (sampledPeakMb = Math.max(sampledPeakMb, process.memoryUsage().rss / 2 ** 20)), 10)
  const { ms, record } = await call(tool, input)
  clearInterval(sampler)
  const after = status()
  return {
    ms,
    peakBeforeMb: before.peakMb,
    peakAfterMb: after.peakMb,
    sampledPeakMb,
    isError: record.isError,
    outputChars: record.output.length,
    output: record.output,
  }
})
