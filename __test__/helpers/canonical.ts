// RFC 8785 (JCS) for the plain JSON values the tests use — object keys sorted by UTF-16 code units
// (what Array.prototype.sort does on strings), no whitespace, ECMAScript number and string
// serialization (what JSON.stringify does) — and the digests SPEC §8.1 builds on it, computed
// here independently of the implementation.
import { createHash, createHmac } from 'node:crypto'
import type { JsonObject, JsonValue } from '../../index.js'

export function canonical(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value)
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  const keys = Object.keys(value).sort()
  return `{${keys.map((key) => `${JSON.stringify(key)}:${canonical((value as JsonObject)[key] as JsonValue)}`).join(',')}}`
}

/** A pending approval's `fingerprint`: SHA-256, lowercase hex, of the canonical `{ input, toolName }`. */
export const fingerprintOf = (toolName: string, input: JsonObject) => createHash('sha256').update(canonical({ input, toolName }), 'utf8').digest('hex')

/** A pending approval's `token` under `approvalSecret`. */
export const tokenOf = (secret: string, sessionId: string, toolCallId: string, fingerprint: string) =>
  createHmac('sha256', secret).update(canonical([sessionId, toolCallId, fingerprint]), 'utf8').digest('hex')

/** A sub-agent's pending call's `token` (§8.7): over `[sessionId, agentPath, toolCallId, fingerprint]`. */
export const treeTokenOf = (secret: string, sessionId: string, agentPath: string[], toolCallId: string, fingerprint: string) =>
  createHmac('sha256', secret).update(canonical([sessionId, agentPath, toolCallId, fingerprint]), 'utf8').digest('hex')
