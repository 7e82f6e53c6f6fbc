// The demo: one short release-prep run in which every kind of hook decides something.
//
//   npm run demo                      a scripted model plays the agent: deterministic, no key, no network
//   OPENAI_API_KEY=… npm run demo     a real model does, with the same hooks
//                                     (OPENAI_MODEL, default gpt-4o-mini; OPENAI_BASE_URL)
//
// The tools do real, harmless work: they read this project's files and write only into a
// temporary folder; the shell runs a few read-only commands in JS and never starts a process.
// Each decision is printed with ⚑, who took it, and how long it took; a table closes the run.
import { createAgent } from '../index.mjs'
import { createPolicyServer } from './policy-server.mjs'
import { createReport } from './demo/report.mjs'
import { releaseModel } from './demo/script.mjs'
import { createTools } from './demo/tools.mjs'

const TENANT = 'acme'
const PROMPT = 'Get this project ready for a release: tidy the checkout, check the version and the registry config, see what is published, and write release notes.'
const live = Boolean(process.env.OPENAI_API_KEY)
const modelName = process.env.OPENAI_MODEL ?? process.env.MODEL ?? 'gpt-4o-mini'
// A person answers confirmations at a terminal; otherwise (CI, tests, a pipe) a rule does.
const interactive = Boolean(process.stdout.isTTY && process.stdin.isTTY)

const report = createReport({ interactive })
const { tools, executions, scratch } = await createTools() // the temporary folder goes when the process exits

// The example policy server (examples/policy-server.mjs), on a free port of 127.0.0.1. It denies
// commands that wipe disks or delete from absolute paths and allows the rest.
const policyServer = report.watchPolicyServer(createPolicyServer({ log: () => {} }))
await new Promise((resolve) => policyServer.listen(0, '127.0.0.1', resolve))
const policyUrl = `http://127.0.0.1:${policyServer.address().port}/hooks`

// Commands that would throw away work in a git checkout.
const DESTRUCTIVE = /\bgit\s+(clean\b|reset\s+--hard|checkout\s+--\s|push\s+(-f|--force)\b)/
// `NAME=value` settings that hold credentials.
const SECRET = /\b(_authToken|[A-Z_]*(?:TOKEN|SECRET|PASSWORD|API_KEY))=\S+/g

const hooks = [
  // UserPromptSubmit: every prompt names the tenant the agent works for.
  {
    id: 'tenant-prefix',
    type: 'UserPromptSubmit',
    handler: (event) => ({ action: 'continue', modifiedInput: { userPrompt: `[tenant:${TENANT}] ${event.userPrompt}` } }),
  },
  // PreToolUse: a guard on the shell. A blocked call does not run; the model reads the reason.
  {
    id: 'checkout-guard',
    type: 'PreToolUse',
    matcher: '^shell$',
    handler: (event) => {
      const command = String(event.toolInput?.command ?? '')
      if (DESTRUCTIVE.test(command)) return { action: 'abort', reason: `Blocked: ${command} would throw away work in this checkout` }
    },
  },
  // PreToolUse with mock(): the registry is answered from a fixture; the tool never runs.
  {
    id: 'registry-fixture',
    type: 'PreToolUse',
    matcher: '^registry_lookup$',
    handler: (event) => {
      const name = String(event.toolInput?.package ?? '')
      event.mock?.(JSON.stringify({ name, 'dist-tags': { latest: '0.1.0-rc.1' }, source: 'fixture' }))
    },
  },
  // A webhook control: the policy server allows or denies each shell command (after the hooks
  // above and the permission check, on the final input). If it cannot be reached: block.
  {
    id: 'policy-server',
    type: 'beforeToolCall',
    matcher: '^shell$',
    webhook: { url: policyUrl, responseHandling: 'toolCall', onError: 'block', timeout: 5 },
  },
  // PostToolUse: secrets are redacted before the model, the stream or agent.messages see them.
  {
    id: 'redact-secrets',
    type: 'PostToolUse',
    handler: (event) => {
      const output = String(event.toolOutput)
      const redacted = output.replace(SECRET, '$1=***')
      if (redacted !== output) return { action: 'continue', modifiedOutput: redacted }
    },
  },
]

// Permission: reading and the shell run (the guard and the policy server watch the shell);
// writing asks first.
const permission = (request) =>
  request.kind === 'write' ? { behavior: 'ask', message: `It writes ${request.affectedPaths.join(', ')}.` } : 'allow'

// Who answers an ask: you (y/n) at a terminal; otherwise a rule that approves writes into release/.
const confirmationHandler = {
  requestConfirmation: (request) =>
    interactive
      ? report.askUser(request)
      : request.affectedFiles.every((path) => path.startsWith('release/'))
        ? { approved: true }
        : { approved: false, reason: 'only release/ may be written' },
}

const agent = await createAgent({
  model: live ? modelName : releaseModel(),
  ...(live && process.env.OPENAI_BASE_URL ? { baseUrl: process.env.OPENAI_BASE_URL } : {}),
  systemPrompt:
    'You prepare releases of the software project in the current directory. Tools: shell (pwd, echo, ls, cat, wc, du), ' +
    'read_file (release/.npmrc is the registry config), registry_lookup (what is published), write_file (save ' +
    'release/RELEASE_NOTES.md). Keep every message to one or two sentences.',
  tools,
  maxTurns: 10,
  advanced: {
    hooks: hooks.map(report.hook), // report.hook only times each handler and notes its decision
    permission: report.permission(permission),
    confirmationHandler: report.confirmation(confirmationHandler),
    hookTimeoutMs: interactive ? 300_000 : 5_000, // one budget per event; a person needs longer
  },
})

report.line(`agent-runtime-hooks demo · ${live ? `model ${modelName}` : 'scripted model (no key, no network)'} · policy server on 127.0.0.1`)
report.line(`writes go to ${scratch} (removed at the end)`)
report.line('⚑ marks a decision: the event, who decided, what, and [the time the decider took]\n')
report.line(`user: ${PROMPT}`)
try {
  const response = await agent.send(PROMPT)
  for await (const event of response.stream()) report.print(event, agent)
  const ran = Object.entries(executions).map(([name, count]) => `${name} ${count}×`)
  report.line(`tools that really ran: ${ran.join(', ')} (blocked, denied and mocked calls never reach a tool)`)
  report.summary()
} finally {
  await agent.close()
  policyServer.close()
}
