#!/usr/bin/env node
/**
 * `npm run build` (and `prepare`, which `npm ci`, `npm pack` and installs from git run):
 * compiles lib/ to dist/ with tsconfig.build.json, from scratch, so a module deleted from
 * lib/ leaves nothing behind in dist/. One tsc program emits both formats: every `.ts`
 * module as an ES module (`.js` + `.d.ts`), and the CommonJS entry lib/index.cts as
 * `index.cjs` + `index.d.cts`.
 *
 * `--if-stale` (`prestart`) builds only when dist/ is missing or older than lib/ or the
 * compiler settings: `npm start` then runs the sources as they are now. Plain JavaScript,
 * so that it runs before anything is compiled and without tsx.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIST = join(ROOT, 'dist');
/** tsc writes it after reading every source: a source changed since is newer than it. */
const BUILT = join(DIST, 'index.js');
const INPUTS = [join(ROOT, 'lib'), join(ROOT, 'tsconfig.json'), join(ROOT, 'tsconfig.build.json')];

/** The newest modification time under `path`; a folder's own time counts (a file deleted or added). */
function newestMtimeMs(path) {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return readdirSync(path).reduce((newest, name) => Math.max(newest, newestMtimeMs(join(path, name))), stat.mtimeMs);
}

function isStale() {
  let builtMs;
  try {
    builtMs = statSync(BUILT).mtimeMs;
  } catch {
    return true;
  }
  return INPUTS.some((input) => newestMtimeMs(input) > builtMs);
}

if (process.argv.includes('--if-stale') && !isStale()) process.exit(0);

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
} catch {
  console.error('herald build: TypeScript is not installed; `npm ci` installs it (a development dependency)');
  process.exit(1);
}
rmSync(DIST, { recursive: true, force: true });
const result = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json')], { stdio: 'inherit' });
if (result.status !== 0) {
  // Nothing half-built is left to look fresh to the next `--if-stale`.
  rmSync(DIST, { recursive: true, force: true });
  console.error('herald build: tsc failed (see above); dist/ removed');
  process.exit(1);
}
