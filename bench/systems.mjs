// The same agent workload in each system: a model that asks for one tool call per turn for
// `turns` turns and then answers, one JS tool returning a short string, and two hooks per tool
// call (before and after). Each runner resolves with the number of tool calls it made. Each
// system is its own module, so a process measuring one loads only that one.
export const NAMES = ['ours', 'openai-agents', 'ai-sdk', 'ai7', 'mastra', 'langgraph', 'js-floor']

/** Loads the runner of one system. */
export async function load(name) {
  return (await import(`./systems/${name}.mjs`)).default
}

/** Loads every runner: `{ name: run(turns) }`. */
export async function loadAll() {
  return Object.fromEntries(await Promise.all(NAMES.map(async (name) => [name, await load(name)])))
}
