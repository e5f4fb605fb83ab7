import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import type BetterSqlite3 from 'better-sqlite3';
import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import type { HeraldError } from '../../lib/errors.ts';
import type { Endpoint } from '../../lib/model.ts';
import { publish } from '../../lib/producer/sqlite-publish.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';

function thrown(fn: () => unknown): HeraldError {
  try {
    fn();
  } catch (error) {
    if (isHeraldError(error)) return error;
    throw error;
  }
  throw new Error('expected an error');
}

describe('publish (SQLite producer)', () => {
  let dir: string;
  let clock: ManualClock;
  let store: SqliteStore;
  let db: BetterSqlite3.Database;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'herald-publish-'));
    clock = new ManualClock();
    const path = join(dir, 'herald.db');
    store = new SqliteStore({ path, clock });
    await store.init({ slotCount: 8 });
    const now = clock.now();
    const endpoint = (id: string, tenantId: string): Endpoint => ({
      id, tenantId, url: `https://hooks.example.com/${id}`, description: '', eventTypes: [], retry: { preset: 'default' },
      timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 4, status: 'enabled', disabledReason: null,
      failingSince: null, secrets: [], createdAt: now, updatedAt: now,
    });
    await store.createEndpoint(endpoint('ep_acme', 'acme'));
    await store.createEndpoint(endpoint('ep_globex', 'globex'));
    // The producer's own connection, with its own business table.
    db = new Database(path);
    db.exec('CREATE TABLE IF NOT EXISTS invoices (id TEXT PRIMARY KEY, paid INTEGER NOT NULL)');
  });

  afterEach(async () => {
    db.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  context('when published inside a transaction that commits', () => {
    it('stores the event with the business change, and the store sees it unfanned', async () => {
      const [event] = db.transaction(() => {
        db.prepare(`INSERT INTO invoices (id, paid) VALUES ('inv_1', 1)`).run();
        return publish(db, { tenantId: 'acme', type: 'invoice.paid', payload: { invoice: 'inv_1' } }, { clock });
      })();
      expect(event).to.deep.include({
        tenantId: 'acme',
        type: 'invoice.paid',
        payload: '{"invoice":"inv_1"}',
        createdAt: clock.now(),
        endpointId: null,
        orderingKey: null,
      });
      expect(event!.id).to.match(/^evt_[0-9a-f]{32}$/);
      expect(await store.unfannedEvents(10)).to.deep.equal([event]);
    });
  });

  context('when the caller\'s transaction rolls back', () => {
    it('drops the event with the business change', async () => {
      expect(() =>
        db.transaction(() => {
          db.prepare(`INSERT INTO invoices (id, paid) VALUES ('inv_1', 1)`).run();
          publish(db, { tenantId: 'acme', type: 'invoice.paid', payload: { invoice: 'inv_1' } }, { clock });
          throw new Error('business rule failed');
        })(),
      ).to.throw('business rule failed');
      expect(db.prepare('SELECT count(*) FROM invoices').pluck().get()).to.equal(0);
      expect(await store.unfannedEvents(10)).to.deep.equal([]);
    });
  });

  context('when a batch is published', () => {
    it('writes all of them, in order, addressed ones included', async () => {
      const events = publish(db, [
        { tenantId: 'acme', type: 'a', payload: 1 },
        { tenantId: 'globex', type: 'b', payload: 2, endpointId: 'ep_globex', orderingKey: 'order-9' },
      ], { clock });
      expect(events.map((e) => [e.tenantId, e.endpointId, e.orderingKey])).to.deep.equal([['acme', null, null], ['globex', 'ep_globex', 'order-9']]);
      expect((await store.getEvent(events[1]!.id))?.orderingKey).to.equal('order-9');
      expect((await store.unfannedEvents(10)).map((e) => e.id).sort()).to.deep.equal(events.map((e) => e.id).sort());
    });

    it('writes none of them when one is invalid, and says which', async () => {
      const error = thrown(() => publish(db, [
        { tenantId: 'acme', type: 'a', payload: 1 },
        { tenantId: 'acme', type: 'bad type', payload: 2 },
      ], { clock }));
      expect(error.message).to.match(/^\[1\]\.type: /);
      expect(await store.unfannedEvents(10)).to.deep.equal([]);
    });
  });

  context('when the tenant or endpoint is unknown', () => {
    it('throws HERALD_NOT_FOUND naming tenantId for a tenant without endpoints', () => {
      const error = thrown(() => publish(db, { tenantId: 'initech', type: 'a', payload: 1 }, { clock }));
      expect(error.code).to.equal(ErrorCode.NOT_FOUND);
      expect(error.message).to.match(/^tenantId: unknown tenant 'initech'/);
    });

    it('throws HERALD_NOT_FOUND naming endpointId for a missing endpoint or another tenant\'s', () => {
      for (const endpointId of ['ep_missing', 'ep_globex']) {
        const error = thrown(() => publish(db, { tenantId: 'acme', type: 'a', payload: 1, endpointId }, { clock }));
        expect(error.code).to.equal(ErrorCode.NOT_FOUND);
        expect(error.message).to.match(/^endpointId: unknown endpoint/);
      }
    });
  });

  context('when the payload is too large', () => {
    it('throws HERALD_PAYLOAD_TOO_LARGE and writes nothing', async () => {
      const error = thrown(() => publish(db, { tenantId: 'acme', type: 'a', payload: 'x'.repeat(100) }, { clock, maxPayloadBytes: 64 }));
      expect(error.code).to.equal(ErrorCode.PAYLOAD_TOO_LARGE);
      expect(await store.unfannedEvents(10)).to.deep.equal([]);
    });

    it('allows 256 KiB by default', () => {
      const payload = 'x'.repeat(256 * 1024 - 2);
      expect(publish(db, { tenantId: 'acme', type: 'a', payload }, { clock })).to.have.length(1);
      const error = thrown(() => publish(db, { tenantId: 'acme', type: 'a', payload: `${payload}x` }, { clock }));
      expect(error.code).to.equal(ErrorCode.PAYLOAD_TOO_LARGE);
    });
  });

  context('when the same id is published twice (a producer retry)', () => {
    it('returns the stored event and writes nothing new', async () => {
      const [first] = publish(db, { tenantId: 'acme', type: 'a', payload: { n: 1 }, id: 'order-17' }, { clock });
      clock.advance(1_000);
      const [again] = publish(db, { tenantId: 'acme', type: 'a', payload: { n: 2 }, id: 'order-17' }, { clock });
      expect(again).to.deep.equal(first);
      expect(first!.id).to.equal('order-17');
      expect(await store.unfannedEvents(10)).to.deep.equal([first]);
    });

    it('refuses the id for another tenant (HERALD_CONFLICT)', () => {
      publish(db, { tenantId: 'acme', type: 'a', payload: 1, id: 'order-17' }, { clock });
      expect(thrown(() => publish(db, { tenantId: 'globex', type: 'a', payload: 1, id: 'order-17' }, { clock })).code)
        .to.equal(ErrorCode.CONFLICT);
    });
  });

  context('when the file has no schema yet', () => {
    it('creates it, even inside the caller\'s transaction', () => {
      const fresh = new Database(join(dir, 'fresh.db'));
      try {
        // No endpoint can exist yet, so the tenant is unknown, but the tables now do.
        const error = thrown(() => fresh.transaction(() => publish(fresh, { tenantId: 'acme', type: 'a', payload: 1 }))());
        expect(error.code).to.equal(ErrorCode.NOT_FOUND);
        const tables = fresh.prepare(`SELECT name FROM sqlite_schema WHERE type = 'table' AND name = 'events'`).pluck().all();
        // The failed transaction rolled the DDL back with it; the next call creates it again.
        expect(tables).to.deep.equal([]);
        expect(thrown(() => publish(fresh, { tenantId: 'acme', type: 'a', payload: 1 })).code).to.equal(ErrorCode.NOT_FOUND);
        expect(fresh.prepare(`SELECT name FROM sqlite_schema WHERE name = 'events'`).pluck().all()).to.deep.equal(['events']);
      } finally {
        fresh.close();
      }
    });
  });
});
