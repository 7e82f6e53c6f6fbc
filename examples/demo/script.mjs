// The scripted model of the demo: deterministic, no network. Like a real model it only knows
// what it was sent, and it says what it saw — so the transcript shows what the hooks did to the
// prompt and to the tool results before they reached it.
import { scriptedModel } from '../../index.mjs'

const shell = (command) => ({ name: 'shell', input: { command } })
const read = (path) => ({ name: 'read_file', input: { path } })

export function releaseModel() {
  const facts = {}
  return scriptedModel(({ turn, messages }) => {
    const prompt = messages.find((message) => message.role === 'user')?.content ?? ''
    // The results of the previous turn's tool calls, in call order.
    const results = messages.slice(messages.findLastIndex((message) => message.role === 'assistant') + 1).map((message) => message.content)
    switch (turn) {
      case 1: {
        const tenant = /^\[tenant:([\w-]+)\]/.exec(prompt)
        const whom = tenant ? `My prompt starts with ${tenant[0]}, so I work for tenant ${tenant[1]}.` : 'My prompt names no tenant.'
        return { text: `${whom} First, a clean checkout.`, toolCalls: [shell('git clean -fdx')] }
      }
      case 2:
        return { text: `The shell answered: ${results[0]}. So I only clear the old release cache.`, toolCalls: [shell('rm -rf /tmp/release-cache')] }
      case 3:
        return { text: `Refused again: ${results[0]}. I delete nothing and gather facts instead.`, toolCalls: [shell('du -sh src'), read('package.json'), read('release/.npmrc')] }
      case 4: {
        facts.size = results[0].split('\t')[0]
        facts.pkg = JSON.parse(results[1])
        const token = results[2].split('\n').find((line) => line.includes('_authToken')) ?? '(no token line)'
        return { text: `${facts.pkg.name} is at ${facts.pkg.version}, src/ holds ${facts.size}; the token line I got reads "${token}".`, toolCalls: [{ name: 'registry_lookup', input: { package: facts.pkg.name } }] }
      }
      case 5: {
        const registry = JSON.parse(results[0])
        facts.published = registry['dist-tags']?.latest ?? 'nothing'
        const notes = `# ${facts.pkg.name} ${facts.pkg.version}\n\n${facts.pkg.description}.\n\n- Previously published: ${facts.published}\n- Sources: ${facts.size} in src/\n`
        return { text: `The registry answers ${results[0]}. Saving the notes.`, toolCalls: [{ name: 'write_file', input: { path: 'release/RELEASE_NOTES.md', content: notes } }] }
      }
      default:
        return { text: `Done: ${results[0]} for ${facts.pkg.name} ${facts.pkg.version} (published so far: ${facts.published}). Nothing was deleted.` }
    }
  })
}
