import { expect } from 'chai';
import pg from 'pg';
import { DataSource } from 'typeorm';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { JsonText } from '../../lib/producer/json-text.ts';
import { publish, type SqlRunner } from '../../lib/producer/postgres-publish.ts';
import { migratePostgresSchema } from '../../lib/store/postgres/schema.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';

describe('publish into a PostgreSQL outbox (a real server)', function () {
  // The first spec of a run that needs the server starts it (a few seconds; bounded at 60 s).
  this.timeout(90_000);
  let pool: pg.Pool;
  const clock = new ManualClock(1_767_225_600_000);

  beforeEach(async () => {
    pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
    await migratePostgresSchema(pool);
    await pool.query(`CREATE TABLE public.leads (id text PRIMARY KEY, name text NOT NULL)`);
    for (const [id, tenant] of [['ep_1', 'acme'], ['ep_2', 'acme'], ['ep_3', 'globex']] as const) {
      await pool.query(
        `INSERT INTO herald.endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode, concurrency, status,
           disabled_reason, failing_since, secrets, created_at, updated_at)
         VALUES ($1, $2, 'https://hooks.example.com/x', '', '[]', '{"preset":"default"}', 10000, 'at-least-once', 4, 'enabled', NULL, NULL, '[]', 0, 0)`,
        [id, tenant],
      );
    }
  });

  afterEach(async () => {
    await pool.end();
  });

  async function outbox(): Promise<Array<{ id: string; tenant_id: string; payload: string; created_at: string; endpoint_id: string | null; ordering_key: string | null }>> {
    return (await pool.query(`SELECT id, tenant_id, payload, created_at, endpoint_id, ordering_key FROM herald.events ORDER BY seq`)).rows;
  }

  /** The business change and the event in one transaction on one connection, as the outbox pattern wants. */
  async function inTransaction<T>(work: (client: pg.PoolClient) => Promise<T>, outcome: 'commit' | 'rollback'): Promise<T> {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query(outcome === 'commit' ? 'COMMIT' : 'ROLLBACK');
      return result;
    } finally {
      client.release();
    }
  }

  context('inside the producer\'s transaction', () => {
    it('commits the event with the business row', async () => {
      const [event] = await inTransaction(async (client) => {
        await client.query(`INSERT INTO public.leads (id, name) VALUES ('lead_1', 'Ada')`);
        return publish(client, { tenantId: 'acme', type: 'lead.created', payload: { leadId: 'lead_1' } }, { clock });
      }, 'commit');
      expect(event).to.include({ tenantId: 'acme', type: 'lead.created', payload: '{"leadId":"lead_1"}', createdAt: clock.now(), endpointId: null });
      expect(await outbox()).to.deep.equal([{ id: event!.id, tenant_id: 'acme', payload: '{"leadId":"lead_1"}', created_at: String(clock.now()), endpoint_id: null, ordering_key: null }]);
      expect((await pool.query('SELECT id FROM public.leads')).rows).to.deep.equal([{ id: 'lead_1' }]);
    });

    it('leaves nothing in the outbox when the business change rolls back', async () => {
      await inTransaction(async (client) => {
        await client.query(`INSERT INTO public.leads (id, name) VALUES ('lead_1', 'Ada')`);
        return publish(client, { tenantId: 'acme', type: 'lead.created', payload: { leadId: 'lead_1' } }, { clock });
      }, 'rollback');
      expect(await outbox()).to.deep.equal([]);
      expect((await pool.query('SELECT id FROM public.leads')).rows).to.deep.equal([]);
    });
  });

  context('with a batch', () => {
    it('writes every event in input order, addressed ones to their endpoint, payloads byte for byte', async () => {
      const events = await publish(pool, [
        { tenantId: 'acme', type: 'a.b', payload: JsonText.parse('{"big": 12345678901234567890, "float": 1.0}', 'payload') },
        { tenantId: 'acme', type: 'a.c', payload: [1, 2], endpointId: 'ep_2', orderingKey: 'order-9' },
        { tenantId: 'globex', type: 'g.h', payload: null },
      ], { clock });
      const rows = await outbox();
      expect(rows.map((r) => r.ordering_key)).to.deep.equal([null, 'order-9', null]);
      expect(events.map((e) => e.orderingKey)).to.deep.equal([null, 'order-9', null]);
      expect(rows.map((r) => r.id)).to.deep.equal(events.map((e) => e.id));
      expect(rows.map((r) => r.payload)).to.deep.equal(['{"big": 12345678901234567890, "float": 1.0}', '[1,2]', 'null']);
      expect(rows.map((r) => r.endpoint_id)).to.deep.equal([null, 'ep_2', null]);
    });

    it('writes nothing when one input is invalid, naming the field', async () => {
      const error = await publish(pool, [
        { tenantId: 'acme', type: 'a.b', payload: {} },
        { tenantId: 'acme', type: '', payload: {} },
      ], { clock }).catch((e: unknown) => e);
      expect(isHeraldError(error) && error.code).to.equal(ErrorCode.INVALID_INPUT);
      expect((error as Error).message).to.match(/type/);
      expect(await outbox()).to.deep.equal([]);
    });

    it('writes nothing when one input names an unknown tenant or another tenant\'s endpoint', async () => {
      const unknownTenant = await publish(pool, [{ tenantId: 'acme', type: 'a.b', payload: {} }, { tenantId: 'nobody', type: 'a.b', payload: {} }], { clock }).catch((e: unknown) => e);
      expect(isHeraldError(unknownTenant) && unknownTenant.code).to.equal(ErrorCode.NOT_FOUND);
      expect((unknownTenant as Error).message).to.match(/^tenantId: /);
      const foreignEndpoint = await publish(pool, { tenantId: 'acme', type: 'a.b', payload: {}, endpointId: 'ep_3' }, { clock }).catch((e: unknown) => e);
      expect(isHeraldError(foreignEndpoint) && foreignEndpoint.code).to.equal(ErrorCode.NOT_FOUND);
      expect((foreignEndpoint as Error).message).to.match(/^endpointId: /);
      expect(await outbox()).to.deep.equal([]);
    });
  });

  context('when an id is published again', () => {
    it('returns the stored event and writes nothing (an idempotent retry); another tenant\'s id is a conflict', async () => {
      const [first] = await publish(pool, { id: 'evt_order_7', tenantId: 'acme', type: 'a.b', payload: { v: 1 } }, { clock });
      clock.advance(1_000);
      const [again] = await publish(pool, { id: 'evt_order_7', tenantId: 'acme', type: 'a.b', payload: { v: 2 } }, { clock });
      expect(again).to.deep.equal(first);
      const conflict = await publish(pool, { id: 'evt_order_7', tenantId: 'globex', type: 'a.b', payload: {} }, { clock }).catch((e: unknown) => e);
      expect(isHeraldError(conflict) && conflict.code).to.equal(ErrorCode.CONFLICT);
      expect((await outbox()).map((r) => r.payload)).to.deep.equal(['{"v":1}']);
    });
  });

  context('from a TypeORM DataSource, in dataSource.transaction', () => {
    let dataSource: DataSource;

    beforeEach(async () => {
      dataSource = new DataSource({ type: 'postgres', url: pool.options.connectionString!, entities: [], logging: false });
      await dataSource.initialize();
    });

    afterEach(async () => {
      await dataSource.destroy();
    });

    it('commits the event with the business row', async () => {
      const [event] = await dataSource.transaction(async (tx) => {
        await tx.query(`INSERT INTO public.leads (id, name) VALUES ($1, $2)`, ['lead_1', 'Ada']);
        return publish(tx, { tenantId: 'acme', type: 'lead.created', payload: { leadId: 'lead_1' } }, { clock });
      });
      expect((await outbox()).map((r) => r.id)).to.deep.equal([event!.id]);
      expect((await pool.query('SELECT id FROM public.leads')).rows).to.deep.equal([{ id: 'lead_1' }]);
    });

    it('leaves nothing when the transaction throws after publishing', async () => {
      const failure = await dataSource
        .transaction(async (tx) => {
          await tx.query(`INSERT INTO public.leads (id, name) VALUES ($1, $2)`, ['lead_1', 'Ada']);
          await publish(tx, { tenantId: 'acme', type: 'lead.created', payload: { leadId: 'lead_1' } }, { clock });
          throw new Error('the business rule said no');
        })
        .catch((e: unknown) => e);
      expect((failure as Error).message).to.equal('the business rule said no');
      expect(await outbox()).to.deep.equal([]);
      expect((await pool.query('SELECT id FROM public.leads')).rows).to.deep.equal([]);
    });
  });

  context('through a runner that answers rows (TypeORM\'s query)', () => {
    it('publishes the same', async () => {
      const rowsRunner: SqlRunner = { query: async (sql, parameters) => (await pool.query(sql, parameters)).rows };
      const [event] = await publish(rowsRunner, { tenantId: 'acme', type: 'a.b', payload: { ok: true } }, { clock });
      expect((await outbox()).map((r) => r.id)).to.deep.equal([event!.id]);
    });
  });

  context('with another schema', () => {
    it('writes into it, and refuses a name that is not a plain identifier', async () => {
      await migratePostgresSchema(pool, 'outbox_b');
      await pool.query(`INSERT INTO outbox_b.endpoints SELECT * FROM herald.endpoints`);
      await publish(pool, { tenantId: 'acme', type: 'a.b', payload: {} }, { clock, schema: 'outbox_b' });
      expect((await pool.query('SELECT count(*)::int AS n FROM outbox_b.events')).rows).to.deep.equal([{ n: 1 }]);
      expect(await outbox()).to.deep.equal([]);
      const bad = await publish(pool, { tenantId: 'acme', type: 'a.b', payload: {} }, { clock, schema: 'x; DROP TABLE leads' }).catch((e: unknown) => e);
      expect(isHeraldError(bad) && bad.code).to.equal(ErrorCode.INVALID_INPUT);
    });
  });
});
