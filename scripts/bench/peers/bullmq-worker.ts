/**
 * The BullMQ peer's worker, in its own process (forked by bullmq-system.ts):
 * one `Worker` on the `deliveries` queue, concurrency 256, each job signed and
 * POSTed to the sink by the shared sender. Completed jobs are removed, as
 * BullMQ's production guide advises for high-volume queues.
 */
import { Worker } from 'bullmq';
import { createSender, workerProcess, type DeliveryJob } from './peer-kit.ts';

export interface BullmqWorkerConfig {
  readonly redisPort: number;
  readonly sinkUrl: string;
  readonly queue: string;
  readonly concurrency: number;
}

workerProcess<BullmqWorkerConfig>(async (config) => {
  const sender = createSender(config.sinkUrl);
  const worker = new Worker<DeliveryJob>(config.queue, async (job) => sender.deliver(job.data), {
    // A worker's blocking connection must not give up retrying (BullMQ's docs).
    connection: { host: '127.0.0.1', port: config.redisPort, maxRetriesPerRequest: null },
    concurrency: config.concurrency,
    removeOnComplete: { count: 0 },
    removeOnFail: { count: 1_000 },
  });
  worker.on('error', (error) => process.stderr.write(`bullmq worker: ${String(error)}\n`));
  await worker.waitUntilReady();
  return async () => {
    await worker.close();
    await sender.close();
  };
});
