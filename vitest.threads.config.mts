import { defineConfig } from 'vitest/config'

// Proves the addon loads and runs inside worker threads (each loads its own copy).
export default defineConfig({
  test: {
    include: ['__test__/threads/**/*.test.ts'],
    pool: 'threads',
    testTimeout: 20000,
  },
})
