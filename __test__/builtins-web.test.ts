// WebFetch and NotebookEdit from the outside: a session whose model is a loopback server calls
// them, and the test reads what the model was sent back (the `tool` messages of the next
// request), what the page server received, and what the notebook holds afterwards.
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { createSession, type ISession, type SessionOptions, type SessionStreamEvent } from '../index.js'
import { openaiChunks, rawStream, sse, useServer, type Handler, type Recorded } from './helpers/server.js'
import { drain, ofType } from './helpers/session.js'

const server = useServer()

const API_KEY = 'sk-web-test-key-0123456789'
const ORG_SECRET = 'org-secret-header-value'
const MODEL = 'web-model'

const chat = (text: string, toolCalls: { id: string; name: string; arguments: string }[] = []): Handler => rawStream([sse(openaiChunks(text, toolCalls))])
let callCount = 0
const call = (name: string, input: unknown): Handler => chat('', [{ id: `web_call_${++callCount}`, name, arguments: JSON.stringify(input) }])

const toolMessages = (): string[] =>
  ((server.requests.at(-1)?.body?.messages ?? []) as any[]).filter((message) => message.role === 'tool').map((message) => String(message.content))
const pageRequests = (): Recorded[] => server.requests.filter((request) => !request.url.startsWith('/v1/'))
const results = (events: SessionStreamEvent[]) => ofType(events, 'tool_result')

const open: ISession[] = []
async function session(extra: Partial<SessionOptions> = {}): Promise<ISession> {
  const created = await createSession({
    provider: { type: 'openai-compatible', apiKey: API_KEY, baseUrl: server.url + '/v1', headers: { 'X-Org-Secret': ORG_SECRET } },
    model: MODEL,
    ...extra,
  } as SessionOptions)
  open.push(created)
  return created
}
async function run(target: ISession): Promise<SessionStreamEvent[]> {
  await target.send('go')
  return drain(target)
}
afterEach(async () => {
  while (open.length) await open.pop()!.close().catch(() => {})
})

const dirs: string[] = []
function workspace(): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'arh-web-')))
  dirs.push(dir)
  return dir
}
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

describe('WebFetch', () => {
  it('fetches a page on a local server when the policy allows it; the model gets Blade JSON, the server gets none of the agent credentials', async () => {
    const page: Handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' })
      res.end('hello page')
    }
    server.reply(call('WebFetch', { url: `${server.url}/page?x=1` }), page, chat('done'))
    const events = await run(await session({ webFetch: { allowPrivateNetwork: true } }))
    const [message] = toolMessages()
    const answer = JSON.parse(message)
    expect(answer).toMatchObject({
      status: 200,
      status_text: 'OK',
      body: 'hello page',
      url: `${server.url}/page?x=1`,
      redirected: false,
      redirect_count: 0,
      redirect_chain: [],
      content_type: 'text/plain',
    })
    expect(Object.keys(answer)).toEqual(['status', 'status_text', 'body', 'url', 'redirected', 'redirect_count', 'redirect_chain', 'content_type', 'response_time'])
    expect(message.startsWith('{\n  "status": 200,')).toBe(true)
    expect(results(events)[0].isError).toBe(false)
    // The model request carried the key (so the next check can fail); the page request did not.
    expect(server.requests[0].headers.authorization).toBe(`Bearer ${API_KEY}`)
    const [fetched] = pageRequests()
    expect(fetched.method).toBe('GET')
    expect(fetched.headers['user-agent']).toBe('Blade-AI/1.0')
    expect(fetched.headers.authorization).toBeUndefined()
    expect(fetched.headers['x-org-secret']).toBeUndefined()
    const sent = JSON.stringify(fetched)
    expect(sent).not.toContain(API_KEY)
    expect(sent).not.toContain(ORG_SECRET)
  })

  it('refuses loopback by default, before any request, with Blade text', async () => {
    server.reply(call('WebFetch', { url: `${server.url}/page` }), chat('done'))
    const events = await run(await session())
    expect(toolMessages()).toEqual(['Network request failed: WebFetch blocked non-public network address: 127.0.0.1'])
    expect(results(events)[0].isError).toBe(true)
    expect(pageRequests()).toEqual([])
  })

  it('an error status is `HTTP error <status>: <reason>`; a redirect to a host outside allowedHosts is refused before it is followed', async () => {
    const port = new URL(server.url).port
    server.reply(
      call('WebFetch', { url: `${server.url}/gone` }),
      (_req, res) => void res.writeHead(404).end('secret body'),
      call('WebFetch', { url: `${server.url}/jump` }),
      (_req, res) => void res.writeHead(302, { location: `http://localhost:${port}/inside` }).end(),
      chat('done'),
    )
    await run(await session({ webFetch: { allowPrivateNetwork: true, allowedHosts: ['127.0.0.1'] } }))
    expect(toolMessages()).toEqual(['HTTP error 404: Not Found', 'Network request failed: WebFetch host is not in the allowlist: localhost'])
    expect(pageRequests().map((request) => request.url)).toEqual(['/gone', '/jump'])
  })

  it('extract_content gives an HTML page as text', async () => {
    const html: Handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      res.end('<html><head><title>Notes</title><style>p{}</style></head><body><h1>Big</h1><p>Small &amp; fine</p></body></html>')
    }
    server.reply(call('WebFetch', { url: `${server.url}/doc`, extract_content: true }), html, chat('done'))
    await run(await session({ webFetch: { allowPrivateNetwork: true } }))
    const answer = JSON.parse(toolMessages()[0])
    expect(answer.content_type).toBe('text/markdown')
    expect(answer.body.startsWith(`# Notes\n\n**Source**: ${server.url}/doc\n\n---\n\n`)).toBe(true)
    expect(answer.body).toContain('Small & fine')
    expect(answer.body).not.toContain('<p>')
  })

  it('a wrong webFetch option is a ConfigError naming the field', async () => {
    await expect(session({ webFetch: { allowPrivateNetwork: 'yes' as unknown as boolean } })).rejects.toMatchObject({
      name: 'ConfigError',
      message: expect.stringContaining('webFetch.allowPrivateNetwork must be a boolean (got "yes")'),
    })
  })

  it('is offered with Blade schema', async () => {
    server.reply(chat('hi'))
    await run(await session())
    const tool = ((server.requests[0].body.tools ?? []) as any[]).find((entry) => entry.function?.name === 'WebFetch')
    expect(tool.function.parameters.required).toEqual(['url'])
    expect(Object.keys(tool.function.parameters.properties).sort()).toEqual(
      ['body', 'extract_content', 'follow_redirects', 'headers', 'max_redirects', 'method', 'return_headers', 'timeout', 'url'],
    )
  })
})

describe('NotebookEdit', () => {
  const NOTEBOOK = JSON.stringify(
    {
      cells: [
        { cell_type: 'markdown', id: 'intro', metadata: {}, source: ['# Title'] },
        { cell_type: 'code', execution_count: 1, id: 'calc', metadata: {}, outputs: [], source: ['1 + 1'] },
      ],
      metadata: { kernelspec: { name: 'python3' } },
      nbformat: 4,
      nbformat_minor: 5,
    },
    null,
    1,
  ) + '\n'

  it('replaces, inserts and deletes cells; the model gets Blade texts; the notebook keeps its layout', async () => {
    const dir = workspace()
    const path = join(dir, 'work.ipynb')
    writeFileSync(path, NOTEBOOK)
    server.reply(
      call('NotebookEdit', { notebook_path: path, cell_id: 'calc', new_source: 'x = 2\nx * 3' }),
      call('NotebookEdit', { notebook_path: 'work.ipynb', cell_id: 'intro', new_source: 'More text', cell_type: 'markdown', edit_mode: 'insert' }),
      call('NotebookEdit', { notebook_path: path, cell_id: 'intro', new_source: '', edit_mode: 'delete' }),
      call('NotebookEdit', { notebook_path: path, new_source: 'y', edit_mode: 'insert' }),
      call('NotebookEdit', { notebook_path: path, cell_id: 'nope', new_source: 'y' }),
      chat('done'),
    )
    const events = await run(await session({ defaultContext: { capabilities: { filesystem: { roots: [dir], cwd: dir } } } }))
    expect(toolMessages()).toEqual([
      `Successfully replaced cell in ${path}`,
      `Successfully inserted cell in ${path}`,
      `Successfully deleted cell in ${path}`,
      'cell_type is required for insert operation',
      'Cell with ID "nope" not found',
    ])
    expect(results(events).map((result) => result.isError)).toEqual([false, false, false, true, true])
    const text = readFileSync(path, 'utf8')
    const notebook = JSON.parse(text)
    expect(notebook.cells.map((cell: any) => cell.source)).toEqual([['More text'], ['x = 2\n', 'x * 3']])
    expect(notebook.cells[1]).toEqual({ cell_type: 'code', execution_count: 1, id: 'calc', metadata: {}, outputs: [], source: ['x = 2\n', 'x * 3'] })
    expect(notebook.cells[0].id).toMatch(/^[0-9a-f]{8}$/)
    expect(notebook.metadata).toEqual({ kernelspec: { name: 'python3' } })
    // Jupyter's layout kept: one-space indent and the final newline.
    expect(text).toBe(JSON.stringify(notebook, null, 1) + '\n')
  })

  it('a notebook outside the roots is refused and left alone', async () => {
    const dir = workspace()
    const elsewhere = workspace()
    const path = join(elsewhere, 'other.ipynb')
    writeFileSync(path, NOTEBOOK)
    server.reply(call('NotebookEdit', { notebook_path: path, cell_id: 'calc', new_source: 'x' }), chat('done'))
    await run(await session({ defaultContext: { capabilities: { filesystem: { roots: [dir], cwd: dir } } } }))
    expect(toolMessages()).toEqual([`Filesystem path is outside authorized roots: ${path}`])
    expect(readFileSync(path, 'utf8')).toBe(NOTEBOOK)
  })
})
