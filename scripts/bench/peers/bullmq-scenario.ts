/**
 * The BullMQ peer: Redis 7 (Debian's `redis-server`) on a temp dir and a free
 * 127.0.0.1 port, in memory only (`--save "" --appendonly no`); one worker
 * process (bullmq-worker.ts, concurrency 256); the producer in the scenario
 * process, `Queue.addBulk` in batches of 1 000. Every process and the temp
 * dir are gone when `runBullmq` returns or throws, or on SIGINT/SIGTERM.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { freePort } from '../../../test-kit/free-port.ts';
import { isAlive, stopPidSync } from '../../../test-kit/process-stop.ts';
import { progress, waitFor, type SinkProcess } from '../harness.ts';
import type { BullmqWorkerConfig } from './bullmq-worker.ts';
import { Cleanup, ENQUEUE_BATCH, forkWorker, measure, packageVersion, processTicks, selfTicks, type DeliveryJob, type PeerMeasurement } from './peer-kit.ts';

const WORKER_FILE = fileURLToPath(new URL('./bullmq-worker.ts', import.meta.url));
const QUEUE = 'deliveries';
const CONCURRENCY = 256;

/** Measured, skipped (its server cannot be had: one line saying how to get it), or failed. */
export type PeerOutcome =
  | ({ readonly skipped?: undefined; readonly error?: undefined } & PeerMeasurement & Record<string, unknown>)
  | { readonly skipped: string; readonly error?: undefined }
  | { readonly error: string; readonly skipped?: undefined };

/** The one line printed when the server is missing, or undefined when it is there. */
export function redisMissing(): string | undefined {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) return 'redis-server not found: apt-get install -y redis-server';
  return undefined;
}

export async function runBullmq(sink: SinkProcess, jobs: readonly DeliveryJob[], timeoutMs: number): Promise<PeerOutcome> {
  const missing = redisMissing();
  if (missing !== undefined) return { skipped: missing };
  const version = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout.match(/v=(\S+)/)?.[1] ?? 'unknown';
  const cleanup = new Cleanup();
  try {
    const dir = mkdtempSync(join(tmpdir(), 'herald-bench-redis-'));
    cleanup.addDir(dir);
    const port = await freePort();
    const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--logfile', ''], {
      stdio: 'ignore',
    });
    const redisPid = redis.pid!;
    cleanup.add(
      'redis-server',
      () => stopPidSync(redisPid, 'SIGTERM', 5_000),
      () =>
        new Promise<void>((resolve) => {
          if (redis.exitCode !== null || redis.signalCode !== null) return resolve();
          const timer = setTimeout(() => redis.kill('SIGKILL'), 5_000);
          redis.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          redis.kill('SIGTERM');
        }),
    );
    progress(`bullmq: redis-server ${version} on 127.0.0.1:${port}`);

    const queue = new Queue<DeliveryJob>(QUEUE, { connection: { host: '127.0.0.1', port, maxRetriesPerRequest: null } });
    cleanup.add('bullmq queue', () => undefined, () => queue.close());
    queue.on('error', () => {});
    if (!(await waitFor(async () => queue.waitUntilReady().then(() => true, () => false), 10_000, 100)) || !isAlive(redisPid)) {
      throw new Error('redis-server did not accept connections within 10 s');
    }

    const config: BullmqWorkerConfig = { redisPort: port, sinkUrl: sink.url, queue: QUEUE, concurrency: CONCURRENCY };
    const worker = await forkWorker(WORKER_FILE, config, cleanup);
    const workerPid = worker.pid!;

    progress(`bullmq: ${jobs.length} jobs, worker concurrency ${CONCURRENCY}`);
    const measured = await measure(
      'bullmq',
      sink,
      jobs.length,
      async () => {
        for (let i = 0; i < jobs.length; i += ENQUEUE_BATCH) {
          await queue.addBulk(jobs.slice(i, i + ENQUEUE_BATCH).map((data) => ({ name: 'deliver', data })));
        }
      },
      { worker: () => processTicks(workerPid), server: () => processTicks(redisPid), producer: selfTicks },
      timeoutMs,
    );
    return { ...measured, versions: { bullmq: packageVersion('bullmq'), redis: version }, settings: { concurrency: CONCURRENCY, persistence: 'none (--save "" --appendonly no)', removeOnComplete: true } };
  } finally {
    await cleanup.run();
    cleanup.dispose();
  }
}
