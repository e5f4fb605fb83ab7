/**
 * The BullMQ peer, for a round: Redis 7 (Debian's `redis-server`) on a fresh
 * temp dir and a free 127.0.0.1 port, either in memory only (`--save ""
 * --appendonly no`) or append-only with `appendfsync everysec` (BullMQ's
 * advice for durable queues); one worker process (bullmq-worker.ts,
 * concurrency 256); the producer in its own process (`Queue.addBulk`, 1 000
 * jobs per call). Redis's CPU (its process tree: an AOF rewrite forks) is the
 * `database` role.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { freePort } from '../../../test-kit/free-port.ts';
import { isAlive, stopChild, stopPidSync } from '../../../test-kit/process-stop.ts';
import { startProducer, waitFor } from '../harness.ts';
import type { BullmqWorkerConfig } from './bullmq-worker.ts';
import { ENQUEUE_BATCH, forkWorker, packageVersion, processTicks, treeTicks } from './peer-kit.ts';
import type { PeerSystem } from './peer-round.ts';

const WORKER_FILE = fileURLToPath(new URL('./bullmq-worker.ts', import.meta.url));
const QUEUE = 'deliveries';
const CONCURRENCY = 256;

/** The one line printed when the server is missing, or undefined when it is there. */
export function redisMissing(): string | undefined {
  const probe = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (probe.error !== undefined || probe.status !== 0) return 'redis-server not found: apt-get install -y redis-server';
  return undefined;
}

export function redisVersion(): string {
  return spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout.match(/v=(\S+)/)?.[1] ?? 'unknown';
}

const PERSISTENCE = {
  memory: ['--save', '', '--appendonly', 'no'],
  aof: ['--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec'],
} as const;

export function bullmqSystem(name: string, persistence: keyof typeof PERSISTENCE): PeerSystem {
  return {
    name,
    details: {
      versions: { bullmq: packageVersion('bullmq'), redis: redisVersion() },
      settings: { concurrency: CONCURRENCY, persistence: PERSISTENCE[persistence].join(' '), removeOnComplete: true, producer: 'Queue.addBulk, 1 000 jobs per call, its own process' },
    },
    async start({ sink, bodies, cleanup }) {
      const dir = mkdtempSync(join(tmpdir(), 'herald-bench-redis-'));
      cleanup.addDir(dir);
      const port = await freePort();
      const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, ...PERSISTENCE[persistence], '--daemonize', 'no', '--logfile', ''], { stdio: 'ignore' });
      const redisPid = redis.pid!;
      cleanup.add(
        'redis-server',
        () => stopPidSync(redisPid, 'SIGTERM', 5_000),
        () => stopChild(redis, () => redis.kill('SIGTERM'), 5_000),
      );
      // Up when a client gets through: the producer and the worker connect next.
      const probe = new Queue(QUEUE, { connection: { host: '127.0.0.1', port, maxRetriesPerRequest: null } });
      probe.on('error', () => {});
      const up = await waitFor(async () => probe.waitUntilReady().then(() => true, () => false), 10_000, 100);
      await probe.close();
      if (!up || !isAlive(redisPid)) throw new Error('redis-server did not accept connections within 10 s');

      const config: BullmqWorkerConfig = { redisPort: port, sinkUrl: sink.url, queue: QUEUE, concurrency: CONCURRENCY };
      const worker = await forkWorker(WORKER_FILE, config, cleanup);
      const workerPid = worker.pid!;
      const producer = await startProducer({ target: { system: 'bullmq', redisPort: port, queue: QUEUE }, events: bodies, batch: ENQUEUE_BATCH });
      cleanup.add(`producer ${producer.pid}`, () => stopPidSync(producer.pid, 'SIGKILL', 2_000), () => producer.close());
      return {
        readers: { worker: () => processTicks(workerPid), producer: () => processTicks(producer.pid), database: () => treeTicks(redisPid) },
        produce: (from, to) => producer.publish(from, to),
        stop: () => producer.close(),
      };
    },
  };
}
