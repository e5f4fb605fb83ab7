/**
 * The benchmark's producer: an application enqueueing from its own process,
 * 1 000 events per transaction (or per bulk call), so that every system's
 * producer CPU is read the same way, from `/proc/<pid>/stat`, and the
 * worker's figures are the worker's alone. Forked by `startProducer()`
 * (harness.ts), one process per system and round.
 *
 * What it publishes into, by `target.system`:
 * - `herald-sqlite`: Herald's `publish` from the compiled package (`dist/index.js`,
 *   as an application imports it) on its own better-sqlite3 connection, one
 *   `BEGIN IMMEDIATE … COMMIT` per batch;
 * - `herald-postgres`: `publishPg` on its own `pg` client between `BEGIN` and `COMMIT`;
 * - `bullmq`: `Queue.addBulk`, one call per batch;
 * - `graphile-worker`: `WorkerUtils.addJobs`, one call per batch.
 *
 * Event `n` is the peers' workload (peer-kit.ts): a 1 KiB JSON body to path
 * `/ep/${n % 100}`; Herald addresses it to `endpointIds[n % 100]` (the
 * endpoint of that path) and names it itself. The bodies are made before
 * 'ready', outside any measured window.
 *
 * Controlled over IPC:
 *   ← {type: 'ready'}                once the connection is open
 *   → {type: 'publish', from, to}    publish events `from` to `to` (exclusive), `batch` per transaction
 *   ← {type: 'published'}            when all of them are committed
 *   ← {type: 'error', message}       when publishing failed
 *   → {type: 'close'}                close the connection and exit
 */
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { workload, type DeliveryJob } from './peers/peer-kit.ts';

export type ProducerTarget =
  | { readonly system: 'herald-sqlite'; readonly dbPath: string; readonly endpointIds: readonly string[] }
  | { readonly system: 'herald-postgres'; readonly connectionString: string; readonly endpointIds: readonly string[] }
  | { readonly system: 'bullmq'; readonly redisPort: number; readonly queue: string }
  | { readonly system: 'graphile-worker'; readonly connectionString: string };

export interface ProducerJob {
  readonly target: ProducerTarget;
  /** Bodies made up front: events 0 to `events - 1`. */
  readonly events: number;
  /** Events per transaction (per bulk call). */
  readonly batch: number;
}

/** Publishes one batch, events `from` to `from + jobs.length - 1`, in one transaction (one bulk call). */
type PublishBatch = (from: number, jobs: readonly DeliveryJob[]) => Promise<void>;

interface Publisher {
  readonly publishBatch: PublishBatch;
  close(): Promise<void>;
}

const DIST_ENTRY = join(fileURLToPath(new URL('../..', import.meta.url)), 'dist', 'index.js');

/** The compiled package, typed by its sources (dist/ is built by the bench before it forks this). */
async function heraldPackage(): Promise<typeof import('../../lib/index.ts')> {
  return (await import(pathToFileURL(DIST_ENTRY).href)) as typeof import('../../lib/index.ts');
}

async function openPublisher(target: ProducerTarget): Promise<Publisher> {
  switch (target.system) {
    case 'herald-sqlite': {
      const { publish, JsonText } = await heraldPackage();
      const { default: Database } = await import('better-sqlite3');
      const db = new Database(target.dbPath);
      db.pragma('busy_timeout = 5000');
      // The payloads are JSON text already: published verbatim, as an application holding serialised JSON would.
      const inTransaction = db.transaction((jobs: readonly DeliveryJob[], from: number) => {
        publish(db, jobs.map((job, i) => ({ tenantId: 'bench', type: 'bench.event', endpointId: endpointOf(target.endpointIds, from + i), payload: JsonText.parse(job.body, 'payload') })));
      });
      return {
        publishBatch: async (from, jobs) => void inTransaction.immediate(jobs, from),
        close: async () => void db.close(),
      };
    }
    case 'herald-postgres': {
      const { publishPg, JsonText } = await heraldPackage();
      const { default: pg } = await import('pg');
      const client = new pg.Client({ connectionString: target.connectionString });
      await client.connect();
      return {
        publishBatch: async (from, jobs) => {
          await client.query('BEGIN');
          try {
            await publishPg(client, jobs.map((job, i) => ({ tenantId: 'bench', type: 'bench.event', endpointId: endpointOf(target.endpointIds, from + i), payload: JsonText.parse(job.body, 'payload') })));
            await client.query('COMMIT');
          } catch (error) {
            await client.query('ROLLBACK');
            throw error;
          }
        },
        close: () => client.end(),
      };
    }
    case 'bullmq': {
      const { Queue } = await import('bullmq');
      const queue = new Queue<DeliveryJob>(target.queue, { connection: { host: '127.0.0.1', port: target.redisPort, maxRetriesPerRequest: null } });
      queue.on('error', () => {});
      await queue.waitUntilReady();
      return {
        publishBatch: async (_from, jobs) => void (await queue.addBulk(jobs.map((data) => ({ name: 'deliver', data })))),
        close: () => queue.close(),
      };
    }
    case 'graphile-worker': {
      const { Logger, makeWorkerUtils } = await import('graphile-worker');
      const utils = await makeWorkerUtils({ connectionString: target.connectionString, logger: new Logger(() => () => {}) });
      return {
        publishBatch: async (_from, jobs) => void (await utils.addJobs(jobs.map((payload) => ({ identifier: 'deliver', payload })))),
        close: async () => void (await utils.release()),
      };
    }
  }
}

/** Event `n` goes to path `/ep/${n % 100}`: the endpoint created for that path. */
function endpointOf(endpointIds: readonly string[], n: number): string {
  return endpointIds[n % endpointIds.length]!;
}

async function main(): Promise<void> {
  const job = JSON.parse(process.argv[2] ?? '{}') as ProducerJob;
  const jobs = workload(job.events);
  const publisher = await openPublisher(job.target);
  // The bench went away (killed): never outlive it.
  process.on('disconnect', () => process.exit(0));
  // Ctrl-C reaches the whole process group: the bench stops this process itself.
  process.on('SIGINT', () => {});
  process.on('message', (message: { type: string; from?: number; to?: number }) => {
    if (message.type === 'close') {
      publisher.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
      return;
    }
    if (message.type !== 'publish') return;
    const to = Math.min(message.to!, jobs.length);
    const publishAll = async (): Promise<void> => {
      for (let from = message.from!; from < to; from += job.batch) {
        await publisher.publishBatch(from, jobs.slice(from, Math.min(to, from + job.batch)));
        // Between transactions, as an application's requests would be: the worker gets the lock (SQLite) in between.
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    publishAll().then(
      () => process.send?.({ type: 'published' }),
      (error: unknown) => process.send?.({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
    );
  });
  process.send?.({ type: 'ready' });
}

main().catch((error: unknown) => {
  process.send?.({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) }, () => process.exit(1));
});
