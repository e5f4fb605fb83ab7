/**
 * The benchmark's producer: an application publishing into the outbox from its own process
 * and its own SQLite connection, in its own transactions, as the outbox pattern has it (forked
 * by the throughput scenario, so Herald's figures are Herald's alone).
 *
 * Controlled over IPC:
 *   → {type: 'publish'}                       publish every event, `batch` per transaction
 *   ← {type: 'ready'}                          once, when the connection is open
 *   ← {type: 'published', cpuMicros}           when all are committed: this process's CPU (user + system) since 'publish'
 *   → {type: 'close'}                          exit
 */
import Database from 'better-sqlite3';
import { publish } from '../../lib/producer/sqlite-publish.ts';
import { JsonText } from '../../lib/producer/json-text.ts';
import { payloadOf } from './harness.ts';

interface Job {
  readonly dbPath: string;
  readonly endpointIds: readonly string[];
  /** Events to publish, each a payload of `bodyBytes` (the bodies the scenario's baseline posts). */
  readonly events: number;
  readonly bodyBytes: number;
  readonly batch: number;
}

const job = JSON.parse(process.argv[2] ?? '{}') as Job;
const bodies = Array.from({ length: job.events }, (_, n) => JSON.stringify(payloadOf(job.bodyBytes, n)));
const db = new Database(job.dbPath);
db.pragma('busy_timeout = 5000');
// The payloads are JSON text already: published verbatim, as an application holding serialised JSON would.
const publishBatch = db.transaction((from: number, to: number) => {
  const events = [];
  for (let n = from; n < to; n++) {
    events.push({
      tenantId: 'bench',
      type: 'bench.event',
      endpointId: job.endpointIds[n % job.endpointIds.length]!,
      payload: JsonText.parse(bodies[n]!, 'payload'),
    });
  }
  publish(db, events, {});
});

process.on('message', (message: { type: string }) => {
  if (message.type === 'close') {
    db.close();
    process.exit(0);
  }
  if (message.type !== 'publish') return;
  const cpuAtStart = process.cpuUsage();
  let next = 0;
  const step = (): void => {
    const to = Math.min(bodies.length, next + job.batch);
    publishBatch.immediate(next, to);
    next = to;
    if (next < bodies.length) {
      // Between transactions, as an application's requests would be: Herald gets the lock in between.
      setImmediate(step);
      return;
    }
    const cpu = process.cpuUsage(cpuAtStart);
    process.send?.({ type: 'published', cpuMicros: cpu.user + cpu.system });
  };
  step();
});
process.send?.({ type: 'ready' });
