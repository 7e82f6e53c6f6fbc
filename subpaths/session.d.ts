export { createSession, resumeSession, forkSession, prompt, InputPriority } from '../index.js'
export type {
  ISession,
  Session,
  SessionOptions,
  SessionSendOptions,
  SessionSendOptions as SendOptions,
  InputSubmission,
  PendingSessionInput,
  PromptResult,
  SessionStreamEvent,
  StreamMessage,
  TokenUsage,
  ToolExecutionRecord,
} from '../index.js'
