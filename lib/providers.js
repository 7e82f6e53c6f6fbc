'use strict'
// Blade's `ProviderRegistry`: model providers of the caller's own, by `type`. A session whose
// `provider.type` the registry holds is answered by the model object its `create(config)`
// makes (`streamChat` or `chat`); the loop, hooks and tools stay in Rust, which calls that
// object as it calls a `scriptedModel` function.

const { ConfigError } = require('./errors.js')

class ProviderRegistry {
  #providers = new Map()

  /** `providers`: `[{ type, create(config) }]`. */
  constructor(providers = []) {
    if (!Array.isArray(providers)) throw new ConfigError(`ProviderRegistry takes an array of { type, create } (got ${typeof providers})`, { field: 'providers' })
    providers.forEach((provider, index) => this.register(provider, index))
  }

  register(provider, index = this.#providers.size) {
    if (typeof provider?.type !== 'string' || provider.type === '') throw new ConfigError(`providerRegistry[${index}].type must be a non-empty string`, { field: `providerRegistry[${index}].type` })
    if (typeof provider.create !== 'function') throw new ConfigError(`providerRegistry[${index}].create must be a function`, { field: `providerRegistry[${index}].create` })
    this.#providers.set(provider.type, provider)
    return this
  }

  has(type) {
    return this.#providers.has(type)
  }

  get(type) {
    return this.#providers.get(type)
  }

  list() {
    return [...this.#providers.keys()]
  }
}

/**
 * `options` with `providerRegistry` resolved: when it holds `provider.type`, `model` becomes a
 * scripted function over the model its `create` makes; otherwise the options go on as they are
 * (a built-in type, or an unknown one the binding names).
 */
function resolveProvider(options) {
  if (options === null || typeof options !== 'object' || options.providerRegistry === undefined) return options
  const { providerRegistry, ...rest } = options
  if (typeof providerRegistry?.has !== 'function' || typeof providerRegistry.get !== 'function') throw new ConfigError('providerRegistry must be a ProviderRegistry', { field: 'providerRegistry' })
  const type = rest.provider?.type
  if (!providerRegistry.has(type)) return rest
  const model = providerRegistry.get(type).create({ ...rest.provider, model: rest.model })
  if (model === null || typeof model !== 'object' || (typeof model.streamChat !== 'function' && typeof model.chat !== 'function')) {
    throw new ConfigError(`providerRegistry's "${type}" create() must return a model with streamChat() or chat()`, { field: 'providerRegistry' })
  }
  return { ...rest, model: scriptedModel((request) => answer(model, request)) }
}

/** One model turn of a registry model, as a scripted turn: its text, tool calls and usage. */
async function answer(model, { messages, tools }) {
  const offered = tools.map((tool) => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.parameters } }))
  if (typeof model.streamChat !== 'function') return turnOf(await model.chat(messages, offered))
  let text = ''
  const calls = []
  let usage
  for await (const chunk of model.streamChat(messages, offered)) {
    if (typeof chunk?.content === 'string') text += chunk.content
    for (const delta of chunk?.toolCalls ?? []) {
      const index = delta.index ?? calls.length
      const call = (calls[index] ??= { id: undefined, name: '', arguments: '' })
      call.id ??= delta.id
      call.name += delta.function?.name ?? ''
      call.arguments += delta.function?.arguments ?? ''
    }
    if (chunk?.usage) usage = chunk.usage
  }
  return turnOf({ content: text, toolCalls: calls.map((call) => ({ id: call.id, function: { name: call.name, arguments: call.arguments } })), usage })
}

function turnOf(response) {
  const usage = response?.usage
  return {
    text: response?.content ?? '',
    toolCalls: (response?.toolCalls ?? []).map((call) => ({ id: call.id, name: call.function?.name ?? call.name, arguments: call.function?.arguments ?? call.arguments ?? '' })),
    usage: usage ? { inputTokens: usage.promptTokens ?? usage.inputTokens, outputTokens: usage.completionTokens ?? usage.outputTokens } : undefined,
  }
}

/** A model played by `script`: its turns in order, or a function answering each request. */
function scriptedModel(script) {
  return Object.freeze(typeof script === 'function' ? { kind: 'scripted', script } : { kind: 'scripted', turns: script })
}

module.exports = { ProviderRegistry, resolveProvider, scriptedModel }
