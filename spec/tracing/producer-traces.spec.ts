/**
 * The producers' publish paths with the official SDK registered: each makes a `herald publish`
 * span, child of the producer's active span, and stores that span's context with the events it
 * writes (read back by the store as it is); without an SDK, nothing is stored.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import Database from 'better-sqlite3';
import type { ClientSession, Db } from 'mongodb';
import pg from 'pg';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { ManualClock } from '../../lib/clock.ts';
import type { Endpoint, OutboxEvent } from '../../lib/model.ts';
import { publish as publishMongo } from '../../lib/producer/mongo-publish.ts';
import { publish as publishPg } from '../../lib/producer/postgres-publish.ts';
import { publish } from '../../lib/producer/sqlite-publish.ts';
import type { EventDoc } from '../../lib/store/mongo/schema.ts';
import { migratePostgresSchema } from '../../lib/store/postgres/schema.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { SpanAttribute, SpanName } from '../../lib/tracing/span-names.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';
import { registerSdk, type TestSdk } from './test-sdk.ts';

/** Runs `work` inside an active producer span named `checkout`, ended after it. */
function inProducerSpan<T>(sdk: TestSdk, work: () => T): T {
  return sdk.tracer.startActiveSpan('checkout', (span) => {
    try {
      const result = work();
      if (result instanceof Promise) return result.finally(() => span.end()) as T;
      span.end();
      return result;
    } catch (error) {
      span.end();
      throw error;
    }
  });
}

/** The publish span, after checking it is the child of the producer's and what the events store. */
function checkedPublishSpan(sdk: TestSdk, events: readonly OutboxEvent[], path: string) {
  const [checkout] = sdk.spans('checkout');
  const [span] = sdk.spans(SpanName.PUBLISH);
  expect(span!.kind).to.equal(SpanKind.PRODUCER);
  expect(span!.parentSpanContext?.spanId).to.equal(checkout!.spanContext().spanId);
  const { traceId, spanId } = span!.spanContext();
  expect(traceId).to.equal(checkout!.spanContext().traceId);
  for (const event of events) expect(event.traceContext).to.deep.equal({ traceparent: `00-${traceId}-${spanId}-01` });
  expect(span!.attributes).to.include({ [SpanAttribute.PUBLISH_PATH]: path, [SpanAttribute.EVENT_COUNT]: events.length, [SpanAttribute.TENANT_ID]: 'acme' });
  expect(span!.attributes[SpanAttribute.EVENT_IDS]).to.deep.equal(events.map((e) => e.id));
  return span!;
}

describe('Traces of the producers\' publish', () => {
  let sdk: TestSdk | undefined;
  afterEach(async () => {
    await sdk?.close();
    sdk = undefined;
  });

  describe('SQLite (synchronous)', () => {
    let dir: string;
    let store: SqliteStore;
    let db: Database.Database;
    const clock = new ManualClock();

    beforeEach(async () => {
      dir = mkdtempSync(join(tmpdir(), 'herald-traces-'));
      const path = join(dir, 'herald.db');
      store = new SqliteStore({ path, clock });
      await store.init({ slotCount: 8 });
      const endpoint: Endpoint = {
        id: 'ep_acme', tenantId: 'acme', url: 'https://hooks.example.com/x', description: '', eventTypes: [], retry: { preset: 'default' },
        timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 4, status: 'enabled', disabledReason: null,
        failingSince: null, secrets: [], createdAt: clock.now(), updatedAt: clock.now(),
      };
      await store.createEndpoint(endpoint);
      db = new Database(path);
    });

    afterEach(async () => {
      db.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('stores the publish span\'s traceparent with each event of the batch, read back by the store', async () => {
      sdk = registerSdk();
      const activeSdk = sdk;
      const events = inProducerSpan(activeSdk, () => publish(db, [
        { tenantId: 'acme', type: 'invoice.paid', payload: { n: 1 } },
        { tenantId: 'acme', type: 'invoice.paid', payload: { n: 2 } },
      ], { clock }));
      checkedPublishSpan(sdk, events, 'sqlite');
      for (const event of events) expect((await store.getEvent(event.id))?.traceContext).to.deep.equal(event.traceContext);
    });

    it('marks the span failed when the publish throws', () => {
      sdk = registerSdk();
      const activeSdk = sdk;
      expect(() => inProducerSpan(activeSdk, () => publish(db, { tenantId: 'nobody', type: 't', payload: {} }, { clock }))).to.throw(/tenant/);
      const [span] = sdk.spans(SpanName.PUBLISH);
      expect(span!.status.code).to.equal(SpanStatusCode.ERROR);
      expect(span!.events.map((e) => e.name)).to.deep.equal(['exception']);
    });

    it('stores nothing with no SDK registered', async () => {
      const [event] = publish(db, { tenantId: 'acme', type: 'invoice.paid', payload: {} }, { clock });
      expect(event!.traceContext).to.equal(null);
      expect((await store.getEvent(event!.id))?.traceContext).to.equal(null);
    });
  });

  describe('PostgreSQL (a real server)', function () {
    // The first spec of a run that needs the server starts it (a few seconds; bounded at 60 s).
    this.timeout(90_000);
    let pool: pg.Pool;

    beforeEach(async () => {
      pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 2 });
      await migratePostgresSchema(pool);
      await pool.query(
        `INSERT INTO herald.endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode, concurrency, status,
           disabled_reason, failing_since, secrets, created_at, updated_at)
         VALUES ('ep_1', 'acme', 'https://hooks.example.com/x', '', '[]', '{"preset":"default"}', 10000, 'at-least-once', 4, 'enabled', NULL, NULL, '[]', 0, 0)`,
      );
    });

    afterEach(async () => {
      await pool.end();
    });

    it('stores the publish span\'s traceparent in the events\' trace_context, and reads it back on a retried publish', async () => {
      sdk = registerSdk();
      const activeSdk = sdk;
      const events = await inProducerSpan(activeSdk, () => publishPg(pool, [
        { tenantId: 'acme', type: 'invoice.paid', payload: {}, id: 'evt_pg_1' },
        { tenantId: 'acme', type: 'invoice.paid', payload: {} },
      ]));
      checkedPublishSpan(sdk, events, 'postgres');
      const { rows } = await pool.query<{ trace_context: unknown }>(`SELECT trace_context FROM herald.events ORDER BY seq`);
      expect(rows.map((row) => row.trace_context)).to.deep.equal(events.map((e) => e.traceContext));
      // Published again (a retried request): the stored event, with the context it was first stored with.
      const [again] = await publishPg(pool, { tenantId: 'acme', type: 'invoice.paid', payload: {}, id: 'evt_pg_1' });
      expect(again!.traceContext).to.deep.equal(events[0]!.traceContext);
    });
  });

  describe('MongoDB (a stand-in database)', () => {
    /** A session in a transaction and a database that answers the tenant check, has an empty event-type catalog, and keeps the inserted events. */
    function standIn(): { session: ClientSession; db: Db; inserted: EventDoc[] } {
      const inserted: EventDoc[] = [];
      const collections: Record<string, object> = {
        meta: { findOne: async () => null },
        event_types: { find: () => ({ sort: () => ({ toArray: async () => [] }) }) },
        endpoints: { findOne: async () => ({ _id: 'ep_1', tenantId: 'acme' }) },
        events: {
          findOne: async () => null,
          insertOne: async (doc: EventDoc) => {
            inserted.push(doc);
            return { acknowledged: true };
          },
        },
      };
      const session = { inTransaction: () => true } as unknown as ClientSession;
      const db = { collection: (name: string) => collections[name] } as unknown as Db;
      return { session, db, inserted };
    }

    it('stores the publish span\'s traceparent on the event document', async () => {
      sdk = registerSdk();
      const activeSdk = sdk;
      const { session, db, inserted } = standIn();
      const events = await inProducerSpan(activeSdk, () => publishMongo(session, { tenantId: 'acme', type: 'invoice.paid', payload: {} }, { db }));
      checkedPublishSpan(sdk, events, 'mongodb');
      expect(inserted.map((doc) => doc.traceContext)).to.deep.equal([events[0]!.traceContext]);
    });

    it('leaves the field out with no SDK registered', async () => {
      const { session, db, inserted } = standIn();
      const [event] = await publishMongo(session, { tenantId: 'acme', type: 'invoice.paid', payload: {} }, { db });
      expect(event!.traceContext).to.equal(null);
      expect(inserted[0]).to.not.have.property('traceContext');
    });
  });
});
