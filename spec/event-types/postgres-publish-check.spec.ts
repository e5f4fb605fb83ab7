/**
 * The catalog's check in a PostgreSQL producer (`publishPg`), against a real server: a payload the
 * schema refuses is refused before anything is stored, and a catalog change made by another
 * connection (Herald's store, as the admin API makes it) is seen by a producer's connection that
 * cached the catalog before: its insert, guarded by the version it checked against, inserts
 * nothing, and it reloads, checks again and retries.
 */
import { expect } from 'chai';
import pg from 'pg';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError, type HeraldError } from '../../lib/errors.ts';
import { EventTypeAdmin } from '../../lib/event-types/event-type-admin.ts';
import { publish, type SqlRunner } from '../../lib/producer/postgres-publish.ts';
import { PostgresStore } from '../../lib/store/postgres/postgres-store.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';
import { makeEndpoint } from '../store/conformance/index.ts';

const AMOUNT = { type: 'object', required: ['amount'], properties: { amount: { type: 'number', minimum: 0 } } };

describe('publish into a PostgreSQL outbox, checked against the event-type catalog (a real server)', function () {
  this.timeout(90_000);
  const clock = new ManualClock(1_767_225_600_000);
  let store: PostgresStore;
  let admin: EventTypeAdmin;
  let pool: pg.Pool;
  let client: pg.PoolClient;

  beforeEach(async () => {
    const url = await createTestDatabase();
    store = new PostgresStore({ connectionString: url, clock, poolSize: 2 });
    await store.init({ slotCount: 8 });
    await store.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now()));
    admin = new EventTypeAdmin({ store, clock });
    pool = new pg.Pool({ connectionString: url, max: 2 });
    client = await pool.connect();
  });

  afterEach(async () => {
    client.release();
    await pool.end();
    await store.close();
  });

  async function outboxSize(): Promise<number> {
    return Number((await pool.query('SELECT count(*) AS n FROM herald.events')).rows[0].n);
  }

  /** Counts the statements the producer runs on its connection. */
  function counted(runner: pg.PoolClient): { runner: SqlRunner; statements: () => number } {
    let statements = 0;
    return { runner: { query: (sql, parameters) => ((statements += 1), runner.query(sql, parameters)) }, statements: () => statements };
  }

  async function refusal(promise: Promise<unknown>): Promise<HeraldError> {
    try {
      await promise;
    } catch (error) {
      if (isHeraldError(error)) return error;
      throw error;
    }
    throw new Error('expected publish to reject');
  }

  it('refuses a payload its type\'s schema refuses, naming the pointer and the rule, and stores nothing of the batch', async () => {
    await admin.create({ name: 'invoice.paid', schema: AMOUNT });
    const error = await refusal(publish(client, [
      { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 5 } },
      { tenantId: 'acme', type: 'invoice.paid', payload: { amount: -5 } },
    ], { clock }));
    expect(error).to.deep.include({ code: ErrorCode.INVALID_INPUT, field: '[1].payload/amount', rule: 'must be >= 0 (minimum)' });
    expect(await outboxSize()).to.equal(0);
    expect(await publish(client, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 5 } }, { clock })).to.have.length(1);
    expect(await outboxSize()).to.equal(1);
  });

  it('costs no statement more per publish while the catalog holds still, and sees a change made through another connection at once', async () => {
    await admin.create({ name: 'invoice.paid', schema: AMOUNT });
    const { runner, statements } = counted(client);
    await publish(runner, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 1 } }, { clock });
    const first = statements();
    await publish(runner, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 2 } }, { clock });
    expect(statements() - first, 'the catalog is cached: the reads and the guarded insert only').to.equal(first - 1);

    // Another connection tightens the schema: the cached copy still accepts amount 3, the guard does not.
    await admin.update('invoice.paid', { schema: { ...AMOUNT, properties: { amount: { type: 'number', minimum: 10 } } } });
    const error = await refusal(publish(runner, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 3 } }, { clock }));
    expect(error).to.deep.include({ field: 'payload/amount', rule: 'must be >= 10 (minimum)' });
    expect(await outboxSize()).to.equal(2);

    // And loosens it again: the event refused before goes in, after one reload.
    await admin.update('invoice.paid', { schema: null });
    expect(await publish(runner, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 3 } }, { clock })).to.have.length(1);
    expect(await outboxSize()).to.equal(3);
  });

  it('checks inside the producer\'s transaction: the business change and the event commit together or not at all', async () => {
    await admin.create({ name: 'invoice.paid', schema: AMOUNT });
    await client.query('BEGIN');
    await client.query('CREATE TABLE public.invoices (id text PRIMARY KEY)');
    await client.query(`INSERT INTO public.invoices VALUES ('inv_1')`);
    const error = await refusal(publish(client, { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 'ten' } }, { clock }));
    expect(error.message).to.equal('payload/amount: must be number (type)');
    await client.query('ROLLBACK');
    expect(await outboxSize()).to.equal(0);
  });
});
