// The wire's encoding of user functions' replies (lib/wire.js `invoke`) against the cases the
// Rust suites' host is checked against too (fixtures/replies.json, tests/common/mod.rs): the
// Rust tests play replies as JS sends them only while both agree.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { resolve } from 'node:path'
import { describe, expect, it } from 'vitest'

const { makeInvoke, Reply, Scopes } = createRequire(import.meta.url)('../lib/wire.js')

type Case = { reply: string; returned?: unknown; mocked?: unknown; encoded?: unknown }
const { cases }: { cases: Case[] } = JSON.parse(readFileSync(resolve(__dirname, 'fixtures', 'replies.json'), 'utf8'))

describe('invoke encodes replies as the Rust test host plays them', () => {
  for (const [index, fixture] of cases.entries()) {
    it(`case ${index}: a ${fixture.reply} reply`, () => {
      expect(typeof Reply[fixture.reply]).toBe('number')
      const user = (input: { mock(result: unknown): boolean }) => {
        if ('mocked' in fixture) expect(input.mock(fixture.mocked)).toBe(true)
        return fixture.returned
      }
      const invoke = makeInvoke([{ fn: user, owner: undefined }], new Scopes())
      const reply = invoke(0, '[{}]', 0, Reply[fixture.reply], -1, null, null, false, false, null)
      expect(typeof reply).toBe('string')
      expect(reply === '' ? undefined : JSON.parse(reply)).toEqual(fixture.encoded)
    })
  }
})
