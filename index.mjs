import api from './index.js'

export const {
  createAgent,
  prompt,
  defineTool,
  scriptedModel,
  HookEvent,
  SdkError,
  HookTimeoutError,
  ConfigError,
  AbortError,
  CriticalHookDeliveryError,
} = api
export default api
