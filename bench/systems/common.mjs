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
