// Jest runs each test file in a VM realm; this suite proves the package works there.
module.exports = {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/__test__/jest/**/*.test.js'],
}
