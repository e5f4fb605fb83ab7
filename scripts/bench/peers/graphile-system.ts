/**
 * The graphile-worker peer, for a round: a fresh database on the bench's
 * PostgreSQL server (the one Herald on PostgreSQL uses), migrated before the
 * window; one worker process (graphile-worker.ts: concurrency 16, a local
 * queue of 500, completions batched, as graphile-worker's performance page
 * runs it); the producer in its own process (`WorkerUtils.addJobs`, 1 000
 * jobs per call). Synchronous commit on (PostgreSQL's default), or off for
 * the whole database (`asynchronousCommit`).
 */
import { fileURLToPath } from 'node:url';
import { Logger, makeWorkerUtils } from 'graphile-worker';
import type { PostgresServer } from '../../../test-kit/postgres-server.ts';
import { stopChild, stopPidSync } from '../../../test-kit/process-stop.ts';
import { startProducer } from '../harness.ts';
import type { GraphileWorkerConfig } from './graphile-worker.ts';
import { ENQUEUE_BATCH, forkWorker, packageVersion, processTicks, treeTicks } from './peer-kit.ts';
import type { PeerSystem } from './peer-round.ts';
import { openCountedDatabase } from './pg-cost.ts';

const CONCURRENCY = 16;
/** graphile-worker's performance page runs with `localQueue: { size: 500 }`. */
const LOCAL_QUEUE_SIZE = 500;
const WORKER_FILE = fileURLToPath(new URL('./graphile-worker.ts', import.meta.url));

export function graphileSystem(name: string, server: PostgresServer, options: { readonly asynchronousCommit?: boolean } = {}): PeerSystem {
  const asynchronousCommit = options.asynchronousCommit ?? false;
  return {
    name,
    details: {
      versions: { 'graphile-worker': packageVersion('graphile-worker') },
      settings: {
        concurrency: CONCURRENCY,
        maxPoolSize: CONCURRENCY + 1,
        localQueueSize: LOCAL_QUEUE_SIZE,
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
        useNodeTime: true,
        synchronousCommit: asynchronousCommit ? 'off (ALTER DATABASE … SET synchronous_commit = off)' : 'on (default)',
        producer: 'WorkerUtils.addJobs, 1 000 jobs per call, its own process',
      },
    },
    async start({ sink, bodies, cleanup, roundId }) {
      const database = await openCountedDatabase(server, `graphile_${roundId}`, cleanup, { asynchronousCommit });
      const utils = await makeWorkerUtils({ connectionString: database.url, logger: new Logger(() => () => {}) });
      try {
        await utils.migrate();
      } finally {
        await utils.release();
      }
      const config: GraphileWorkerConfig = { connectionString: database.url, sinkUrl: sink.url, concurrency: CONCURRENCY, localQueueSize: LOCAL_QUEUE_SIZE };
      const worker = await forkWorker(WORKER_FILE, config, cleanup);
      const workerPid = worker.pid!;
      const producer = await startProducer({ target: { system: 'graphile-worker', connectionString: database.url }, events: bodies, batch: ENQUEUE_BATCH });
      cleanup.add(`producer ${producer.pid}`, () => stopPidSync(producer.pid, 'SIGKILL', 2_000), () => producer.close());
      const postmasterPid = server.postmasterPid;
      return {
        readers: { worker: () => processTicks(workerPid), producer: () => processTicks(producer.pid), database: () => treeTicks(postmasterPid) },
        produce: (from, to) => producer.publish(from, to),
        statsClient: database.statsClient,
        async stop() {
          await producer.close();
          await stopWorker(worker);
        },
      };
    },
  };
}

/** Asks the worker to close and waits for it (the cleanup's step then finds it gone). */
function stopWorker(worker: import('node:child_process').ChildProcess): Promise<void> {
  return stopChild(worker, () => worker.send({ type: 'close' }), 10_000);
}
