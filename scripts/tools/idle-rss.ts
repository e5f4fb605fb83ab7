/**
 * `npx tsx scripts/tools/idle-rss.ts [runs] [idleMs]`: the resident memory of an idle node, run
 * the ways Herald can run. Each run starts `herald start` on a fresh SQLite file in a
 * temporary folder, waits for `/readyz` to answer 200, lets it idle `idleMs` (default
 * 5 000), then reads VmRSS from /proc for the started process and every process under it,
 * and stops it. `runs` (default 3) runs per way, one at a time; prints each figure and the
 * median. Needs dist/ (`npm run build`).
 *
 * The ways:
 * - compiled: `node dist/cli/main.js start` (what `npm start` and the `herald` bin run);
 * - tsx --import: `node --import tsx lib/cli/main.ts start` (the sources through tsx, one process);
 * - tsx CLI: `tsx lib/cli/main.ts start`, as `npm start` ran before dist/ existed: the
 *   tsx command starts a second Node process for the program, and both count.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

const RUNS = Number(process.argv[2] ?? 3);
const IDLE_MS = Number(process.argv[3] ?? 5_000);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Polling period of /readyz, and the most polls before giving up (a minute). */
const POLL_MS = 50;
const MAX_POLLS = 1_200;
const KiB = 1024;

const WAYS: readonly { readonly name: string; readonly nodeArgs: readonly string[] }[] = [
  { name: 'compiled (dist/)', nodeArgs: ['dist/cli/main.js'] },
  { name: 'tsx --import', nodeArgs: ['--import', 'tsx', 'lib/cli/main.ts'] },
  { name: 'tsx CLI (two processes)', nodeArgs: [createRequire(import.meta.url).resolve('tsx/cli'), 'lib/cli/main.ts'] },
];

/** A process and everything under it, by pid (Linux /proc). */
function processTree(pid: number): number[] {
  const children = readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
    readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(' ').filter(Boolean).map(Number),
  );
  return [pid, ...children.flatMap(processTree)];
}

function rssBytes(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
  return Number(/(\d+)/.exec(line ?? '')?.[1] ?? 0) * KiB;
}

async function untilReady(url: string): Promise<void> {
  for (let poll = 0; poll < MAX_POLLS; poll++) {
    const response = await request(`${url}/readyz`);
    await response.body.dump();
    if (response.statusCode === 200) return;
    await sleep(POLL_MS);
  }
  throw new Error(`${url} not ready after ${(POLL_MS * MAX_POLLS) / 1000} s`);
}

async function measure(nodeArgs: readonly string[]): Promise<{ rss: number; processes: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-rss-'));
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('HERALD_') && key !== 'NODE_OPTIONS') env[key] = value;
  const child: ChildProcess = spawn(
    process.execPath,
    [...nodeArgs, 'start', '--port', '0', '--data-dir', dir, '--store', `sqlite:${join(dir, 'herald.db')}`, '--log-level', 'silent'],
    { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  try {
    let out = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
        const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (match?.[1] !== undefined) resolve(match[1]);
      });
      child.once('exit', (code) => reject(new Error(`herald exited (${code}) before its banner: ${out}`)));
    });
    await untilReady(url);
    await sleep(IDLE_MS);
    const pids = processTree(child.pid ?? 0);
    return { rss: pids.reduce((sum, pid) => sum + rssBytes(pid), 0), processes: pids.length };
  } finally {
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  }
}

if (!existsSync(join(ROOT, 'dist', 'cli', 'main.js'))) throw new Error('dist/ is missing: run `npm run build` first');
const mb = (bytes: number): string => `${(bytes / (KiB * KiB)).toFixed(0)} MB`;
console.log(`Node ${process.version}; idle ${IDLE_MS} ms after /readyz; VmRSS of the started process and its children`);
for (const way of WAYS) {
  const figures: { rss: number; processes: number }[] = [];
  for (let run = 0; run < RUNS; run++) figures.push(await measure(way.nodeArgs));
  const sorted = figures.map((f) => f.rss).sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? 0;
  console.log(`${way.name.padEnd(24)} median ${mb(median).padStart(7)}   runs: ${figures.map((f) => `${mb(f.rss)} (${f.processes} process${f.processes === 1 ? '' : 'es'})`).join(', ')}`);
}
