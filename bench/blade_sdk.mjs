// Blade's SDK for the builtins benchmark. `@blade-ai/agent-sdk` is not on the npm registry this
// project's machines reach, so it is built from source: 4.2.0 (commit 3d6fad5c), the newest
// release whose tree builds. `node bench/blade_sdk.mjs <checkout>` takes a git checkout (or bare
// clone) of github.com/echoVic/blade-agent-sdk, exports that commit into the cache folder,
// installs its runtime dependencies from npm (`npm install --omit=dev`, by its package.json
// ranges; `@vscode/ripgrep`, an optional one that downloads its binary, is left out) and bundles `src/index.ts` with esbuild. The benchmark loads `BLADE_SDK_DIR/dist/index.js`.
import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const BLADE_VERSION = '4.2.0'
const COMMIT = '3d6fad5c'
export const BLADE_SDK_DIR = process.env.BLADE_SDK_DIR ?? join(homedir(), '.cache', 'agent-runtime-hooks', `blade-agent-sdk-${BLADE_VERSION}`)
export const BLADE_ENTRY = join(BLADE_SDK_DIR, 'dist', 'index.js')

export const HOW_TO_BUILD = `@blade-ai/agent-sdk is not on the npm registry; build ${BLADE_VERSION} from a clone of github.com/echoVic/blade-agent-sdk with \`node bench/blade_sdk.mjs <clone>\` (or point BLADE_SDK_DIR at a built copy)`

export function buildBlade(checkout) {
  const gitDir = existsSync(join(checkout, '.git')) ? join(checkout, '.git') : checkout
  rmSync(BLADE_SDK_DIR, { recursive: true, force: true })
  mkdirSync(BLADE_SDK_DIR, { recursive: true })
  const archive = execFileSync('git', ['--git-dir', gitDir, 'archive', '--format=tar', COMMIT], { maxBuffer: 1 << 30 })
  execFileSync('tar', ['-x', '-C', BLADE_SDK_DIR], { input: archive })
  const manifest = JSON.parse(readFileSync(join(BLADE_SDK_DIR, 'package.json'), 'utf8'))
  if (manifest.version !== BLADE_VERSION) throw new Error(`commit ${COMMIT} is ${manifest.name}@${manifest.version}, expected ${BLADE_VERSION}`)
  // Runtime dependencies; of the optional ones the two that fetch or build a binary at install
  // (`@vscode/ripgrep`, `node-pty`) are left out, the provider SDKs (imported statically) kept.
  delete manifest.optionalDependencies['@vscode/ripgrep']
  delete manifest.optionalDependencies['node-pty']
  delete manifest.devDependencies
  writeFileSync(join(BLADE_SDK_DIR, 'package.json'), JSON.stringify(manifest, null, 2))
  execFileSync('npm', ['install', '--omit=dev', '--no-audit', '--no-fund', '--ignore-scripts', '--engine-strict=false'], { cwd: BLADE_SDK_DIR, stdio: 'inherit' })
  const esbuild = fileURLToPath(new URL('../node_modules/.bin/esbuild', import.meta.url))
  execFileSync(esbuild, ['src/index.ts', '--bundle', '--platform=node', '--format=esm', '--target=node20', '--packages=external', '--outfile=dist/index.js', '--log-level=warning'], { cwd: BLADE_SDK_DIR, stdio: 'inherit' })
  return BLADE_ENTRY
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (!process.argv[2]) {
    console.error('usage: node bench/blade_sdk.mjs <clone of echoVic/blade-agent-sdk>')
    process.exit(2)
  }
  console.log(`built ${buildBlade(process.argv[2])}`)
}
