// Shared by the benchmarks: medians and interleaved repetition (A B C A B C …).
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** Runs `measure(name)` for every name, `repeats` times, interleaved; returns the medians. */
export async function interleaved(names, repeats, measure) {
  const samples = Object.fromEntries(names.map((name) => [name, []]))
  for (let repeat = 0; repeat < repeats; repeat++) {
    for (const name of names) samples[name].push(await measure(name))
  }
  return Object.fromEntries(names.map((name) => [name, median(samples[name])]))
}

/** `{ ours, peers: { name: value }, ratio: { name: ours / value } }`. */
export function comparison(values) {
  const { ours, ...peers } = values
  const ratio = Object.fromEntries(Object.entries(peers).map(([name, value]) => [name, Number((ours / value).toFixed(4))]))
  return { ours, peers, ratio }
}

/** A figure for a table: whole above 100, three decimals below 1, else one. */
export const fmt = (value) => (typeof value === 'number' ? (Math.abs(value) >= 100 ? value.toFixed(0) : value.toFixed(Math.abs(value) < 1 ? 3 : 1)) : String(value))
