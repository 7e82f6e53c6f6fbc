import { executeWithHooks } from './common.mjs'
import { runOurs } from './ours.mjs'

/**
 * Not a peer, and not in `NAMES`: ours with no hooks registered, the two hook functions called
 * inside the tool instead (as `ai` 5's runner does). One crossing into JS per tool call instead
 * of three, so set beside `ours` it shows what the loop costs apart from hook dispatch:
 * `SYSTEMS=ours,ours-hooks-in-tool,ai7,js-floor node bench/loop_scripted.mjs`.
 */
export default function oursHooksInTool(turns) {
  return runOurs(turns, { execute: executeWithHooks })
}
