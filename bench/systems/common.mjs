// What every system shares: the tool's parameters and the two hooks (they only count).
export const parameters = { type: 'object', properties: { i: { type: 'number' } }, required: ['i'], additionalProperties: false }
let hookCalls = 0
export const before = () => {
  hookCalls++
}
export const after = () => {
  hookCalls++
}
export const hookCallCount = () => hookCalls

/** ai 5 has no tool-execution callbacks: its runners wrap the tool's execute in the two hooks. */
export const executeWithHooks = async ({ i }) => {
  before()
  const output = `ok ${i}`
  after()
  return output
}

/** Awaits `work()`, which resolves with the tool calls it made, and checks that there were
 * `calls` of them, each with its before and its after hook: every system must really have run
 * what is measured. */
export async function checked(system, calls, work) {
  const hooksBefore = hookCallCount()
  const made = await work()
  if (made !== calls) throw new Error(`${system} made ${made} tool calls, expected ${calls}`)
  const hooks = hookCallCount() - hooksBefore
  if (hooks !== 2 * calls) throw new Error(`${system} ran ${hooks} hook calls, expected ${2 * calls}`)
}
