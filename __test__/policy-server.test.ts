// The example policy server in examples/, driving a real agent's result controls.
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { defineTool, prompt, scriptedModel } from '../index.js'
// @ts-expect-error: a plain .mjs example without type declarations
import { createPolicyServer } from '../examples/policy-server.mjs'

let server: import('node:http').Server
let url = ''
const logged: string[] = []
beforeAll(async () => {
  server = createPolicyServer({ token: 'policy-token', log: (line: string) => logged.push(line) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`
})
afterAll(() => {
  // The runtime keeps connections alive for reuse; drop them so close() returns at once.
  server.closeAllConnections()
  return new Promise<void>((resolve) => server.close(() => resolve()))
})

it('denies a dangerous command before it runs and withholds a result holding a private key', async () => {
  process.env.POLICY_TOKEN = 'policy-token'
  const ran: string[] = []
  const tools = [
    defineTool({ name: 'Bash', execute: ({ command }) => (ran.push(String(command)), `ran ${command}`) }),
    defineTool({ name: 'Read', kind: 'readonly', execute: () => '-----BEGIN PRIVATE KEY-----\nabc' }),
  ]
  const webhook = { url, responseHandling: 'toolCall' as const, onError: 'block' as const, headers: { Authorization: 'Bearer ${POLICY_TOKEN}' }, allowedEnvVars: ['POLICY_TOKEN'] }
  const result = await prompt('go', {
    model: scriptedModel([
      { toolCalls: [{ name: 'Bash', input: { command: 'rm -rf /' } }, { name: 'Bash', input: { command: 'ls' } }, { name: 'Read', input: { path: 'id_rsa' } }] },
      { text: 'done' },
    ]),
    tools,
    advanced: {
      hooks: [
        { id: 'policy-before', type: 'beforeToolCall', webhook },
        { id: 'policy-after', type: 'afterToolCall', webhook },
        { id: 'steps', type: 'afterStep', webhook: { url, headers: webhook.headers, allowedEnvVars: webhook.allowedEnvVars } },
      ],
    },
  })
  delete process.env.POLICY_TOKEN
  expect(result.toolCalls.map((call) => call.output)).toEqual([
    'Policy: "rm -rf /" is not allowed',
    'ran ls',
    'Policy: the result contained a private key',
  ])
  expect(ran).toEqual(['ls'])
  expect(logged).toContain('afterStep  -> noted')
})
