/**
 * What the event-type catalog costs a SQLite producer per publish, in-process: `publish()` of one
 * small event (an order of ~200 bytes) on the producer's own connection, inside the caller's
 * transaction (1 000 publishes per transaction, so the commit does not hide the per-publish cost),
 * in three catalogs measured in turn, in rounds:
 *
 * - none: no event type defined (the version read finds 0; nothing is checked);
 * - unchecked: the catalog holds a schema for another type (the version read, a map lookup);
 * - checked: the published type has a schema (the version read, JSON.parse of the payload, Ajv).
 *
 * Prints µs per publish (the median of the rounds) and each against `none`, then the check alone
 * (no SQLite) in µs per event. `measureSchemaCheck` returns the same figures (the bench's
 * `features` scenario runs it).
 *
 *   tsx scripts/bench/schema-check.ts [rounds=7] [publishesPerRound=10000]
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { systemClock } from '../../lib/clock.ts';
import { CatalogSnapshot } from '../../lib/event-types/catalog-snapshot.ts';
import { EventTypeAdmin } from '../../lib/event-types/event-type-admin.ts';
import type { Endpoint } from '../../lib/model.ts';
import { publish } from '../../lib/producer/sqlite-publish.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';

const PER_TRANSACTION = 1_000;
/** Checks timed for the check alone (after 10 000 of warm-up): about 0.1 s. */
const CHECKS = 100_000;

const ORDER_SCHEMA = {
  type: 'object',
  required: ['orderId', 'amount', 'currency', 'lines'],
  properties: {
    orderId: { type: 'string', minLength: 1 },
    amount: { type: 'number', minimum: 0 },
    currency: { type: 'string', pattern: '^[A-Z]{3}$' },
    placedAt: { type: 'string', format: 'date-time' },
    lines: { type: 'array', items: { type: 'object', required: ['sku', 'qty'], properties: { sku: { type: 'string' }, qty: { type: 'integer', minimum: 1 } } } },
  },
};
const payload = { orderId: 'ord_0001', amount: 42.5, currency: 'EUR', placedAt: '2026-01-31T09:30:00Z', lines: [{ sku: 'A-1', qty: 2 }, { sku: 'B-7', qty: 1 }] };

export type SchemaCatalog = 'none' | 'unchecked' | 'checked';

export interface SchemaCheckSizes {
  /** Publishes timed per round and catalog. */
  readonly publishes: number;
  /** Rounds, each catalog once per round; the median is kept. */
  readonly rounds: number;
}

export interface SchemaCheckRow {
  readonly catalog: SchemaCatalog;
  /** Median of the rounds, µs per `publish()`. */
  readonly microsPerPublish: number;
  /** Against `none`'s median. */
  readonly ratioToNone: number;
}

export interface SchemaCheckResult extends SchemaCheckSizes {
  readonly perTransaction: number;
  readonly rows: readonly SchemaCheckRow[];
  /** JSON.parse of the payload and the compiled schema, without SQLite, µs per event. */
  readonly checkAloneMicrosPerEvent: number;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

/** The three catalogs in interleaved rounds on a throwaway SQLite file (removed at the end). */
export async function measureSchemaCheck({ publishes, rounds }: SchemaCheckSizes): Promise<SchemaCheckResult> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-schema-check-'));
  const path = join(dir, 'herald.db');
  const store = new SqliteStore({ path, clock: systemClock });
  let producer: Database.Database | undefined;
  try {
    await store.init({ slotCount: 8 });
    const now = systemClock.now();
    const endpoint: Endpoint = {
      id: 'ep_bench', tenantId: 'bench', url: 'https://hooks.example.com/x', description: '', eventTypes: [], retry: { preset: 'default' },
      timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 4, status: 'enabled', disabledReason: null, failingSince: null,
      secrets: [], createdAt: now, updatedAt: now,
    };
    await store.createEndpoint(endpoint);
    const admin = new EventTypeAdmin({ store, clock: systemClock });
    const connection = new Database(path);
    producer = connection;
    connection.pragma('journal_mode = WAL');
    connection.pragma('synchronous = NORMAL');

    /** Brings the catalog to the state measured: the producer sees each change at its next publish. */
    const catalog = async (state: SchemaCatalog): Promise<void> => {
      for (const type of await admin.list()) await admin.delete(type.name);
      if (state === 'unchecked') await admin.create({ name: 'other.type', schema: ORDER_SCHEMA });
      if (state === 'checked') await admin.create({ name: 'order.placed', schema: ORDER_SCHEMA });
    };

    const round = (): number => {
      const started = process.hrtime.bigint();
      for (let done = 0; done < publishes; done += PER_TRANSACTION) {
        connection.transaction(() => {
          for (let i = 0; i < PER_TRANSACTION; i++) publish(connection, { tenantId: 'bench', type: 'order.placed', payload });
        })();
      }
      return Number(process.hrtime.bigint() - started) / 1_000 / publishes;
    };

    const states: SchemaCatalog[] = ['none', 'unchecked', 'checked'];
    const samples: Record<SchemaCatalog, number[]> = { none: [], unchecked: [], checked: [] };
    for (const state of states) {
      await catalog(state);
      round(); // warm-up: statements prepared, schema compiled, JIT
    }
    for (let r = 0; r < rounds; r++) {
      for (const state of states) {
        await catalog(state);
        samples[state].push(round());
      }
    }
    const base = median(samples.none);
    const rows = states.map((state) => ({ catalog: state, microsPerPublish: median(samples[state]), ratioToNone: median(samples[state]) / base }));

    // The check alone, without SQLite: JSON.parse of the payload and the compiled schema, per event.
    const snapshot = new CatalogSnapshot({ version: 1, entries: [{ name: 'order.placed', version: 1, schema: ORDER_SCHEMA }] });
    const event = [{ type: 'order.placed', payloadJson: JSON.stringify(payload) }];
    for (let i = 0; i < 10_000; i++) snapshot.check(event);
    const checkStarted = process.hrtime.bigint();
    for (let i = 0; i < CHECKS; i++) snapshot.check(event);
    const checkAloneMicrosPerEvent = Number(process.hrtime.bigint() - checkStarted) / 1_000 / CHECKS;

    return { publishes, rounds, perTransaction: PER_TRANSACTION, rows, checkAloneMicrosPerEvent };
  } finally {
    producer?.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await measureSchemaCheck({ rounds: Number(process.argv[2] ?? 7), publishes: Number(process.argv[3] ?? 10_000) });
  console.log(`publish() on a SQLite producer connection, ${result.publishes} publishes × ${result.rounds} rounds, ${result.perTransaction} per caller transaction (median µs per publish)`);
  for (const row of result.rows) {
    console.log(`  ${row.catalog.padEnd(10)} ${row.microsPerPublish.toFixed(2).padStart(7)} µs   ${row.ratioToNone.toFixed(2)}× none`);
  }
  console.log(`  the check alone (JSON.parse + Ajv): ${result.checkAloneMicrosPerEvent.toFixed(2)} µs per event`);
}
