/**
 * What a fan-out write costs in SQLite, and how much of it is the commit:
 * 30 000 events (1 KiB each, 100 endpoints) are published, then fanned out the
 * way the store does it (mark the event, insert its delivery pending), N per
 * transaction. Prints µs per delivery for the statements and for `COMMIT`.
 *
 *   tsx scripts/bench/fanout-sql.ts [perTransaction=100]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { deliveryIdFor, newEventId, newId, slotOf } from '../../lib/ids.ts';
import { ensureSchema } from '../../lib/store/sqlite/schema.ts';

const EVENTS = 30_000;
const perTransaction = Number(process.argv[2] ?? 100);
const dir = mkdtempSync(join(tmpdir(), 'herald-fanout-sql-'));
const db = new Database(join(dir, 'herald.db'));
// The store's own settings (SqliteStore#open).
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.pragma('cache_size = -16384');
ensureSchema(db);

const endpoints = Array.from({ length: 100 }, () => newId('ep'));
const payload = JSON.stringify({ pad: 'x'.repeat(1_000) });
const insertEvent = db.prepare(`INSERT INTO events (id, tenant_id, type, payload, created_at, endpoint_id) VALUES (?, 'bench', 'bench.event', ?, ?, ?)`);
const events: Array<{ id: string; at: number; endpointId: string }> = [];
for (let from = 0; from < EVENTS; from += 1_000) {
  db.transaction(() => {
    for (let n = from; n < from + 1_000; n++) {
      const at = Date.now();
      const event = { id: newEventId(at), at, endpointId: endpoints[n % endpoints.length]! };
      insertEvent.run(event.id, payload, at, event.endpointId);
      events.push(event);
    }
  }).immediate();
}

const markFannedOut = db.prepare(`UPDATE events SET fanned_out_at = COALESCE(fanned_out_at, @now) WHERE id = @id`);
const insertDelivery = db.prepare(`INSERT OR IGNORE INTO deliveries (id, event_id, endpoint_id, tenant_id, event_type, slot,
    status, attempts, round, next_attempt_at, lease_epoch, last_error, created_at, updated_at, delivered_at)
  VALUES (@id, @eventId, @endpointId, 'bench', 'bench.event', @slot, 'pending', 0, 0, @now, 0, NULL, @now, @now, NULL)`);
const begin = db.prepare('BEGIN IMMEDIATE');
const commit = db.prepare('COMMIT');
let statementsMs = 0;
let commitMs = 0;
for (let from = 0; from < EVENTS; from += perTransaction) {
  begin.run();
  const now = Date.now();
  let started = performance.now();
  for (const event of events.slice(from, from + perTransaction)) {
    markFannedOut.run({ id: event.id, now });
    insertDelivery.run({ id: deliveryIdFor(event.id, event.endpointId, event.at), eventId: event.id, endpointId: event.endpointId, slot: slotOf(event.endpointId, 256), now });
  }
  statementsMs += performance.now() - started;
  started = performance.now();
  commit.run();
  commitMs += performance.now() - started;
}
const us = (ms: number): string => ((ms * 1_000) / EVENTS).toFixed(1);
console.log(`${perTransaction} per transaction: statements ${us(statementsMs)} µs + COMMIT ${us(commitMs)} µs = ${us(statementsMs + commitMs)} µs per delivery`);
db.close();
rmSync(dir, { recursive: true, force: true });
