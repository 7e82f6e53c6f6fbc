// Tools whose parameters are a schema library's schema, as users of the AI SDK and the OpenAI
// Agents SDK write them: the model is sent the JSON Schema the library itself writes (zod's
// `z.toJSONSchema`), the arguments pass the library's validation, and what is no schema at all
// is refused naming the tool — never sent to the model.
import { describe, expect, it } from 'vitest'
import { z } from 'zod'
import { ConfigError, createAgent, defineTool, scriptedModel, type ScriptedTurn } from '../index.js'

const payment = z.object({
  amount: z.number().positive().describe('How much, in euros'),
  note: z.string().default('none'),
})

/** What the model was sent, and the agent's tool results, for one run of `turns`. */
async function run(tools: unknown[], turns: ScriptedTurn[]) {
  const offered: unknown[] = []
  let turn = 0
  const agent = await createAgent({
    model: scriptedModel(({ tools: sent }) => {
      offered.push(sent)
      return turns[turn++] ?? { text: 'done' }
    }),
    tools: tools as never,
  })
  const result = await (await agent.send('go')).result()
  await agent.close()
  return { offered, result }
}

describe('zod schemas as parameters', () => {
  it('the model is sent what z.toJSONSchema writes (draft-07, for the input), without $schema', async () => {
    const pay = defineTool({ name: 'pay', description: 'Pays', parameters: payment, execute: ({ amount }) => `paid ${amount}` })
    const { offered } = await run([pay], [{ text: 'nothing to pay' }])
    const { $schema, ...expected } = z.toJSONSchema(payment, { target: 'draft-7', io: 'input' })
    expect($schema).toBe('http://json-schema.org/draft-07/schema#')
    expect(offered[0]).toEqual([{ name: 'pay', description: 'Pays', parameters: expected }])
    expect(expected).toMatchObject({ type: 'object', properties: { amount: { type: 'number', description: 'How much, in euros' } }, required: ['amount'] })
  })

  it('execute gets what zod made of the arguments: defaults filled in', async () => {
    const seen: unknown[] = []
    const pay = defineTool({ name: 'pay', parameters: payment, execute: (input) => (seen.push(input), `paid ${input.amount} (${input.note})`) })
    const { result } = await run([pay], [{ toolCalls: [{ id: 'c1', name: 'pay', input: { amount: 12.5 } }] }])
    expect(seen).toEqual([{ amount: 12.5, note: 'none' }])
    expect(result.toolCalls[0]).toMatchObject({ status: 'success', output: 'paid 12.5 (none)' })
  })

  it('arguments zod refuses fail the call with its issues, and execute does not run', async () => {
    let ran = false
    const pay = defineTool({ name: 'pay', parameters: payment, execute: () => ((ran = true), 'paid') })
    const { result } = await run([pay], [{ toolCalls: [{ id: 'c1', name: 'pay', input: { amount: -3 } }] }])
    expect(ran).toBe(false)
    expect(result.toolCalls[0]?.status).toBe('error')
    expect(result.toolCalls[0]?.output).toMatch(/^Tool execution failed: Invalid input for pay: amount: .+/)
  })

  it('a generator tool keeps its progress events', async () => {
    const slow = defineTool({
      name: 'slow',
      parameters: z.object({ steps: z.number().int() }),
      async *execute({ steps }) {
        for (let step = 1; step <= steps; step++) yield { step }
        return `did ${steps}`
      },
    })
    const { result } = await run([slow], [{ toolCalls: [{ id: 'c1', name: 'slow', input: { steps: 2 } }] }])
    expect(result.toolCalls[0]).toMatchObject({ status: 'success', output: 'did 2' })
  })
})

describe('what is not a schema is refused, naming the tool', () => {
  it('a Standard Schema that cannot write JSON Schema (zod before 4.2, Valibot without its converter)', async () => {
    const noJson = { '~standard': { version: 1, vendor: 'valibot', validate: (value: unknown) => ({ value }) } }
    const error = await createAgent({ model: scriptedModel([]), tools: [{ name: 'a', execute: () => 'x' }, { name: 'lookup', parameters: noJson as never, execute: () => 'x' }] }).catch((thrown: unknown) => thrown)
    expect(error).toBeInstanceOf(ConfigError)
    expect(error).toMatchObject({
      field: 'tools[1].parameters',
      message: 'tools[1].parameters of the tool "lookup" is a valibot schema that cannot describe itself as JSON Schema (no ~standard.jsonSchema): pass its JSON Schema (the library\'s converter) instead',
    })
  })

  it('an instance of a class', async () => {
    class Shape {
      type = 'object'
    }
    const error = await createAgent({ model: scriptedModel([]), tools: [{ name: 'draw', parameters: new Shape() as never, execute: () => 'x' }] }).catch((thrown: unknown) => thrown)
    expect(error).toMatchObject({ name: 'ConfigError', field: 'tools[0].parameters', message: 'tools[0].parameters of the tool "draw" must be a JSON Schema object or a Standard Schema (zod, Valibot, ArkType) (got an instance of Shape)' })
  })

  it('plain JSON Schema, TypeBox-style with symbol keys, crosses as it is', async () => {
    const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], [Symbol.for('TypeBox.Kind')]: 'Object' }
    const weather = defineTool<{ city: string }>({ name: 'weather', parameters: schema, execute: ({ city }) => `sunny in ${city}` })
    const { offered } = await run([weather], [{ text: 'ok' }])
    expect(offered[0]).toEqual([{ name: 'weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }])
  })
})
