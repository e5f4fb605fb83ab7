/**
 * Herald as users run it: the compiled CLI (`node dist/cli/main.js start`) as
 * a service process of its own, on a SQLite file or a PostgreSQL database,
 * its admin API on a free 127.0.0.1 port. The benches that measure Herald
 * from outside (throughput, peers, latency, fairness) start it here: create
 * endpoints through the admin API, read its CPU from /proc by its pid, stop
 * it with SIGTERM (an orderly shutdown).
 *
 * `ensureBuilt()` builds dist/ when it is missing or older than lib/
 * (`scripts/build/build.mjs --if-stale`), once per bench process.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import type { ConfigOverrides } from '../../lib/config/config.ts';
import { freePort } from '../../test-kit/free-port.ts';
import { stopChild, stopPidSync } from '../../test-kit/process-stop.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = join(ROOT, 'dist', 'cli', 'main.js');
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
/** A start (migrations included) that takes longer than this is not coming. */
const START_LIMIT_MS = 60_000;
const READY_POLL_MS = 25;
/** SIGTERM shuts down in order; past this the process is killed. */
const STOP_LIMIT_MS = 20_000;
const ENDPOINT_BATCH = 32;

let built = false;

/** Builds dist/ if stale (about 5 s), once per process. */
export function ensureBuilt(): void {
  if (built) return;
  const result = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build', 'build.mjs'), '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
  if (result.status !== 0) throw new Error(`npm run build failed (exit ${result.status})`);
  built = true;
}

export interface HeraldServiceOptions {
  /** `sqlite` (a file in the service's temp folder) or a `postgres://` connection string. */
  readonly store: 'sqlite' | string;
  /** Settings beyond the defaults, written to a `--config` file (as an operator would). */
  readonly config?: ConfigOverrides;
  /** Extra `node` flags, such as `--cpu-prof`. */
  readonly nodeFlags?: readonly string[];
}

export interface HeraldService {
  readonly pid: number;
  /** The status port: admin API, metrics, dashboard. */
  readonly url: string;
  /** The store setting it runs on (`sqlite:<file>` or the connection string). */
  readonly store: string;
  /** The SQLite file, when the store is SQLite (where a producer process publishes). */
  readonly sqlitePath: string | undefined;
  /** Creates one endpoint per URL for `tenantId` through the admin API; resolves with their ids, in order. */
  createEndpoints(tenantId: string, urls: readonly string[], settings?: Readonly<Record<string, unknown>>): Promise<string[]>;
  /** An admin API call; resolves with the parsed JSON answer (throws on a non-2xx). */
  api<T = unknown>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T>;
  /** SIGTERM, waits for the exit, removes its folder. */
  close(): Promise<void>;
  /** SIGKILL and removal of its folder without the event loop: for a bench's SIGINT/SIGTERM handler. */
  closeSync(): void;
}

export async function startHeraldService(options: HeraldServiceOptions): Promise<HeraldService> {
  ensureBuilt();
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-service-'));
  const sqlitePath = options.store === 'sqlite' ? join(dir, 'herald.db') : undefined;
  const store = sqlitePath === undefined ? options.store : `sqlite:${sqlitePath}`;
  const configFile = join(dir, 'config.json');
  writeFileSync(configFile, JSON.stringify(options.config ?? {}));
  const port = await freePort();
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && !key.startsWith('HERALD_') && key !== 'NODE_OPTIONS') env[key] = value;
  env.HERALD_ADMIN_TOKEN = ADMIN_TOKEN;
  const child: ChildProcess = spawn(
    process.execPath,
    [...(options.nodeFlags ?? []), CLI, 'start', '--config', configFile, '--store', store, '--port', String(port), '--host', '127.0.0.1',
      '--data-dir', dir, '--allow-networks', '127.0.0.0/8,::1/128', '--log-level', 'warn'],
    { cwd: dir, env, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  const url = `http://127.0.0.1:${port}`;
  const exited = once(child, 'exit');
  try {
    await untilReady(url, child);
  } catch (error) {
    child.kill('SIGKILL');
    await exited;
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }

  const api = async <T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown): Promise<T> => {
    const response = await request(`${url}${path}`, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.body.text();
    if (response.statusCode < 200 || response.statusCode >= 300) throw new Error(`${method} ${path}: ${response.statusCode} ${text}`);
    return (text === '' ? undefined : JSON.parse(text)) as T;
  };

  return {
    pid: child.pid!,
    url,
    store,
    sqlitePath,
    api,
    async createEndpoints(tenantId, urls, settings = {}) {
      const ids: string[] = [];
      for (let i = 0; i < urls.length; i += ENDPOINT_BATCH) {
        const created = await Promise.all(
          urls.slice(i, i + ENDPOINT_BATCH).map((endpointUrl) => api<{ id: string }>('POST', '/v1/endpoints', { tenantId, url: endpointUrl, ...settings })),
        );
        ids.push(...created.map((c) => c.id));
      }
      return ids;
    },
    async close() {
      await stopChild(child, () => child.kill('SIGTERM'), STOP_LIMIT_MS);
      rmSync(dir, { recursive: true, force: true });
    },
    closeSync() {
      if (child.pid !== undefined) stopPidSync(child.pid, 'SIGKILL', 2_000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function untilReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + START_LIMIT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`herald start exited (${child.exitCode ?? child.signalCode}) before it was ready`);
    try {
      const response = await request(`${url}/readyz`);
      await response.body.dump();
      if (response.statusCode === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
  }
  throw new Error(`herald start not ready at ${url} within ${START_LIMIT_MS / 1000} s`);
}
