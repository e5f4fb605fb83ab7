/**
 * `npx tsx scripts/tools/restart-to-ready.ts [cycles] [root]`: starts `herald start`
 * on a fresh SQLite file with the default lease (10 s), then `cycles` times
 * (default 5) kills it with SIGKILL and starts it again on the same data, and
 * prints how long each restart took from the kill until `/readyz` answered
 * 200, and until the start banner (process start-up alone). `root` is the
 * checkout whose `lib/cli/main.ts` runs (default: this one), to compare two.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

const CYCLES = Number(process.argv[2] ?? 5);
const ROOT = resolve(process.argv[3] ?? fileURLToPath(new URL('../..', import.meta.url)));
/** Polling period of /readyz, and the most polls before giving up (a minute). */
const POLL_MS = 10;
const MAX_POLLS = 6_000;

const dir = mkdtempSync(join(tmpdir(), 'herald-restart-'));

function startHerald(): { child: ChildProcess; url: Promise<string> } {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('HERALD_')) env[key] = value;
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'lib/cli/main.ts', 'start', '--port', '0', '--data-dir', dir, '--store', `sqlite:${join(dir, 'herald.db')}`, '--log-level', 'silent'],
    { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  const url = new Promise<string>((resolveUrl, reject) => {
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const match = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (match?.[1] !== undefined) resolveUrl(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`herald exited (${code}) before its banner: ${out}`)));
  });
  return { child, url };
}

async function readyz(url: string): Promise<number> {
  const response = await request(`${url}/readyz`);
  await response.body.dump();
  return response.statusCode;
}

/** Milliseconds from `since` until /readyz answers 200. */
async function untilReady(url: string, since: number): Promise<number> {
  for (let poll = 0; poll < MAX_POLLS; poll++) {
    if ((await readyz(url)) === 200) return performance.now() - since;
    await sleep(POLL_MS);
  }
  throw new Error(`${url} not ready after ${(POLL_MS * MAX_POLLS) / 1000} s`);
}

try {
  let node = startHerald();
  await untilReady(await node.url, performance.now());
  const rows: Array<{ banner: number; ready: number }> = [];
  for (let cycle = 0; cycle < CYCLES; cycle++) {
    const exited = once(node.child, 'exit');
    node.child.kill('SIGKILL');
    await exited;
    const killedAt = performance.now();
    node = startHerald();
    const url = await node.url;
    const banner = performance.now() - killedAt;
    const ready = await untilReady(url, killedAt);
    rows.push({ banner, ready });
    console.log(`restart ${cycle + 1}: banner after ${banner.toFixed(0)} ms, /readyz 200 after ${ready.toFixed(0)} ms`);
  }
  const sorted = rows.map((r) => r.ready).sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)] ?? NaN;
  console.log(`${ROOT}: ${CYCLES} restarts, kill → ready median ${median.toFixed(0)} ms, max ${(sorted.at(-1) ?? NaN).toFixed(0)} ms`);
  node.child.kill('SIGTERM');
  await once(node.child, 'exit');
} finally {
  rmSync(dir, { recursive: true, force: true });
}
