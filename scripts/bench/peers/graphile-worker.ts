/**
 * The graphile-worker peer's worker, in its own process (forked by
 * graphile-system.ts): `run()` with concurrency 16 and the batching of
 * graphile-worker's performance page (https://worker.graphile.org/docs/performance):
 * a local queue of 500 jobs, job completions and failures batched
 * (`completeJobBatchDelay: 0`, `failJobBatchDelay: 0`), a pool of
 * concurrency + 1 connections, Node's clock (`useNodeTime`).
 */
import { Logger, run, type Task } from 'graphile-worker';
import { createSender, workerProcess, type DeliveryJob } from './peer-kit.ts';

export interface GraphileWorkerConfig {
  readonly connectionString: string;
  readonly sinkUrl: string;
  readonly concurrency: number;
  readonly localQueueSize: number;
}

/** graphile-worker logs every job at debug and info; the bench wants warnings only. */
const quietLogger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`graphile-worker ${level}: ${message}\n`);
});

workerProcess<GraphileWorkerConfig>(async (config) => {
  const sender = createSender(config.sinkUrl);
  const deliver: Task = async (payload) => sender.deliver(payload as DeliveryJob);
  const runner = await run({
    connectionString: config.connectionString,
    concurrency: config.concurrency,
    maxPoolSize: config.concurrency + 1,
    noHandleSignals: true,
    useNodeTime: true,
    logger: quietLogger,
    taskList: { deliver },
    preset: {
      worker: {
        localQueue: { size: config.localQueueSize },
        completeJobBatchDelay: 0,
        failJobBatchDelay: 0,
      },
    },
  });
  return async () => {
    await runner.stop();
    await sender.close();
  };
});
