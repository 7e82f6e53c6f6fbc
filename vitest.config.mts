import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['__test__/**/*.test.ts'],
    exclude: ['__test__/threads/**', '__test__/jest/**', 'node_modules/**'],
    // Each test file in its own process: a native addon is loaded once per process.
    pool: 'forks',
    testTimeout: 20000,
  },
})
