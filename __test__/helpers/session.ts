// Reading a session's stream in tests: every event of one request, the events of one type,
// the text they carried, and a message's text whatever form its content has.
import type { ISession, SessionStreamEvent } from '../../index.js'

/** Drains `session.stream()`, awaiting `onEvent` for each event before pulling the next. */
export async function drain(session: ISession, onEvent?: (event: SessionStreamEvent) => unknown): Promise<SessionStreamEvent[]> {
  const events: SessionStreamEvent[] = []
  for await (const event of session.stream()) {
    events.push(event)
    await onEvent?.(event)
  }
  return events
}

export const ofType = <T extends SessionStreamEvent['type']>(events: SessionStreamEvent[], type: T) =>
  events.filter((event): event is Extract<SessionStreamEvent, { type: T }> => event.type === type)

export const textOf = (events: SessionStreamEvent[]) =>
  ofType(events, 'content')
    .map((event) => event.delta)
    .join('')

/** A message's text, whether its content is a string or a list of text parts. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) return content.map((part) => (typeof part === 'string' ? part : (part?.text ?? ''))).join('')
  return content == null ? '' : JSON.stringify(content)
}
