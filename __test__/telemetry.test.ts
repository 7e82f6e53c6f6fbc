// OpenTelemetry export, opted into by the standard OTEL_* variables: each case runs an agent in a
// child process (the variables are read once per process) against a collector on 127.0.0.1.
import { createServer } from 'node:net'
import { beforeEach, describe, expect, it } from 'vitest'
import { flushTelemetry } from '../index.js'
import { runScript } from './helpers/child.js'
import { useServer } from './helpers/server.js'

const collector = useServer()
// The collector takes every export.
beforeEach(() => collector.reply((_, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}')))

/** An agent with one tool call, a PreToolUse callback, a PostToolUse hook object, and
 * SessionStart and SessionEnd callbacks. */
const AGENT = `
  const { createAgent, scriptedModel, defineTool, flushTelemetry } = require(process.env.ENTRY)
  async function work() {
    const agent = await createAgent({
      model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'lookup', input: { q: 'x' } }] }, { text: 'done' }]),
      tools: [defineTool({ name: 'lookup', execute: async () => 'found' })],
      advanced: { hooks: {
        SessionStart: [() => ({ action: 'continue' })],
        PreToolUse: [() => ({ action: 'continue' })],
        PostToolUse: [{ id: 'audit', handler: () => {} }],
        SessionEnd: [() => ({ action: 'continue' })],
      } },
    })
    const text = await (await agent.send('go')).text()
    await agent.close()
    return text
  }
`

interface ExportedSpan {
  name: string
  traceId: string
  spanId: string
  parentSpanId: string
  attributes: Record<string, string>
  /** Each attribute's OTLP value kind: `stringValue`, `intValue`, `doubleValue`, `boolValue`. */
  kinds: Record<string, string>
}

function exportedSpans(): ExportedSpan[] {
  return collector.requests.filter((request) => request.url === '/v1/traces').flatMap((request) =>
    request.body.resourceSpans.flatMap((resource: any) =>
      resource.scopeSpans.flatMap((scope: any) =>
        scope.spans.map((span: any) => ({
          name: span.name,
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? '',
          attributes: Object.fromEntries(span.attributes.map((attribute: any) => [attribute.key, String(Object.values(attribute.value)[0])])),
          kinds: Object.fromEntries(span.attributes.map((attribute: any) => [attribute.key, Object.keys(attribute.value)[0]])),
        })),
      ),
    ),
  )
}

function otel(extra: Record<string, string> = {}) {
  return { OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_SERVICE_NAME: 'support-bot', ...extra }
}

describe('OpenTelemetry export', () => {
  it('sends a run as one trace when the process exits', async () => {
    const result = await runScript(`${AGENT}; work().then((text) => console.log(text))`, { env: otel() })
    expect(result).toMatchObject({ code: 0, stderr: '' })
    expect(result.stdout.trim()).toBe('done')
    expect(collector.requests.length).toBeGreaterThan(0)
    expect(collector.requests.map((request) => [request.method, request.url, request.headers['content-type']])).toEqual(
      collector.requests.map(() => ['POST', '/v1/traces', 'application/json']),
    )
    const service = collector.requests[0].body.resourceSpans[0].resource.attributes.find((attribute: any) => attribute.key === 'service.name')
    expect(service.value.stringValue).toBe('support-bot')

    const spans = exportedSpans()
    expect(spans.map((span) => span.name).sort()).toEqual([
      'agent_close',
      'agent_run',
      'agent_start',
      ...Array(4).fill('hook'),
      ...Array(4).fill('hook_dispatch'),
      'model_call',
      'model_call',
      'tool_call',
    ])
    // Neither the tool's input nor its output is an attribute.
    const exported = JSON.stringify(collector.requests.map((request) => request.body))
    expect(exported).not.toContain('found')
    expect(exported).not.toContain('\\"q\\"')
    const run = spans.find((span) => span.name === 'agent_run')!
    const tool = spans.find((span) => span.name === 'tool_call')!
    const pre = spans.find((span) => span.name === 'hook_dispatch' && span.attributes.event === 'PreToolUse')!
    const audit = spans.find((span) => span.name === 'hook' && span.attributes.hook === 'audit')!
    expect(run.attributes).toMatchObject({ stop_reason: 'done', turns: '2' })
    expect(tool).toMatchObject({ parentSpanId: run.spanId, traceId: run.traceId, attributes: { tool: 'lookup', tool_call_id: 'c1', status: 'success' } })
    expect(pre).toMatchObject({ parentSpanId: tool.spanId, attributes: { outcome: 'ok' } })
    expect(audit.attributes.outcome).toBe('ok')
    expect(Number(audit.attributes.elapsed_us)).toBeGreaterThanOrEqual(0)
    // Numbers are OTLP integers (JSON encodes an int64 as a string), text is text.
    expect(run.kinds).toMatchObject({ turns: 'intValue', stop_reason: 'stringValue', session_id: 'stringValue' })
    expect(audit.kinds.elapsed_us).toBe('intValue')
    expect(spans.find((span) => span.name === 'model_call')!.kinds.turn).toBe('intValue')
    // The session's own spans carry the same session id as its run, are roots, and hold the
    // SessionStart and SessionEnd dispatches.
    const start = spans.find((span) => span.name === 'agent_start')!
    const close = spans.find((span) => span.name === 'agent_close')!
    expect(start.attributes.session_id).toBe(run.attributes.session_id)
    expect(close.attributes.session_id).toBe(run.attributes.session_id)
    expect([start.parentSpanId, close.parentSpanId]).toEqual(['', ''])
    expect(spans.find((span) => span.attributes.event === 'SessionStart')!.parentSpanId).toBe(start.spanId)
    expect(spans.find((span) => span.attributes.event === 'SessionEnd')!.parentSpanId).toBe(close.spanId)
  })

  it('flushTelemetry() sends the batch now, before process.exit() would lose it', async () => {
    // A batch that would otherwise wait a minute; process.exit() skips the flush at shutdown.
    const result = await runScript(`${AGENT}; work().then(flushTelemetry).then(() => { console.log('flushed'); process.exit(0) })`, {
      env: otel({ OTEL_BSP_SCHEDULE_DELAY: '60000' }),
    })
    expect(result).toMatchObject({ code: 0, stdout: 'flushed\n' })
    expect(exportedSpans().filter((span) => span.name === 'agent_run')).toHaveLength(1)
  })

  it('loses the batch on process.exit() without flushTelemetry()', async () => {
    const result = await runScript(`${AGENT}; work().then(() => { console.log('exiting'); process.exit(0) })`, {
      env: otel({ OTEL_BSP_SCHEDULE_DELAY: '60000' }),
    })
    expect(result).toMatchObject({ code: 0, stdout: 'exiting\n' })
    expect(exportedSpans()).toEqual([])
  })

  it('makes an agent made and run inside a tool the root of traces of its own', async () => {
    const result = await runScript(
      `
      const { createAgent, prompt, scriptedModel, defineTool } = require(process.env.ENTRY)
      ;(async () => {
        const agent = await createAgent({
          model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'delegate', input: {} }] }, { text: 'outer done' }]),
          // The sub-agent starts while the outer tool call's span is the current one.
          tools: [defineTool({ name: 'delegate', execute: () => prompt('inner', { model: scriptedModel([{ text: 'inner done' }]) }).then((r) => r.content) })],
        })
        console.log(await (await agent.send('go')).text())
        await agent.close()
      })()
      `,
      { env: otel() },
    )
    expect(result).toMatchObject({ code: 0, stdout: 'outer done\n' })
    const runs = exportedSpans().filter((span) => span.name === 'agent_run')
    expect(runs).toHaveLength(2)
    expect(runs.map((run) => run.parentSpanId)).toEqual(['', ''])
    expect(new Set(runs.map((run) => run.traceId)).size).toBe(2)
    // The inner agent's SessionStart runs within the outer tool call, and is still a root.
    const starts = exportedSpans().filter((span) => span.name === 'agent_start')
    expect(starts.map((start) => start.parentSpanId)).toEqual(['', ''])
  })

  it('shows a result control as a hook span of its tool call, with its answer', async () => {
    collector.reply((request, res) =>
      request.url === '/v1/traces'
        ? void res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
        : void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ decision: 'deny', reason: 'not today' })),
    )
    const result = await runScript(
      `
      const { createAgent, scriptedModel, defineTool } = require(process.env.ENTRY)
      ;(async () => {
        const agent = await createAgent({
          model: scriptedModel([{ toolCalls: [{ id: 'c1', name: 'lookup', input: {} }] }, { text: 'done' }]),
          tools: [defineTool({ name: 'lookup', execute: () => 'found' })],
          advanced: { hooks: [{ id: 'policy', type: 'beforeToolCall', webhook: { url: '${collector.url}/control', responseHandling: 'toolCall' } }] },
        })
        console.log((await (await agent.send('go')).result()).toolCalls[0].output)
        await agent.close()
      })()
      `,
      { env: otel() },
    )
    expect(result).toMatchObject({ code: 0, stdout: 'not today\n' })
    const spans = exportedSpans()
    const tool = spans.find((span) => span.name === 'tool_call')!
    expect(spans.find((span) => span.name === 'hook' && span.attributes.hook === 'policy')).toMatchObject({
      parentSpanId: tool.spanId,
      attributes: { outcome: 'deny' },
    })
  })

  it('rejects flushTelemetry() with the reason when the collector is down', async () => {
    // A port of ours that drops every connection (a freed port could be taken by another test).
    const down = createServer((socket) => socket.destroy())
    await new Promise<void>((resolve) => down.listen(0, '127.0.0.1', resolve))
    const { port } = down.address() as import('node:net').AddressInfo
    try {
      const result = await runScript(`${AGENT}; work().then(flushTelemetry).then(() => console.log('sent'), (error) => console.log(error.constructor.name, error.code, error.message))`, {
        env: otel({ OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` }),
      })
      expect(result.code).toBe(0)
      // One readable line: where, and why in a few words (not the HTTP stack's Debug text).
      expect(result.stdout).toMatch(new RegExp(`^SdkError TELEMETRY_EXPORT spans could not be exported to http://127\\.0\\.0\\.1:${port}/v1/traces: [^\\n{}()]{3,80}\\n$`))
    } finally {
      await new Promise((resolve) => down.close(resolve))
    }
  })

  it('sends the headers and the compression the variables ask for', async () => {
    const result = await runScript(`${AGENT}; work().then((text) => console.log(text))`, {
      env: otel({ OTEL_EXPORTER_OTLP_HEADERS: 'x-tenant=acme', OTEL_EXPORTER_OTLP_COMPRESSION: 'gzip' }),
    })
    expect(result).toMatchObject({ code: 0, stdout: 'done\n', stderr: '' })
    expect(collector.requests.length).toBeGreaterThan(0)
    for (const request of collector.requests) {
      expect([request.url, request.headers['x-tenant'], request.headers['content-encoding']]).toEqual(['/v1/traces', 'acme', 'gzip'])
    }
  })

  it('stays off, and says why on stderr once, when asked for a protocol it does not speak', async () => {
    // Two agents: the variables are read, and the problem reported, once per process.
    const result = await runScript(`${AGENT}; work().then(work).then((text) => console.log(text))`, { env: otel({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }) })
    expect(result).toMatchObject({ code: 0, stdout: 'done\n' })
    expect(result.stderr).toBe(
      'agent-runtime-hooks: OpenTelemetry export is off: OTEL_EXPORTER_OTLP_PROTOCOL "grpc" is not supported (use "http/protobuf" or "http/json")\n',
    )
    expect(collector.requests).toEqual([])
  })

  it.each([
    ['without an endpoint', null],
    ['with OTEL_SDK_DISABLED=true', { OTEL_SDK_DISABLED: 'true' }],
    ['with OTEL_TRACES_EXPORTER=none', { OTEL_TRACES_EXPORTER: 'none' }],
  ])('is off %s: nothing is sent and flushTelemetry() resolves', async (_, switches) => {
    // The last two point at the collector, and switch export off.
    const env = switches === null ? { OTEL_SERVICE_NAME: 'x' } : otel(switches)
    const result = await runScript(`${AGENT}; work().then(flushTelemetry).then(() => console.log('ok'))`, { env })
    expect(result).toMatchObject({ code: 0, stdout: 'ok\n', stderr: '' })
    expect(collector.requests).toEqual([])
    await expect(flushTelemetry()).resolves.toBeUndefined()
  })
})
