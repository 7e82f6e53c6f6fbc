// The demo: an agent with two real tools that read this project's files.
//
//   npm run demo                      a scripted model drives the agent (no network, no key)
//   OPENAI_API_KEY=… npm run demo     a real OpenAI-compatible model does
//                                     (optional: OPENAI_BASE_URL, MODEL)
import { readdir, readFile, stat } from 'node:fs/promises'
import { dirname, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createAgent, defineTool, scriptedModel } from '../index.mjs'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')

/** Resolves a path inside the project, refusing anything outside it. */
function inside(path) {
  const full = resolve(root, path ?? '.')
  if (full !== root && !full.startsWith(root + sep)) throw new Error(`${path} is outside the project`)
  return full
}

const listFiles = defineTool({
  name: 'list_files',
  description: 'Lists the entries of a directory of the project (directories end with /).',
  parameters: { type: 'object', properties: { dir: { type: 'string', description: 'Directory, relative to the project root' } } },
  kind: 'readonly',
  sideEffect: 'pure',
  async execute({ dir }) {
    const entries = await readdir(inside(dir), { withFileTypes: true })
    return entries
      .filter((entry) => !entry.name.startsWith('.') && entry.name !== 'node_modules' && entry.name !== 'target')
      .map((entry) => (entry.isDirectory() ? `${entry.name}/` : entry.name))
      .sort()
      .join('\n')
  },
})

const readProjectFile = defineTool({
  name: 'read_file',
  description: 'Reads a text file of the project (at most 4000 characters).',
  parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
  kind: 'readonly',
  sideEffect: 'pure',
  async execute({ path }) {
    const full = inside(path)
    if ((await stat(full)).isDirectory()) return { status: 'error', error: { message: `${path} is a directory` } }
    const text = await readFile(full, 'utf8')
    return text.length > 4000 ? `${text.slice(0, 4000)}\n[… ${text.length - 4000} more characters]` : text
  },
})

/** Plays a model that explores the project: list, read package.json, then answer from what it read. */
function explorer() {
  return scriptedModel(({ turn, messages }) => {
    const lastTool = [...messages].reverse().find((message) => message.role === 'tool')
    if (turn === 1) {
      return { text: 'Let me look around the project.', toolCalls: [{ name: 'list_files', input: { dir: '.' } }], usage: { inputTokens: 120, outputTokens: 18 } }
    }
    if (turn === 2) {
      const listing = lastTool.content.split('\n')
      const wanted = ['package.json', 'Cargo.toml'].filter((name) => listing.includes(name))
      return { toolCalls: wanted.map((path) => ({ name: 'read_file', input: { path } })), usage: { inputTokens: 200, outputTokens: 30 } }
    }
    const pkg = JSON.parse(messages.find((m) => m.role === 'tool' && m.content.trimStart().startsWith('{'))?.content ?? '{}')
    const scripts = Object.keys(pkg.scripts ?? {}).join(', ')
    return {
      text: `This is ${pkg.name}@${pkg.version}: ${pkg.description}. Its npm scripts are: ${scripts}.`,
      usage: { inputTokens: 900, outputTokens: 40 },
    }
  })
}

const live = Boolean(process.env.OPENAI_API_KEY)
const agent = await createAgent({
  model: live ? process.env.MODEL ?? 'gpt-4o-mini' : explorer(),
  ...(live && process.env.OPENAI_BASE_URL ? { baseUrl: process.env.OPENAI_BASE_URL } : {}),
  systemPrompt: 'You explore a software project with the tools you have and answer in two sentences.',
  tools: [listFiles, readProjectFile],
  maxTurns: 8,
})

console.log(`agent ${agent.sessionId} (${live ? `model ${process.env.MODEL ?? 'gpt-4o-mini'}` : 'scripted model'})`)
const question = 'What is this project, and how do I run it?'
console.log(`> ${question}\n`)
const response = await agent.send(question)
let inText = false
for await (const event of response.stream()) {
  if (event.type !== 'content' && inText) {
    process.stdout.write('\n')
    inText = false
  }
  switch (event.type) {
    case 'turn':
      console.log(`── model turn ${event.index}`)
      break
    case 'content':
      if (!inText) process.stdout.write('   assistant: ')
      inText = true
      process.stdout.write(event.delta)
      break
    case 'tool_use':
      console.log(`   → ${event.name}(${JSON.stringify(event.input)})`)
      break
    case 'tool_result': {
      const lines = event.output.split('\n')
      const preview = lines.slice(0, 4).join(' | ') + (lines.length > 4 ? ` | … (${lines.length} lines)` : '')
      console.log(`   ← ${event.name} [${event.status}] ${preview}`)
      break
    }
    case 'usage':
      console.log(`── usage: ${event.usage.inputTokens} in, ${event.usage.outputTokens} out`)
      break
    case 'result':
      console.log(`── done: ${event.result.turns} model turns, ${event.result.toolCalls.length} tool calls, stop reason ${event.result.stopReason}`)
      break
    case 'error':
      console.error(`── failed: ${event.error.message}`)
      process.exitCode = 1
      break
  }
}
await agent.close()
