// Under Jest's VM realm, promises, errors and values from the package belong to the test's realm.
const { createAgent, defineTool, prompt, scriptedModel, ConfigError, SdkError } = require('../../index.js')

const echo = defineTool({ name: 'echo', execute: (input) => `echo:${input.text}` })

test('promises are instances of the test realm Promise', async () => {
  const creating = createAgent({ model: scriptedModel([{ toolCalls: [{ name: 'echo', input: { text: 'a' } }] }, { text: 'done' }]), tools: [echo] })
  expect(creating).toBeInstanceOf(Promise)
  const agent = await creating
  const sending = agent.send('go')
  expect(sending).toBeInstanceOf(Promise)
  const response = await sending
  const text = response.text()
  expect(text).toBeInstanceOf(Promise)
  expect(await text).toBe('done')
  const result = await response.result()
  expect(result.toolCalls).toBeInstanceOf(Array)
  expect(result).toBeInstanceOf(Object)
  expect(result.toolCalls[0]).toStrictEqual({
    id: expect.any(String),
    name: 'echo',
    input: { text: 'a' },
    output: 'echo:a',
    duration: expect.any(Number),
    isError: false,
    status: 'success',
  })
  expect(agent.messages).toBeInstanceOf(Array)
  const closing = agent.close()
  expect(closing).toBeInstanceOf(Promise)
  await closing
})

test('errors are instances of the test realm Error and keep their classes', async () => {
  const failure = await createAgent({}).catch((error) => error)
  expect(failure).toBeInstanceOf(Error)
  expect(failure).toBeInstanceOf(ConfigError)
  expect(failure).toBeInstanceOf(SdkError)
  await expect(createAgent({})).rejects.toThrow('model is required')

  const modelError = await prompt('go', { model: scriptedModel([]) }).catch((error) => error)
  expect(modelError).toBeInstanceOf(Error)
  expect(modelError.code).toBe('MODEL_ERROR')
})

test('a tool receives its input as an object of the test realm', async () => {
  let input
  await prompt('go', {
    model: scriptedModel([{ toolCalls: [{ name: 'probe', input: { list: [1, 2] } }] }, { text: 'ok' }]),
    tools: [defineTool({ name: 'probe', execute: (value) => ((input = value), 'seen') })],
  })
  expect(input).toBeInstanceOf(Object)
  expect(input.list).toBeInstanceOf(Array)
  expect(input).toStrictEqual({ list: [1, 2] })
})

test('a hook receives its input as objects of the test realm, and its reply is applied', async () => {
  let input
  const result = await prompt('go', {
    model: scriptedModel([{ toolCalls: [{ name: 'echo', input: { text: 'a' } }] }, { text: 'ok' }]),
    tools: [echo],
    advanced: { hooks: { PreToolUse: [(value) => ((input = value), { action: 'continue', modifiedInput: { text: 'rewritten' } })] } },
  })
  expect(input).toBeInstanceOf(Object)
  expect(input.toolInput).toStrictEqual({ text: 'a' })
  expect(input.args).toStrictEqual({ text: 'a' })
  expect(typeof input.mock).toBe('function')
  expect(result.toolCalls[0].output).toBe('echo:rewritten')
})
