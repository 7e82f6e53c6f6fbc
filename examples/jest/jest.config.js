// Jest for a TypeScript project with "type": "module": ts-jest compiles the tests, Jest runs
// them as ES modules (node --experimental-vm-modules). docs/testing.md explains each line.
/** @type {import('jest').Config} */
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true }] },
}
