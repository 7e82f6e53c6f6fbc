'use strict'
// A tool's `parameters` given as a schema library's schema — zod 4.2+, ArkType, Valibot with its
// converter: any Standard Schema (standardschema.dev) that implements Standard JSON Schema —
// becomes the JSON Schema the model is sent, written by the library's own converter, and the
// model's arguments are checked by the library's own `validate` before `execute` sees them.
// Plain JSON Schema (TypeBox's included) crosses as it is. Anything else is refused here, naming
// the tool: zod's internals must never reach the model as if they were a schema.
const { ConfigError, messageOf } = require('./errors.js')

// The draft every provider takes (OpenAI, Anthropic, Gemini's compatible endpoint, llama.cpp).
const TARGET = 'draft-07'

/** `options` with each tool's schema converted (a copy where anything changed). */
function withToolSchemas(options) {
  const tools = options?.tools
  if (!Array.isArray(tools)) return options
  let changed = false
  const converted = tools.map((tool, index) => {
    const schema = tool?.parameters
    if (!isSchemaObject(schema)) return tool
    const parameters = jsonSchemaOf(schema, `tools[${index}].parameters`, tool.name)
    changed = true
    const { execute } = tool
    return { ...tool, parameters, execute: typeof execute === 'function' ? validating(schema, execute, tool.name) : execute }
  })
  return changed ? { ...options, tools: converted } : options
}

/** An object that is not plain data: a Standard Schema, or an instance of some class. */
function isSchemaObject(value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  if (value['~standard'] !== undefined) return true
  // A plain object's prototype is its realm's Object.prototype (Jest's realm has its own), whose
  // prototype is null; a class instance's chain is longer.
  const prototype = Object.getPrototypeOf(value)
  return prototype !== null && Object.getPrototypeOf(prototype) !== null
}

function jsonSchemaOf(schema, field, name) {
  const standard = schema['~standard']
  const tool = typeof name === 'string' ? `the tool "${name}"` : 'a tool'
  if (standard === undefined) {
    const kind = schema.constructor?.name ? `an instance of ${schema.constructor.name}` : 'not plain data'
    throw new ConfigError(`${field} of ${tool} must be a JSON Schema object or a Standard Schema (zod, Valibot, ArkType) (got ${kind})`, { field })
  }
  const vendor = typeof standard?.vendor === 'string' ? standard.vendor : 'unknown'
  if (typeof standard?.jsonSchema?.input !== 'function') {
    const fix = vendor === 'zod' ? 'use zod 4.2 or newer, or pass z.toJSONSchema(schema)' : 'pass its JSON Schema (the library\'s converter) instead'
    throw new ConfigError(`${field} of ${tool} is a ${vendor} schema that cannot describe itself as JSON Schema (no ~standard.jsonSchema): ${fix}`, { field })
  }
  let json
  try {
    json = standard.jsonSchema.input({ target: TARGET })
  } catch (error) {
    throw new ConfigError(`${field} of ${tool}: ${vendor} could not write it as JSON Schema: ${messageOf(error)}`, { field })
  }
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new ConfigError(`${field} of ${tool}: ${vendor} wrote no JSON Schema object`, { field })
  }
  // `$schema` names the draft; some providers refuse the key, none needs it.
  const { $schema, ...rest } = json
  return rest
}

/**
 * `execute`, given what the schema's `validate` made of the model's arguments (its defaults and
 * transforms applied); arguments it refuses fail the call with its issues, and `execute` does
 * not run.
 */
function validating(schema, execute, name) {
  const check = (input) => {
    const result = schema['~standard'].validate(input)
    return typeof result?.then === 'function' ? result.then((settled) => valueOf(settled, name)) : valueOf(result, name)
  }
  return function (input, context) {
    const value = check(input)
    if (typeof value?.then !== 'function') return execute.call(this, value, context)
    if (isGeneratorFunction(execute)) throw new Error(`the schema of the tool "${name}" validates asynchronously, which a generator tool cannot wait for`)
    return value.then((checked) => execute.call(this, checked, context))
  }
}

function valueOf(result, name) {
  if (result?.issues === undefined) return result?.value
  const issues = result.issues.map((issue) => {
    const path = (issue.path ?? []).map((segment) => String(typeof segment === 'object' && segment !== null ? segment.key : segment)).join('.')
    return path === '' ? issue.message : `${path}: ${issue.message}`
  })
  throw new Error(`Invalid input for ${name}: ${issues.join('; ')}`)
}

function isGeneratorFunction(fn) {
  const tag = Object.prototype.toString.call(fn)
  return tag === '[object GeneratorFunction]' || tag === '[object AsyncGeneratorFunction]'
}

module.exports = { withToolSchemas }
