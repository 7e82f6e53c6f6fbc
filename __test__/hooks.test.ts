// Inline hooks through the public API: the seed examples, dispatch order, every event's rules
// and texts, deadlines, AbortSignal, fail-closed cleanup and SessionEnd once.
import { describe, expect, it } from 'vitest'
import {
  createAgent,
  defineTool,
  HookEvent,
  HookTimeoutError,
  prompt,
  scriptedModel,
  SdkError,
  type AgentOptions,
  type HookInput,
  type HookOutput,
  type ToolDefinition,
} from '../index.js'
import { onceSettled, openaiChunks, rawStream, sleep, sse, until, untilAborted, useServer } from './helpers/server.js'

const server = useServer()

const bash = defineTool<{ command: string }>({ name: 'Bash', parameters: { type: 'object', properties: { command: { type: 'string' } }, required: ['command'] }, execute: ({ command }) => `ran: ${command}` })
const read = defineTool<{ file_path: string }>({ name: 'Read', parameters: { type: 'object', properties: { file_path: { type: 'string' } }, required: ['file_path'] }, kind: 'readonly', execute: () => 'user=alice\nSECRET_KEY=hunter2\nmode=prod' })
const write = defineTool<{ file_path: string; content: string }>({ name: 'Write', parameters: { type: 'object', properties: { file_path: { type: 'string' }, content: { type: 'string' } }, required: ['file_path', 'content'] }, kind: 'write', execute: ({ content }) => `wrote ${content.length} chars: ${content}` })

/** A loopback OpenAI-compatible model: first turn calls `name(input)`, second answers "done". */
function modelCalling(name: string, input: object) {
  server.reply(
    rawStream([sse(openaiChunks('', [{ id: 'call_1', name, arguments: JSON.stringify(input) }]))]),
    rawStream([sse(openaiChunks('done'))]),
  )
  return { model: 'gpt-test', apiKey: 'sk', baseUrl: server.url }
}

/** The tool message the model was sent on its second turn. */
function toolMessageSent() {
  return server.requests[1].body.messages.find((message: any) => message.role === 'tool')
}

describe('the seed examples', () => {
  it('blocks dangerous commands with the reason the model then sees', async () => {
    const dangerous = [/rm\s+-rf/, /mkfs/, /dd\s+if=/]
    const result = await prompt('clean up', {
      ...modelCalling('Bash', { command: 'rm -rf /' }),
      tools: [bash],
      advanced: {
        hooks: {
          [HookEvent.PreToolUse]: [
            async (input) => {
              if (input.toolName !== 'Bash') return { action: 'continue' }
              const command = String(input.toolInput?.command ?? '')
              if (dangerous.some((pattern) => pattern.test(command))) return { action: 'abort', reason: `危险命令被阻止: ${command}` }
              return { action: 'continue' }
            },
          ],
        },
      },
    })
    expect(result.toolCalls[0]).toMatchObject({ status: 'error', output: 'Tool execution aborted: 危险命令被阻止: rm -rf /' })
    expect(toolMessageSent()).toEqual({ role: 'tool', tool_call_id: 'call_1', content: 'Tool execution aborted: 危险命令被阻止: rm -rf /' })
  })

  it('redacts secrets from tool output before the model sees them', async () => {
    const agent = await createAgent({
      ...modelCalling('Read', { file_path: '.env' }),
      tools: [read],
      advanced: {
        hooks: {
          [HookEvent.PostToolUse]: [
            async (input) => {
              if (input.toolName !== 'Read') return { action: 'continue' }
              return { action: 'continue', modifiedOutput: String(input.toolOutput).replace(/SECRET_KEY=\w+/g, 'SECRET_KEY=***') }
            },
          ],
        },
      },
    })
    const response = await agent.send('show the env file')
    await response.result()
    expect(toolMessageSent().content).toBe('user=alice\nSECRET_KEY=***\nmode=prod')
    expect(JSON.stringify(agent.messages)).not.toContain('hunter2')
    const events: any[] = []
    for await (const event of response.stream()) events.push(event)
    expect(events.find((event) => event.type === 'tool_result').output).toBe('user=alice\nSECRET_KEY=***\nmode=prod')
    await agent.close()
  })

  it('prefixes the tenant to every prompt the model receives', async () => {
    server.reply(rawStream([sse(openaiChunks('ok'))]))
    await prompt('What is my quota?', {
      model: 'gpt-test',
      apiKey: 'sk',
      baseUrl: server.url,
      advanced: {
        hooks: {
          [HookEvent.UserPromptSubmit]: [
            async (input) => {
              const text = String(input.userPrompt ?? '')
              return { action: 'continue', modifiedInput: { userPrompt: `[tenant:acme]\n${text}` } }
            },
          ],
        },
      },
    })
    expect(server.requests[0].body.messages).toEqual([{ role: 'user', content: '[tenant:acme]\nWhat is my quota?' }])
  })

  it('rewrites tool input before the tool runs', async () => {
    const result = await prompt('write it', {
      ...modelCalling('Write', { file_path: 'a.ts', content: 'let x = 1' }),
      tools: [write],
      advanced: {
        hooks: {
          [HookEvent.PreToolUse]: [
            async (input) => {
              if (input.toolName !== 'Write') return { action: 'continue' }
              return { action: 'continue', modifiedInput: { ...input.toolInput, content: `// Generated\n${String(input.toolInput?.content ?? '')}` } }
            },
          ],
        },
      },
    })
    expect(result.toolCalls[0].input).toEqual({ file_path: 'a.ts', content: '// Generated\nlet x = 1' })
    expect(toolMessageSent().content).toBe('wrote 22 chars: // Generated\nlet x = 1')
  })

  it('streams the model’s arguments in tool_use, and records the merged input the tool got, in the model’s key order then the hook’s new keys', async () => {
    const agent = await createAgent({
      ...modelCalling('Write', { file_path: 'a.ts', content: 'let x = 1' }),
      tools: [write],
      advanced: {
        hooks: {
          [HookEvent.PreToolUse]: [async (input) => ({ action: 'continue', modifiedInput: { mode: 'append', content: `// ${String(input.toolInput?.content)}` } })],
        },
      },
    })
    const response = await agent.send('write it')
    const events: any[] = []
    for await (const event of response.stream()) events.push(event)
    const result = await response.result()
    await agent.close()
    const used = events.find((event) => event.type === 'tool_use')
    expect(used.input).toEqual({ file_path: 'a.ts', content: 'let x = 1' })
    expect(Object.keys(used.input)).toEqual(['file_path', 'content'])
    // Shallowly merged (SPEC §5.2): a key the model sent keeps its place, a new one comes after.
    expect(result.toolCalls[0].input).toEqual({ file_path: 'a.ts', content: '// let x = 1', mode: 'append' })
    expect(Object.keys(result.toolCalls[0].input)).toEqual(['file_path', 'content', 'mode'])
  })
})

describe('dispatch', () => {
  it('runs three callbacks in order, each with the original input, and applies results in order', async () => {
    const calls: [string, unknown][] = []
    const hook = (name: string, output: HookOutput) => async (input: HookInput) => {
      calls.push([name, input.toolInput])
      return output
    }
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Write', input: { file_path: 'a', content: 'x' } }] }, { text: 'end' }]),
      tools: [write],
      advanced: {
        hooks: {
          PreToolUse: [
            hook('first', { action: 'continue', modifiedInput: { content: 'one' } }),
            hook('second', { action: 'skip', reason: 'second says skip', modifiedInput: { content: 'never merged' } }),
            hook('third', { action: 'abort', reason: 'too late to matter' }),
          ],
        },
      },
    })
    expect(calls).toEqual([
      ['first', { file_path: 'a', content: 'x' }],
      ['second', { file_path: 'a', content: 'x' }],
      ['third', { file_path: 'a', content: 'x' }],
    ])
    expect(result.toolCalls[0]).toMatchObject({ status: 'success', output: 'second says skip', input: { file_path: 'a', content: 'one' } })
  })

  it('gives every input event, sessionId and a live abortSignal, and each tool event its fields', async () => {
    const inputs: Record<string, HookInput> = {}
    const keep = (input: HookInput): HookOutput => {
      inputs[input.event] = { ...input, signalLive: input.abortSignal instanceof AbortSignal && !input.abortSignal.aborted }
      return { action: 'continue' }
    }
    const hooks = Object.fromEntries(Object.values(HookEvent).map((event) => [event, [keep]]))
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'r1', name: 'Read', input: { file_path: 'notes.txt' } }, { id: 'b1', name: 'Bash', input: { command: 'ls' } }] }, { text: 'summary' }]),
      tools: [read, defineTool({ name: 'Bash', execute: () => { throw new TypeError('no shell here') } })],
      advanced: { hooks },
    })
    await (await agent.send([{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AA' } }])).result()
    await agent.close()
    const common = { sessionId: agent.sessionId, signalLive: true }
    expect(inputs.SessionStart).toMatchObject({ ...common, event: 'SessionStart', isResume: false })
    expect(inputs.UserPromptSubmit).toMatchObject({ ...common, userPrompt: 'look', hasImages: true, imageCount: 1 })
    expect(inputs.PreToolUse).toMatchObject({ ...common, toolName: expect.any(String), toolCallId: expect.any(String), stepIndex: 0 })
    expect(inputs.PermissionRequest).toMatchObject({ ...common, toolKind: expect.any(String), affectedPaths: expect.any(Array) })
    const toolKeys = ['event', 'sessionId', 'agentPath', 'toolName', 'toolInput', 'toolCallId', 'stepIndex', 'callIndex', 'operationId', 'apiName', 'identifier', 'args']
    expect(Object.keys(inputs.PermissionRequest)).toEqual([...toolKeys, 'toolKind', 'affectedPaths', 'abortSignal', 'signalLive'])
    expect(Object.keys(inputs.PostToolUse)).toEqual([...toolKeys, 'toolOutput', 'result', 'mocked', 'abortSignal', 'signalLive'])
    expect(inputs.PostToolUse).toMatchObject({ ...common, toolName: 'Read', toolInput: { file_path: 'notes.txt' }, toolOutput: 'user=alice\nSECRET_KEY=hunter2\nmode=prod', toolCallId: 'r1', mocked: false })
    expect(inputs.PostToolUseFailure).toMatchObject({ ...common, toolName: 'Bash', toolOutput: 'Tool execution failed: no shell here', toolCallId: 'b1' })
    expect(inputs.PostToolUseFailure.error).toBeInstanceOf(TypeError)
    expect((inputs.PostToolUseFailure.error as Error).message).toBe('no shell here')
    expect(inputs.TaskCompleted).toMatchObject({ ...common, taskId: expect.any(String), taskDescription: 'look', resultSummary: 'summary', success: true, reason: 'done' })
    expect(inputs.SessionEnd).toMatchObject({ ...common, reason: 'other' })
  })

  it("an input's abortSignal survives spreading, destructuring and Object.assign, and shows no hidden keys", async () => {
    const seen: unknown[] = []
    const agent = await createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: {
        hooks: {
          UserPromptSubmit: [
            (input: HookInput) => {
              const { abortSignal } = input
              seen.push(abortSignal === input.abortSignal, { ...input }.abortSignal === abortSignal, Object.assign({}, input).abortSignal === abortSignal)
              seen.push(Object.keys(input).includes('abortSignal'), JSON.stringify(Object.getOwnPropertySymbols(input).filter((key) => Object.getOwnPropertyDescriptor(input, key)?.enumerable)))
              // A getter copied by its descriptor onto another object has nothing to read there.
              const copy = Object.defineProperty({}, 'abortSignal', Object.getOwnPropertyDescriptor(input, 'abortSignal')!)
              seen.push((copy as HookInput).abortSignal)
              return { action: 'continue' }
            },
          ],
        },
      },
    })
    await (await agent.send('go')).result()
    await agent.close()
    expect(seen).toEqual([true, true, true, true, '[]', undefined])
  })

  it('a SessionEnd callback runs at close, never during a run', async () => {
    let calls = 0
    const agent = await createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { hooks: { SessionEnd: [async () => (calls++, { action: 'continue' })] } } })
    await (await agent.send('go')).result()
    expect(calls).toBe(0)
    await agent.close()
    expect(calls).toBe(1)
  })

  it('a throwing non-tool callback stops the dispatch and reaches the caller as the same error', async () => {
    const thrown = new RangeError('prompt hook failed')
    let later = 0
    const agent = await createAgent({
      model: scriptedModel([{ text: 'unused' }, { text: 'second' }]),
      advanced: { hooks: { UserPromptSubmit: [() => { throw thrown }, async () => (later++, { action: 'continue' })] } },
    })
    await expect((await agent.send('go')).text()).rejects.toBe(thrown)
    expect(later).toBe(0)
    await agent.close()
  })

  it('a throwing TaskCompleted or SessionEnd callback reaches the caller as that very error', async () => {
    const onTask = new RangeError('task hook failed')
    const onEnd = new TypeError('end hook failed')
    const agent = await createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: { hooks: { TaskCompleted: [() => { throw onTask }], SessionEnd: [() => { throw onEnd }] } },
    })
    await expect((await agent.send('go')).text()).rejects.toBe(onTask)
    await expect(agent.close()).rejects.toBe(onEnd)
  })

  it('gives each callback its own copy of the input: what one changes, the next and the tool never see', async () => {
    const seen: unknown[] = []
    let executed: unknown
    await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Write', input: { content: 'original' } }] }, { text: 'end' }]),
      tools: [defineTool({ name: 'Write', execute: (input) => ((executed = input), 'written') })],
      advanced: {
        hooks: {
          PreToolUse: [
            (input) => {
              ;(input.toolInput as { content: string }).content = 'changed in place'
              return { action: 'continue' }
            },
            (input) => (seen.push(structuredClone(input.toolInput)), { action: 'continue' }),
          ],
        },
      },
    })
    expect(seen).toEqual([{ content: 'original' }])
    expect(executed).toEqual({ content: 'original' })
  })

  it("PermissionRequest's toolKind is the tool's kind, execute when it has none", async () => {
    const kinds: Record<string, unknown> = {}
    await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Read', input: {} }, { name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
      tools: [defineTool({ name: 'Read', kind: 'readonly', execute: () => 'read' }), bash],
      advanced: { hooks: { PermissionRequest: [(input) => ((kinds[String(input.toolName)] = input.toolKind), { action: 'continue' })] } },
    })
    expect(kinds).toEqual({ Read: 'readonly', Bash: 'execute' })
  })

  it('an output that is not a hook output is INVALID_HOOK_OUTPUT naming the callback', async () => {
    const agent = await createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: { hooks: { UserPromptSubmit: [async () => ({ action: 'continue' }), (async () => undefined) as any] } },
    })
    const error = await (await agent.send('go')).text().catch((e) => e)
    expect(error).toBeInstanceOf(SdkError)
    expect(error).toMatchObject({
      code: 'INVALID_HOOK_OUTPUT',
      message: "advanced.hooks.UserPromptSubmit[1] returned undefined; a hook must return { action: 'continue' | 'skip' | 'abort' }",
    })
    const inTool = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
      tools: [bash],
      advanced: { hooks: { PreToolUse: [async () => ({ action: 'proceed' }) as any] } },
    })
    expect(inTool.toolCalls[0].output).toBe(
      `Tool execution failed: advanced.hooks.PreToolUse[0] returned an object whose action is "proceed"; a hook must return { action: 'continue' | 'skip' | 'abort' }`,
    )
    await agent.close()
  })
})

describe('per-event rules', () => {
  it('PreToolUse skip still runs PostToolUse; abort fails the call and runs PostToolUseFailure', async () => {
    const post: string[] = []
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ id: 's', name: 'Bash', input: { command: 'skip me' } }, { id: 'a', name: 'Bash', input: { command: 'abort me' } }] }, { text: 'end' }]),
      tools: [bash],
      advanced: {
        hooks: {
          PreToolUse: [async (input) => ({ action: String(input.toolInput?.command).startsWith('skip') ? 'skip' : 'abort' })],
          PostToolUse: [async (input) => (post.push(`post ${input.toolCallId} ${input.toolOutput}`), { action: 'continue' })],
          PostToolUseFailure: [async (input) => (post.push(`failure ${input.toolCallId} ${input.toolOutput}`), { action: 'continue' })],
        },
      },
    })
    expect(result.toolCalls.map((call) => [call.status, call.output])).toEqual([
      ['success', 'Tool "Bash" was skipped by hook'],
      ['error', 'Tool execution aborted: Tool "Bash" was aborted by hook'],
    ])
    expect(post.sort()).toEqual(['failure a Tool execution aborted: Tool "Bash" was aborted by hook', 'post s Tool "Bash" was skipped by hook'])
  })

  it('PostToolUse: the last defined modifiedOutput wins, JSON is stringified, null stays null, status is kept', async () => {
    const run = (outputs: HookOutput[], tool: ToolDefinition<any> = bash) =>
      prompt('go', {
        model: scriptedModel([{ toolCalls: [{ name: tool.name, input: { command: 'x' } }] }, { text: 'end' }]),
        tools: [tool],
        advanced: { hooks: { PostToolUse: outputs.map((output) => async () => output), PostToolUseFailure: outputs.map((output) => async () => output) } },
      })
    expect((await run([{ action: 'continue', modifiedOutput: 'a' }, { action: 'continue' }, { action: 'continue', modifiedOutput: { ok: true } }])).toolCalls[0]).toMatchObject({ output: '{"ok":true}', status: 'success' })
    expect((await run([{ action: 'continue', modifiedOutput: null }])).toolCalls[0].output).toBe('null')
    const failing = defineTool({ name: 'Bash', execute: () => { throw new Error('boom') } })
    expect((await run([{ action: 'continue', modifiedOutput: 'hook-adjusted-error' }], failing)).toolCalls[0]).toMatchObject({ output: 'hook-adjusted-error', status: 'error' })
    expect((await run([{ action: 'abort' }])).toolCalls[0]).toMatchObject({ output: 'Tool execution failed: Tool "Bash" post-execution hook aborted', status: 'error' })
    expect((await run([{ action: 'abort', reason: 'output rejected' }])).toolCalls[0].output).toBe('Tool execution failed: output rejected')
    // PostToolUseFailure follows the same rules for a failed call.
    expect((await run([{ action: 'abort' }], failing)).toolCalls[0]).toMatchObject({ output: 'Tool execution failed: Tool "Bash" post-execution hook aborted', status: 'error' })
  })

  it('a call whose arguments are not a JSON object fails without any hook; an unknown tool gets only PostToolUseFailure', async () => {
    const seen: string[] = []
    const note = (input: HookInput) => (seen.push(`${input.event}:${input.toolCallId}`), { action: 'continue' as const })
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ id: 'bad', name: 'Bash', arguments: '[1]' }, { id: 'ghost', name: 'Nope', input: {} }] }, { text: 'end' }]),
      tools: [bash],
      advanced: { hooks: { PreToolUse: [note], PermissionRequest: [note], PostToolUse: [note], PostToolUseFailure: [note] } },
    })
    expect(result.toolCalls.map((call) => call.output)).toEqual([
      'Tool execution failed: arguments must be a JSON object (got an array)',
      'Tool execution failed: Tool "Nope" not found',
    ])
    expect(seen).toEqual(['PostToolUseFailure:ghost'])
  })

  it('a throwing or timed-out tool hook fails the call, and PostToolUseFailure then runs', async () => {
    const failures: string[] = []
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
      tools: [bash],
      advanced: {
        hookTimeoutMs: 50,
        hooks: {
          PreToolUse: [(input) => untilAborted(input.abortSignal)],
          PostToolUseFailure: [async (input) => (failures.push(String(input.toolOutput)), { action: 'continue' })],
        },
      },
    })
    expect(result.toolCalls[0].output).toBe('Tool execution failed: Hook PreToolUse exceeded 50ms')
    expect(failures).toEqual(['Tool execution failed: Hook PreToolUse exceeded 50ms'])
  })

  it('a throwing or timed-out PostToolUse or PermissionRequest hook fails the call, and PostToolUseFailure then runs', async () => {
    // [options, the call's output, whether the permission function and the tool still ran]
    const cases: [NonNullable<AgentOptions['advanced']>, string, boolean][] = [
      [{ hooks: { PostToolUse: [() => { throw new Error('post broke') }] } }, 'Tool execution failed: post broke', true],
      [{ hookTimeoutMs: 30, hooks: { PostToolUse: [(input) => untilAborted(input.abortSignal)] } }, 'Tool execution failed: Hook PostToolUse exceeded 30ms', true],
      [{ hooks: { PermissionRequest: [() => { throw new Error('no verdict') }] } }, 'Tool execution failed: no verdict', false],
    ]
    for (const [advanced, expected, toolRan] of cases) {
      const failures: string[] = []
      let ran = 0
      let asked = 0
      const result = await prompt('go', {
        model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
        tools: [defineTool({ name: 'Bash', execute: () => (ran++, 'listed') })],
        advanced: {
          ...advanced,
          permission: () => (asked++, { behavior: 'allow' }),
          hooks: { ...(advanced.hooks as object), PostToolUseFailure: [async (input: HookInput) => (failures.push(String(input.toolOutput)), { action: 'continue' as const })] },
        },
      })
      expect(result.toolCalls[0]).toMatchObject({ output: expected, status: 'error' })
      expect(failures).toEqual([expected])
      // A PermissionRequest failure stops the call before the permission function and the tool.
      expect([asked, ran]).toEqual(toolRan ? [1, 1] : [0, 0])
    }
  })

  it('a throwing PostToolUseFailure hook keeps the original tool error', async () => {
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: {} }] }, { text: 'end' }]),
      tools: [defineTool({ name: 'Bash', execute: () => { throw new Error('tool error') } })],
      advanced: { hooks: { PostToolUseFailure: [() => { throw new Error('hook error') }] } },
    })
    expect(result.toolCalls[0].output).toBe('Tool execution failed: tool error')
  })

  it('UserPromptSubmit: bare-string rewrite keeps images; abort rejects and the session stays usable', async () => {
    const seen: unknown[] = []
    let abort = false
    const agent = await createAgent({
      model: scriptedModel((request) => (seen.push(request.messages.at(-1)), { text: 'ok' })),
      advanced: { hooks: { UserPromptSubmit: [async () => (abort ? { action: 'abort' } : { action: 'continue', modifiedInput: 'updated prompt' as any })] } },
    })
    const image = { type: 'image_url' as const, image_url: { url: 'data:image/png;base64,AA' } }
    await (await agent.send([image, { type: 'text', text: 'first' }, image, { type: 'text', text: 'second' }])).text()
    expect(seen[0]).toEqual({ role: 'user', content: [{ type: 'text', text: 'updated prompt' }, image, image] })
    abort = true
    const error = await (await agent.send('blocked')).text().catch((e) => e)
    expect(error).toBeInstanceOf(SdkError)
    expect(error.message).toBe('Prompt submission aborted by hook')
    const withReason = await createAgent({ model: scriptedModel([]), advanced: { hooks: { UserPromptSubmit: [async () => ({ action: 'abort', reason: 'quota exceeded' })] } } })
    await expect((await withReason.send('go')).text()).rejects.toMatchObject({ name: 'SdkError', message: 'quota exceeded' })
    await withReason.close()
    expect(agent.messages.filter((message) => message.role === 'user')).toHaveLength(1)
    abort = false
    expect(await (await agent.send('again')).text()).toBe('ok')
    await agent.close()
  })

  it('SessionStart abort rejects createAgent; TaskCompleted abort rejects the response', async () => {
    await expect(createAgent({ model: scriptedModel([]), advanced: { hooks: { SessionStart: [async () => ({ action: 'abort' })] } } })).rejects.toMatchObject({ message: 'Hook SessionStart aborted' })
    await expect(createAgent({ model: scriptedModel([]), advanced: { hooks: { SessionStart: [async () => ({ action: 'abort', reason: 'no seats left' })] } } })).rejects.toMatchObject({ message: 'no seats left' })
    const agent = await createAgent({ model: scriptedModel([{ text: 'x' }]), advanced: { hooks: { TaskCompleted: [async () => ({ action: 'abort' })] } } })
    await expect((await agent.send('go')).text()).rejects.toMatchObject({ message: 'Hook TaskCompleted aborted' })
    await agent.close()
  })

  it('a SessionStart callback that throws rejects createAgent with that very error, and SessionEnd runs once', async () => {
    const thrown = new RangeError('no workspace')
    let ended = 0
    const failure = await createAgent({
      model: scriptedModel([]),
      advanced: { hooks: { SessionStart: [() => { throw thrown }], SessionEnd: [async () => (ended++, { action: 'continue' })] } },
    }).catch((error) => error)
    expect(failure).toBe(thrown)
    expect(ended).toBe(1)
  })

  it('when SessionStart and then SessionEnd both throw, createAgent rejects with SessionStart\'s error and the other is logged', async () => {
    const thrown = new RangeError('no workspace')
    const warnings: string[] = []
    const failure = await createAgent({
      model: scriptedModel([]),
      advanced: {
        logger: (entry) => void warnings.push(entry.message),
        hooks: { SessionStart: [() => { throw thrown }], SessionEnd: [() => { throw new Error('end broke too') }] },
      },
    }).catch((error) => error)
    expect(failure).toBe(thrown)
    // Log lines reach the logger on a later turn of the event loop.
    await until(() => warnings.length > 0)
    expect(warnings).toEqual(['SessionEnd failed while cleaning up after SessionStart'])
  })

  it('a PostToolUse abort fails the call without running PostToolUseFailure', async () => {
    let failureHooks = 0
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
      tools: [bash],
      advanced: { hooks: { PostToolUse: [() => ({ action: 'abort' })], PostToolUseFailure: [() => (failureHooks++, { action: 'continue' })] } },
    })
    expect(result.toolCalls[0]).toMatchObject({ status: 'error', output: 'Tool execution failed: Tool "Bash" post-execution hook aborted' })
    expect(failureHooks).toBe(0)
  })

  it('sends are refused while close() proceeds; a close that failed leaves the session not closed', async () => {
    let started!: () => void
    const ending = new Promise<void>((resolve) => (started = resolve))
    const agent = await createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: { sessionEndHookTimeoutMs: 50, hooks: { SessionEnd: [(input) => (started(), untilAborted(input.abortSignal))] } },
    })
    const closing = agent.close()
    await ending
    await expect(agent.send('during close')).rejects.toMatchObject({ code: 'SESSION_CLOSED' })
    await expect(closing).rejects.toMatchObject({ code: 'HOOK_TIMEOUT' })
    expect(agent.isClosed).toBe(false)
  })

  it('TaskCompleted also runs when the run fails, with success false and reason error', async () => {
    const completed: HookInput[] = []
    const agent = await createAgent({ model: scriptedModel([]), advanced: { hooks: { TaskCompleted: [async (input) => (completed.push(input), { action: 'continue' })] } } })
    await expect((await agent.send('go')).text()).rejects.toMatchObject({ code: 'MODEL_ERROR' })
    expect(completed[0]).toMatchObject({ success: false, reason: 'error', resultSummary: 'scriptedModel ran out of turns: it has 0, and this is model call 1' })
    await agent.close()
  })
})

describe('deadlines and cancellation', () => {
  it('shares one budget across two callbacks; the timeout error is the signal reason and the rejection', async () => {
    let signal: AbortSignal | undefined
    let secondStarted = 0
    let abortedAfter = 0
    const agent = await createAgent({
      model: scriptedModel([{ text: 'unused' }]),
      advanced: {
        hookTimeoutMs: 300,
        hooks: {
          UserPromptSubmit: [
            async () => (await sleep(200), { action: 'continue' }),
            (input) => {
              secondStarted = Date.now()
              signal = input.abortSignal
              signal.addEventListener('abort', () => (abortedAfter = Date.now() - secondStarted))
              return untilAborted(signal)
            },
          ],
        },
      },
    })
    const error = await (await agent.send('go')).text().catch((e) => e)
    expect(error).toBeInstanceOf(HookTimeoutError)
    expect(error.toJSON()).toEqual({ name: 'HookTimeoutError', code: 'HOOK_TIMEOUT', message: 'Hook UserPromptSubmit exceeded 300ms', event: 'UserPromptSubmit', timeoutMs: 300 })
    expect(signal!.aborted).toBe(true)
    expect(signal!.reason).toBe(error)
    // The second callback got what was left of the 300 ms (about 100), not 300 ms of its own.
    expect(abortedAfter).toBeGreaterThan(0)
    expect(abortedAfter).toBeLessThan(220)
    await agent.close()
  })

  it("the caller's signal aborts the hook's signal with the caller's reason", async () => {
    let hookSignal: AbortSignal | undefined
    const agent = await createAgent({
      model: scriptedModel([{ text: 'x' }]),
      advanced: {
        hooks: {
          UserPromptSubmit: [
            (input) => {
              hookSignal = input.abortSignal
              return untilAborted(input.abortSignal)
            },
          ],
        },
      },
    })
    const controller = new AbortController()
    const response = await agent.send('go', { signal: controller.signal })
    await until(() => hookSignal !== undefined)
    const cancellation = new Error('user cancelled')
    controller.abort(cancellation)
    await expect(response.text()).rejects.toBe(cancellation)
    expect(hookSignal!.reason).toBe(cancellation)
    // The callback rejected on abort, so nothing is left cleaning up.
    await agent.close()
  })

  it('agent.abort(reason) aborts the running hook\'s signal with that reason', async () => {
    let hookSignal: AbortSignal | undefined
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'ls' } }] }, { text: 'x' }]),
      tools: [bash],
      advanced: {
        hooks: {
          PreToolUse: [
            (input) => {
              hookSignal = input.abortSignal
              return untilAborted(input.abortSignal)
            },
          ],
        },
      },
    })
    const response = await agent.send('go')
    await until(() => hookSignal !== undefined)
    const reason = new Error('stop now')
    agent.abort(reason)
    await expect(response.text()).rejects.toBe(reason)
    expect(hookSignal!.aborted).toBe(true)
    expect(hookSignal!.reason).toBe(reason)
    await agent.close()
  })

  it('a callback that ignores its signal keeps hooks and close failing closed until it settles', async () => {
    let release!: () => void
    let blocking = true
    const agent = await createAgent({
      model: scriptedModel([{ text: 'first' }, { text: 'second' }]),
      advanced: {
        hookTimeoutMs: 40,
        hooks: {
          UserPromptSubmit: [
            () => (blocking ? new Promise((resolve) => (release = () => resolve({ action: 'continue' }))) : { action: 'continue' }),
          ],
        },
      },
    })
    await expect((await agent.send('one')).text()).rejects.toMatchObject({ code: 'HOOK_TIMEOUT', timeoutMs: 40 })
    blocking = false
    const blocked = await (await agent.send('two')).text().catch((e) => e)
    expect(blocked).toBeInstanceOf(Error)
    expect(blocked).toBeInstanceOf(SdkError)
    expect(blocked).toMatchObject({ code: 'CLEANUP_PENDING', callback: 'advanced.hooks.UserPromptSubmit[0]', message: 'An inline hook callback is still cleaning up' })
    // close() names the callback it waits for, with the contract's text.
    await expect(agent.close()).rejects.toMatchObject({
      name: 'SdkError',
      code: 'CLEANUP_PENDING',
      callback: 'advanced.hooks.UserPromptSubmit[0]',
      message: `Session runtime ${agent.sessionId} still has an inline hook callback cleaning up`,
    })
    release()
    expect(await onceSettled(async () => (await agent.send('three')).text())).toBe('first')
    await agent.close()
    expect(agent.isClosed).toBe(true)
  })

  it('while a tool hook is still cleaning up, the next tool call with hooks fails closed', async () => {
    let release!: () => void
    let blocking = true
    let executed = 0
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'one' } }] }, { toolCalls: [{ name: 'Bash', input: { command: 'two' } }] }, { text: 'end' }]),
      tools: [defineTool({ name: 'Bash', execute: () => (executed++, 'ran') })],
      advanced: {
        hookTimeoutMs: 40,
        hooks: { PreToolUse: [() => (blocking ? ((blocking = false), new Promise((resolve) => (release = () => resolve({ action: 'continue' })))) : { action: 'continue' })] },
      },
    })
    const result = await (await agent.send('go')).result()
    expect(result.toolCalls.map((call) => call.output)).toEqual([
      'Tool execution failed: Hook PreToolUse exceeded 40ms',
      'Tool execution failed: An inline hook callback is still cleaning up',
    ])
    expect(executed).toBe(0)
    release()
    await onceSettled(() => agent.close())
  })

  it('a PermissionRequest hook that outlives the budget fails the call with the timeout text', async () => {
    let executed = 0
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
      tools: [defineTool({ name: 'Bash', execute: () => (executed++, 'ran') })],
      advanced: { hookTimeoutMs: 30, hooks: { PermissionRequest: [(input) => untilAborted(input.abortSignal)] } },
    })
    expect(result.toolCalls[0]).toMatchObject({ status: 'error', output: 'Tool execution failed: Hook PermissionRequest exceeded 30ms' })
    expect(executed).toBe(0)
  })

  it('SessionEnd runs once even when it times out and close is retried or called concurrently', async () => {
    let calls = 0
    const agent = await createAgent({
      model: scriptedModel([]),
      advanced: {
        hookTimeoutMs: 10000,
        sessionEndHookTimeoutMs: 50,
        hooks: {
          SessionEnd: [
            (input) => {
              calls++
              return untilAborted(input.abortSignal)
            },
          ],
        },
      },
    })
    const [first, second] = await Promise.allSettled([agent.close(), agent.close()])
    expect(first.status).toBe('rejected')
    expect((first as PromiseRejectedResult).reason).toBeInstanceOf(HookTimeoutError)
    expect((first as PromiseRejectedResult).reason.message).toBe('Hook SessionEnd exceeded 50ms')
    expect((second as PromiseRejectedResult).reason).toBe((first as PromiseRejectedResult).reason)
    await agent.close()
    await agent.close()
    expect(calls).toBe(1)
    expect(agent.isClosed).toBe(true)
  })

  it('a PreToolUse timeout fails the call and the tool does not run', async () => {
    let ran = false
    const result = await prompt('go', {
      model: scriptedModel([{ toolCalls: [{ name: 'Bash', input: { command: 'ls' } }] }, { text: 'end' }]),
      tools: [defineTool({ name: 'Bash', execute: () => ((ran = true), 'ran') })],
      advanced: { hookTimeoutMs: 30, hooks: { PreToolUse: [(input) => new Promise((_r, reject) => input.abortSignal.addEventListener('abort', () => reject(new Error('gave up'))))] } },
    })
    expect(result.toolCalls[0].output).toBe('Tool execution failed: Hook PreToolUse exceeded 30ms')
    expect(ran).toBe(false)
  })
})
