/**
 * The MongoDB store against a real replica set (mongodb-memory-server): the
 * shared conformance suite, then what only MongoDB does (transactions with a
 * producer's session, the change feed, server checks). Without a mongod these
 * skip with one line (see spec/store/mongo/mongod.ts); the checks that need no
 * server run everywhere.
 */
import { hostname } from 'node:os';
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import type { Db } from 'mongodb';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import type { HeraldError } from '../../lib/errors.ts';
import { deliveryIdFor, slotOf } from '../../lib/ids.ts';
import type { Endpoint } from '../../lib/model.ts';
import { publish } from '../../lib/producer/mongo-publish.ts';
import type { ChangeFeedRestart } from '../../lib/store/mongo/change-feed.ts';
import { startEmbeddedReplicaSet } from '../../lib/store/mongo/embedded-server.ts';
import { MongoStore } from '../../lib/store/mongo/mongo-store.ts';
import type { MongoStoreOptions } from '../../lib/store/mongo/mongo-store.ts';
import { Collections, MetaKeys } from '../../lib/store/mongo/schema.ts';
import type { DeliveryDoc, EndpointDoc, EventDoc, MetaDoc } from '../../lib/store/mongo/schema.ts';
import { REPLAY_FENCE_UPDATE, replayDeliveryFilter, replayDeliveryUpdate, replayFenceFilter } from '../../lib/store/mongo/dead-letter-queries.ts';
import {
  busyEndpointsPipeline,
  CANDIDATE_PROJECTION,
  DELIVERY_LIST_SORT,
  deliveryListFilter,
  DUE_ORDER,
  endpointDueFilter,
  statusCountFilter,
} from '../../lib/store/mongo/queries.ts';
import { openStore } from '../../lib/store/open-store.ts';
import { describeStoreConformance } from './conformance/index.ts';
import { dropDatabase, freshDbName, replicaSetOrSkip, startStandalone, whyNoMongod } from './mongo/mongod.ts';

const DAY = 24 * 60 * 60 * 1_000;
/**
 * The ManualClock starts on 2026-01-01, before today: with the default 30-day
 * TTL, MongoDB's TTL monitor could delete the tests' attempts under them.
 */
const TEST_RETENTION_MS = 20 * 365 * DAY;

async function rejection(promise: Promise<unknown>): Promise<HeraldError> {
  try {
    await promise;
  } catch (error) {
    if (isHeraldError(error)) return error;
    throw error;
  }
  throw new Error('expected the promise to reject');
}

/** Resolves on the listener's next call. */
function nextCall(): { listener: () => void; called: () => Promise<void>; count: () => number } {
  let count = 0;
  let waiting: Array<() => void> = [];
  return {
    listener: () => {
      count++;
      const resolve = waiting;
      waiting = [];
      for (const r of resolve) r();
    },
    called: () => new Promise<void>((resolve) => waiting.push(resolve)),
    count: () => count,
  };
}

function endpoint(id: string, now: number, overrides: Partial<Endpoint> = {}): Endpoint {
  return {
    id, tenantId: 'acme', url: `https://hooks.example.com/${id}`, description: '', eventTypes: [],
    retry: { preset: 'default' }, timeoutMs: 1_000, mode: 'at-least-once', ordering: 'none', concurrency: 1, status: 'enabled',
    disabledReason: null, failingSince: null, secrets: [], createdAt: now, updatedAt: now, ...overrides,
  };
}

describe('MongoStore (no server needed)', () => {
  const clock = new ManualClock();

  context('when the store setting is not a usable MongoDB URI', () => {
    it('refuses it with HERALD_INVALID_CONFIG naming the rule, password hidden', async () => {
      for (const setting of ['mongodb:/localhost/db', 'mongodb://', 'mongodb://u:s3cret@/db', 'mongodbx://h', 'redis://h/db']) {
        let thrown: unknown;
        try {
          await openStore(setting, { clock, pollIntervalMs: 50 });
        } catch (error) {
          thrown = error;
        }
        expect(isHeraldError(thrown) && thrown.code, setting).to.equal(ErrorCode.INVALID_CONFIG);
        expect((thrown as Error).message).to.not.include('s3cret');
      }
    });

    it('refuses a bad URI or option in the constructor, naming the field', () => {
      const bad: Array<[MongoStoreOptions, string]> = [
        [{ uri: 'http://localhost/db', clock }, 'uri'],
        [{ uri: 'mongodb://localhost/bad.name', clock }, 'uri'],
        [{ uri: 'mongodb://localhost/db', clock: {} as ManualClock }, 'clock'],
        [{ uri: 'mongodb://localhost/db', clock, retentionMs: 5 }, 'retentionMs'],
        [{ uri: 'mongodb://localhost/db', clock, maxAwaitTimeMs: 0 }, 'maxAwaitTimeMs'],
        [{ uri: 'mongodb://localhost/db', clock, changeFeedKey: '' }, 'changeFeedKey'],
      ];
      for (const [options, field] of bad) {
        expect(() => new MongoStore(options), field).to.throw(`${field}:`).with.property('code', ErrorCode.INVALID_INPUT);
      }
    });
  });

  context('when a valid URI is given', () => {
    it('opens nothing until init(), and rejects use before it with HERALD_STORE', async () => {
      const store = await openStore('mongodb://127.0.0.1:1/herald?replicaSet=rs0', { clock, pollIntervalMs: 50 });
      // By name and code: openStore imports the adapter lazily, and under mocha's loader that
      // copy of the modules is not the one this spec imported (instanceof would compare two classes).
      expect(store.constructor.name).to.equal('MongoStore');
      const codeOf = (promise: Promise<unknown>) => promise.then(() => 'resolved', (error: unknown) => (error as { code?: unknown }).code);
      expect(await codeOf(store.getEndpoint('ep_1'))).to.equal(ErrorCode.STORE);
      await store.close();
      expect(await codeOf(store.getEndpoint('ep_1'))).to.equal(ErrorCode.CLOSED);
    });
  });

  context('when mongodb-memory-server cannot obtain a mongod', () => {
    it('fails the start with a HERALD_STORE error saying to set MONGOMS_SYSTEM_BINARY', async function () {
      if ((await whyNoMongod()) === undefined) this.skip(); // A mongod is available here: nothing to explain.
      const error = await rejection(startEmbeddedReplicaSet());
      expect(error.code).to.equal(ErrorCode.STORE);
      expect(error.message).to.include('mongodb-memory-server').and.include('MONGOMS_SYSTEM_BINARY');
    });
  });
});

describe('MongoStore (replica set)', () => {
  let uri: string;
  /** The test's own client: a producer, another process, a raw view of the data. */
  let client: MongoClient;

  before(async function () {
    uri = await replicaSetOrSkip(this);
    client = new MongoClient(uri);
    await client.connect();
  });

  after(async () => {
    await client?.close();
  });

  const CONFORMANCE_DB = freshDbName('herald_conformance');

  describeStoreConformance('MongoStore', async () => {
    const clock = new ManualClock();
    const store = new MongoStore({ uri, dbName: CONFORMANCE_DB, clock, retentionMs: TEST_RETENTION_MS });
    return {
      store,
      clock,
      async close() {
        await store.close();
        // Emptying the collections keeps their indexes: much faster than a fresh database per test.
        const db = client.db(CONFORMANCE_DB);
        for (const name of Object.values(Collections)) await db.collection(name).deleteMany({});
      },
    };
  });

  describe('Mongo only', () => {
    let dbName: string;
    let db: Db;
    let clock: ManualClock;
    const opened: MongoStore[] = [];

    beforeEach(() => {
      dbName = freshDbName();
      db = client.db(dbName);
      clock = new ManualClock();
    });

    afterEach(async function () {
      this.timeout(30_000);
      for (const store of opened.splice(0)) await store.close();
      await dropDatabase(uri, dbName);
    });

    async function openMongoStore(overrides: Partial<MongoStoreOptions> = {}): Promise<MongoStore> {
      const store = new MongoStore({ uri, dbName, clock, retentionMs: TEST_RETENTION_MS, maxAwaitTimeMs: 200, ...overrides });
      opened.push(store);
      await store.init({ slotCount: 8 });
      return store;
    }

    /** A store with ep_1, watched by a listener, its change stream open. */
    async function watchedStore(overrides: Partial<MongoStoreOptions> = {}): Promise<{ store: MongoStore; calls: ReturnType<typeof nextCall> }> {
      const store = await openMongoStore(overrides);
      await store.createEndpoint(endpoint('ep_1', clock.now()));
      const calls = nextCall();
      store.watch(calls.listener);
      await store.whenChangeFeedReady();
      return { store, calls };
    }

    /** Publishes one event from the test's own client, in its own transaction. */
    async function publishFromProducer(id: string): Promise<void> {
      const session = client.startSession();
      try {
        await session.withTransaction(async () => {
          await publish(session, { id, tenantId: 'acme', type: 'lead.stage_changed', payload: { leadId: 42 } }, { db, clock });
        });
      } finally {
        await session.endSession();
      }
    }

    describe('publish inside the producer\'s transaction', () => {
      context('when the transaction rolls back', () => {
        it('leaves no event', async () => {
          const store = await openMongoStore();
          await store.createEndpoint(endpoint('ep_1', clock.now()));
          const leads = db.collection<{ _id: number; stage: string }>('leads');
          await db.createCollection('leads');
          await leads.insertOne({ _id: 42, stage: 'new' });
          const session = client.startSession();
          try {
            const failure = await session
              .withTransaction(async () => {
                await leads.updateOne({ _id: 42 }, { $set: { stage: 'won' } }, { session });
                await publish(session, { id: 'evt_rolled_back', tenantId: 'acme', type: 'lead.stage_changed', payload: {} }, { db, clock });
                throw new Error('business rule failed');
              })
              .then(() => undefined, (error: unknown) => error);
            expect((failure as Error).message).to.equal('business rule failed');
          } finally {
            await session.endSession();
          }
          expect(await store.getEvent('evt_rolled_back')).to.equal(undefined);
          expect(await store.unfannedEvents(10)).to.deep.equal([]);
          expect((await leads.findOne({ _id: 42 }))?.stage).to.equal('new');
        });
      });

      context('when the transaction commits', () => {
        it('stores the event with the business change, and fan-out finds it', async () => {
          const store = await openMongoStore();
          await store.createEndpoint(endpoint('ep_1', clock.now()));
          await publishFromProducer('evt_committed');
          const event = await store.getEvent('evt_committed');
          expect(event).to.deep.include({ id: 'evt_committed', tenantId: 'acme', type: 'lead.stage_changed', payload: '{"leadId":42}' });
          expect((await store.unfannedEvents(10)).map((e) => e.id)).to.deep.equal(['evt_committed']);
        });

        it('returns the stored event for a repeated id and refuses an unknown tenant', async () => {
          const store = await openMongoStore();
          await store.createEndpoint(endpoint('ep_1', clock.now()));
          await publishFromProducer('evt_1');
          await publishFromProducer('evt_1');
          expect(await db.collection<EventDoc>(Collections.EVENTS).countDocuments({ _id: 'evt_1' })).to.equal(1);
          const session = client.startSession();
          try {
            const error = await rejection(publish(session, { tenantId: 'nobody', type: 't', payload: {} }, { client, dbName }));
            expect(error.code).to.equal(ErrorCode.NOT_FOUND);
          } finally {
            await session.endSession();
          }
        });
      });
    });

    describe('change feed', () => {
      context('when another client commits an event', () => {
        it('calls the listener without waiting for a sweep', async () => {
          const { store, calls } = await watchedStore();
          const called = calls.called();
          await publishFromProducer('evt_fast');
          await called;
          expect(calls.count()).to.be.at.least(1);
          expect(store.changeFeedRestarts).to.equal(0);
        });
      });

      context('when deliveries are inserted in slots this process does not own', () => {
        it('filters them out on the server', async () => {
          const store = await openMongoStore();
          store.setOwnedSlots([1]);
          const calls = nextCall();
          store.watch(calls.listener);
          await store.whenChangeFeedReady();
          const delivery = (id: string, slot: number): DeliveryDoc => ({
            _id: id, eventId: 'evt_x', endpointId: 'ep_x', tenantId: 'acme', eventType: 't', slot, status: 'pending',
            attempts: 0, round: 0, nextAttemptAt: 0, leaseEpoch: 0, lastError: null, createdAt: 0, updatedAt: 0, deliveredAt: null,
          });
          const called = calls.called();
          const deliveries = db.collection<DeliveryDoc>(Collections.DELIVERIES);
          await deliveries.insertOne(delivery('dlv_other', 2));
          await deliveries.insertOne(delivery('dlv_mine', 1));
          await called;
          // Changes arrive in commit order: had slot 2 passed, it would have been the first call.
          expect(calls.count()).to.equal(1);
        });
      });

      context('when the store restarts', () => {
        it('resumes from the stored token and signals what was committed while it was closed', async () => {
          const first = await openMongoStore({ changeFeedKey: 'node-1' });
          await first.createEndpoint(endpoint('ep_1', clock.now()));
          first.watch(() => undefined);
          await first.whenChangeFeedReady();
          await first.close();
          const stored = await db.collection<MetaDoc>(Collections.META).findOne({ _id: `${MetaKeys.RESUME_TOKEN_PREFIX}node-1` });
          expect(stored?.token).to.be.an('object');

          await publishFromProducer('evt_while_closed');

          const second = await openMongoStore({ changeFeedKey: 'node-1' });
          const calls = nextCall();
          const called = calls.called();
          second.watch(calls.listener);
          await called;
          expect(second.changeFeedRestarts).to.equal(0);
        });
      });

      context('when the stored resume token is unusable', () => {
        it('counts a restart, signals a sweep, drops the token and reopens from now, missing nothing after', async () => {
          const restarts: ChangeFeedRestart[] = [];
          const store = await openMongoStore({ onChangeFeedRestart: (r) => restarts.push(r) });
          await store.createEndpoint(endpoint('ep_1', clock.now()));
          const id = `${MetaKeys.RESUME_TOKEN_PREFIX}default`;
          await db.collection<MetaDoc>(Collections.META).updateOne({ _id: id }, { $set: { token: { _data: '00BOGUS' } } }, { upsert: true });

          const calls = nextCall();
          const swept = calls.called();
          store.watch(calls.listener);
          await swept;
          expect(store.changeFeedRestarts).to.equal(1);
          expect(restarts).to.have.length(1);
          expect(restarts[0]).to.include({ resumed: false, restarts: 1 });
          expect(['error', 'history-lost']).to.include(restarts[0]!.reason);

          await store.whenChangeFeedReady();
          const called = calls.called();
          await publishFromProducer('evt_after_restart');
          await called;
          const stored = await db.collection<MetaDoc>(Collections.META).findOne({ _id: id });
          expect(stored?.token).to.not.deep.equal({ _data: '00BOGUS' });
        });
      });
    });

    describe('claims and fencing across two processes', () => {
      context('when a slot changes hands while a delivery is in flight', () => {
        it('lets the new owner reclaim it and fences the old owner\'s settle', async () => {
          const a = await openMongoStore();
          const b = await openMongoStore();
          await a.createEndpoint(endpoint('ep_1', clock.now()));
          await a.appendEvents([{ id: 'evt_1', tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
          const deliveryId = deliveryIdFor('evt_1', 'ep_1', clock.now());
          const slot = slotOf('ep_1', 8);
          await a.recordFanOuts([{ eventId: 'evt_1', deliveries: [{ id: deliveryId, eventId: 'evt_1', endpointId: 'ep_1', tenantId: 'acme', eventType: 't', slot, nextAttemptAt: clock.now(), createdAt: clock.now(), orderingKey: null }] }], clock.now());
          await a.acquireLeases({ owner: 'a', slots: [slot], now: clock.now(), leaseMs: 1_000 });
          const [mine] = await a.claimDue({ owner: 'a', now: clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
          clock.advance(1_000);
          await b.acquireLeases({ owner: 'b', slots: [slot], now: clock.now(), leaseMs: 1_000 });
          const [theirs] = await b.claimDue({ owner: 'b', now: clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
          expect(theirs?.delivery).to.include({ id: deliveryId, leaseEpoch: mine!.delivery.leaseEpoch + 1 });
          const attempt = { number: 1, startedAt: clock.now(), durationMs: 1, outcome: { kind: 'timeout', timeoutMs: 1 } as const, error: 'timeout' };
          const stale = await a.settle([{ kind: 'delivered', deliveryId, epoch: mine!.delivery.leaseEpoch, attempt }], clock.now());
          expect(stale).to.deep.equal({ applied: [], fenced: [deliveryId] });
          const fresh = await b.settle([{ kind: 'delivered', deliveryId, epoch: theirs!.delivery.leaseEpoch, attempt }], clock.now());
          expect(fresh).to.deep.equal({ applied: [deliveryId], fenced: [] });
        });
      });
    });

    /** Appends `n` events for ep_1 and fans each out to one pending delivery due now; returns the delivery ids. */
    async function backlog(store: MongoStore, n: number, endpointId = 'ep_1'): Promise<string[]> {
      const now = clock.now();
      const events = Array.from({ length: n }, (_, i) => ({ id: `evt_${endpointId}_${i}`, tenantId: 'acme', type: 't', payload: '{}', createdAt: now, endpointId: null, orderingKey: null }));
      await store.appendEvents(events);
      const slot = slotOf(endpointId, 8);
      const fanOuts = events.map((e) => ({
        eventId: e.id,
        deliveries: [{ id: deliveryIdFor(e.id, endpointId, now), eventId: e.id, endpointId, tenantId: 'acme', eventType: 't', slot, nextAttemptAt: now, createdAt: now, orderingKey: null }],
      }));
      for (let i = 0; i < fanOuts.length; i += 500) await store.recordFanOuts(fanOuts.slice(i, i + 500), now);
      return fanOuts.map((f) => f.deliveries[0]!.id);
    }

    /** Every stage name of an explain's winning plan (find or aggregate), however nested. */
    function stagesOf(explain: unknown): string[] {
      const found: string[] = [];
      const walk = (node: unknown): void => {
        if (Array.isArray(node)) return node.forEach(walk);
        if (typeof node !== 'object' || node === null) return;
        for (const [key, value] of Object.entries(node)) {
          if (key === 'rejectedPlans') continue;
          if (key === 'stage' && typeof value === 'string') found.push(value);
          walk(value);
        }
      };
      walk(explain);
      return found;
    }

    describe('query plans (the review of issue 14)', () => {
      it('reads an endpoint\'s first due deliveries in index order, covered, with no sort stage', async () => {
        const store = await openMongoStore();
        await store.createEndpoint(endpoint('ep_1', clock.now()));
        await backlog(store, 50);
        const slot = slotOf('ep_1', 8);
        const explain = await db
          .collection<DeliveryDoc>(Collections.DELIVERIES)
          .find(endpointDueFilter('ep_1', { slot, epoch: 1 }, clock.now()), { projection: CANDIDATE_PROJECTION })
          .sort(DUE_ORDER)
          .limit(5)
          .explain('executionStats');
        const stages = stagesOf(explain.queryPlanner);
        expect(stages).to.not.include('SORT');
        expect(stages).to.not.include('FETCH');
        expect(JSON.stringify(explain.queryPlanner)).to.include('deliveries_claim_walk');
        expect(explain.executionStats.totalKeysExamined).to.be.at.most(6);
      });

      it('walks a slot\'s busy endpoints with a DISTINCT_SCAN', async () => {
        const store = await openMongoStore();
        await store.createEndpoint(endpoint('ep_1', clock.now()));
        await backlog(store, 20);
        const explain = await db.collection(Collections.DELIVERIES).aggregate(busyEndpointsPipeline(slotOf('ep_1', 8))).explain('queryPlanner');
        expect(stagesOf(explain)).to.include('DISTINCT_SCAN');
        expect(stagesOf(explain)).to.not.include('SORT');
      });

      it('counts a status and pages the delivery log by endpoint without reading documents or sorting', async () => {
        const store = await openMongoStore();
        await store.createEndpoint(endpoint('ep_1', clock.now()));
        await backlog(store, 20);
        const deliveries = db.collection<DeliveryDoc>(Collections.DELIVERIES);
        const count = await db.command({ explain: { aggregate: Collections.DELIVERIES, pipeline: [{ $match: statusCountFilter('pending') }, { $group: { _id: 1, n: { $sum: 1 } } }], cursor: {} } });
        expect(stagesOf(count)).to.not.include('COLLSCAN');
        expect(stagesOf(count)).to.not.include('FETCH');
        const log = await deliveries.find(deliveryListFilter({ endpointId: 'ep_1' })).sort(DELIVERY_LIST_SORT).limit(5).explain('queryPlanner');
        expect(stagesOf(log.queryPlanner)).to.not.include('SORT');
      });
    });

    describe('claims and settles', () => {
      it('claims by walking endpoints once more than 1 000 are due, and a settle drops the claim id', async () => {
        const store = await openMongoStore();
        await store.createEndpoint(endpoint('ep_1', clock.now()));
        await store.createEndpoint(endpoint('ep_2', clock.now()));
        await backlog(store, 900, 'ep_1');
        await backlog(store, 200, 'ep_2');
        await store.acquireLeases({ owner: 'a', slots: [0, 1, 2, 3, 4, 5, 6, 7], now: clock.now(), leaseMs: 60_000 });
        const jobs = await store.claimDue({ owner: 'a', now: clock.now(), limit: 10, perEndpointLimit: 3, skipEndpointIds: [] });
        expect(jobs).to.have.length(6);
        expect(new Set(jobs.map((j) => j.delivery.endpointId))).to.deep.equal(new Set(['ep_1', 'ep_2']));
        const [job] = jobs;
        const attempt = { number: 1, startedAt: clock.now(), durationMs: 1, outcome: { kind: 'timeout', timeoutMs: 1 } as const, error: 'timeout' };
        await store.settle([{ kind: 'retry', deliveryId: job!.delivery.id, epoch: job!.delivery.leaseEpoch, attempt, nextAttemptAt: clock.now() + 1_000 }], clock.now());
        const doc = await db.collection<DeliveryDoc>(Collections.DELIVERIES).findOne({ _id: job!.delivery.id });
        expect(doc).to.not.have.property('claimId');
      });
    });

    describe('deleting an endpoint', () => {
      it('cancels a backlog of several chunks outside any transaction', async () => {
        const store = await openMongoStore();
        await store.createEndpoint(endpoint('ep_1', clock.now()));
        await backlog(store, 1_201);
        expect(await store.deleteEndpoint('ep_1', clock.now())).to.equal(true);
        const deliveries = db.collection<DeliveryDoc>(Collections.DELIVERIES);
        expect(await deliveries.countDocuments({ endpointId: 'ep_1', status: 'cancelled' })).to.equal(1_201);
        expect(await deliveries.countDocuments({ endpointId: 'ep_1', status: { $in: ['pending', 'in_flight'] } })).to.equal(0);
      });

      it('waits for a replay that touched the endpoint, then cancels the delivery it made pending', async () => {
        const store = await openMongoStore();
        await store.createEndpoint(endpoint('ep_1', clock.now()));
        const [id] = await backlog(store, 1);
        const deliveries = db.collection<DeliveryDoc>(Collections.DELIVERIES);
        await deliveries.updateOne({ _id: id! }, { $set: { status: 'dead' } });
        // A replay's transaction, held open: its fence on the endpoint, its delivery back to pending.
        const session = client.startSession();
        try {
          session.startTransaction({ readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' } });
          await db.collection<EndpointDoc>(Collections.ENDPOINTS).updateMany(replayFenceFilter(['ep_1']), REPLAY_FENCE_UPDATE, { session });
          await deliveries.updateOne(replayDeliveryFilter(id!), replayDeliveryUpdate(clock.now()), { session });
          const deleting = store.deleteEndpoint('ep_1', clock.now());
          await session.commitTransaction();
          expect(await deleting).to.equal(true);
        } finally {
          await session.endSession();
        }
        expect((await deliveries.findOne({ _id: id! }))?.status).to.equal('cancelled');
      });
    });

    describe('change feed keys and own writes', () => {
      it('keeps the resume token under the host name by default, and does not signal the store\'s own inserts', async () => {
        const { store, calls } = await watchedStore();
        const called = calls.called();
        await store.appendEvents([{ id: 'evt_own', tenantId: 'acme', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
        await publishFromProducer('evt_theirs');
        await called;
        // Changes arrive in commit order: had the store's own insert passed, it would have been the first call.
        expect(calls.count()).to.equal(1);
        await store.close();
        const stored = await db.collection<MetaDoc>(Collections.META).findOne({ _id: `${MetaKeys.RESUME_TOKEN_PREFIX}${hostname()}` });
        expect(stored?.token).to.be.an('object');
      });
    });

    describe('schema', () => {
      it('creates the TTL indexes with the retention, and follows a changed retention', async () => {
        const store = await openMongoStore({ retentionMs: 30 * DAY });
        const ttl = async (collection: string) =>
          (await db.collection(collection).indexes()).find((i) => i.expireAfterSeconds !== undefined)?.expireAfterSeconds;
        expect(await ttl(Collections.ATTEMPTS)).to.equal(30 * 24 * 3600);
        expect(await ttl(Collections.DEAD_LETTERS)).to.equal(30 * 24 * 3600);
        await store.close();
        await openMongoStore({ retentionMs: 90 * DAY });
        expect(await ttl(Collections.ATTEMPTS)).to.equal(90 * 24 * 3600);
        expect(await ttl(Collections.DEAD_LETTERS)).to.equal(90 * 24 * 3600);
      });

      it('reports the server it checked', async () => {
        const store = await openMongoStore();
        expect(store.serverSupport?.topology).to.equal('replica-set');
        expect(store.serverSupport?.maxWireVersion).to.be.at.least(9);
      });

      it('drops the indexes a longer one now serves', async () => {
        await db.collection(Collections.DELIVERIES).createIndex({ endpointId: 1, createdAt: -1 }, { name: 'deliveries_endpoint' });
        await openMongoStore();
        const names = (await db.collection(Collections.DELIVERIES).indexes()).map((i) => i.name);
        expect(names).to.not.include('deliveries_endpoint');
        expect(names).to.include('deliveries_endpoint_log').and.include('deliveries_claim_walk');
      });
    });
  });

  describe('a server that is not a replica set', () => {
    it('fails init() with a HERALD_STORE error that says a replica set is needed', async function () {
      this.timeout(60_000);
      const standalone = await startStandalone();
      try {
        const store = new MongoStore({ uri: standalone.getUri('herald'), clock: new ManualClock(), serverSelectionTimeoutMs: 5_000 });
        const error = await rejection(store.init({ slotCount: 8 }));
        await store.close();
        expect(error.code).to.equal(ErrorCode.STORE);
        expect(error.message).to.include('not part of a replica set').and.include('--replSet');
      } finally {
        await standalone.stop();
      }
    });
  });
});
