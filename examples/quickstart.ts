// The README's quick start as a program: `npm test` compiles it in a `tsc --init` project and
// runs it (with no OPENAI_API_KEY it drives a scripted model).
import { createAgent, defineTool, prompt, scriptedModel, SdkError, type StreamEvent } from 'agent-runtime-hooks'

const listFiles = defineTool<{ dir: string }>({
  name: 'list_files',
  description: 'Lists a directory',
  parameters: { type: 'object', properties: { dir: { type: 'string' } }, required: ['dir'] },
  kind: 'readonly',
  async execute(input, context) {
    context.signal.throwIfAborted()
    return [`${input.dir}/README.md`, `${input.dir}/package.json`]
  },
})

export async function main(): Promise<void> {
  const apiKey = process.env.OPENAI_API_KEY
  const agent = await createAgent({
    model: apiKey ? 'gpt-4o-mini' : scriptedModel([{ toolCalls: [{ name: 'list_files', input: { dir: '.' } }] }, { text: 'Two files.' }]),
    apiKey,
    baseUrl: process.env.OPENAI_BASE_URL,
    systemPrompt: 'You are a careful assistant.',
    tools: [listFiles],
    advanced: { connection: { requestTimeoutMs: 60_000 } },
  })
  const res = await agent.send('list the files')
  for await (const ev of res.stream()) {
    const event: StreamEvent = ev
    if (event.type === 'tool_use') console.log('calling', event.name, event.input)
  }
  try {
    console.log(await res.text(), (await res.result()).toolCalls)
  } catch (error) {
    if (error instanceof SdkError) console.error(error.code, error.message)
  }
  await agent.close()

  const once = await prompt('hello', { model: scriptedModel(() => ({ text: 'hi' })) })
  console.log(once.content, once.stopReason, once.usage.totalTokens)
}

await main()
