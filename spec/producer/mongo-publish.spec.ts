/**
 * The MongoDB producer. Validation happens before anything reaches the
 * database, so it is tested here with stand-ins for the session and the
 * database; writing inside a real transaction is tested in
 * spec/store/mongo.spec.ts and below, against a replica set when one is available.
 */
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import type { ClientSession, Db } from 'mongodb';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import type { HeraldError } from '../../lib/errors.ts';
import { publish } from '../../lib/producer/mongo-publish.ts';
import { MongoStore } from '../../lib/store/mongo/mongo-store.ts';
import { dropDatabase, freshDbName, replicaSetOrSkip } from '../store/mongo/mongod.ts';

async function rejection(promise: Promise<unknown>): Promise<HeraldError> {
  try {
    await promise;
  } catch (error) {
    if (isHeraldError(error)) return error;
    throw error;
  }
  throw new Error('expected the promise to reject');
}

/** A session and a database that fail the test if anything touches them. */
const untouchable = new Proxy({}, {
  get(_target, key) {
    if (key === 'then') return undefined;
    throw new Error(`touched the database (${String(key)}) before validating`);
  },
});
const session = untouchable as ClientSession;
const db = { collection: () => untouchable } as unknown as Db;

describe('publish (MongoDB)', () => {
  context('when an event is malformed', () => {
    it('rejects it naming the field, before touching the database', async () => {
      const error = await rejection(publish(session, { tenantId: 'acme', type: 'bad type!', payload: {} }, { db }));
      expect(error.code).to.equal(ErrorCode.INVALID_INPUT);
      expect(error.message).to.match(/^type: /);
    });

    it('rejects an ordering key longer than 200 characters, naming orderingKey', async () => {
      const error = await rejection(publish(session, { tenantId: 'acme', type: 't', payload: {}, orderingKey: 'k'.repeat(201) }, { db }));
      expect(error.code).to.equal(ErrorCode.INVALID_INPUT);
      expect(error.message).to.match(/^orderingKey: must be at most 200 characters/);
    });

    it('names the index of the bad event in a batch, and writes none of it', async () => {
      const error = await rejection(
        publish(session, [{ tenantId: 'acme', type: 'ok', payload: {} }, { tenantId: 'acme', type: 'ok' } as never], { db }),
      );
      expect(error.message).to.match(/^\[1\]\.payload: /);
    });

    it('refuses an oversized payload with HERALD_PAYLOAD_TOO_LARGE', async () => {
      const error = await rejection(publish(session, { tenantId: 'acme', type: 't', payload: 'x'.repeat(100) }, { db, maxPayloadBytes: 10 }));
      expect(error.code).to.equal(ErrorCode.PAYLOAD_TOO_LARGE);
    });
  });

  context('when the outbox is not given properly', () => {
    it('names the option', async () => {
      const cases: Array<[unknown, string]> = [
        [{}, 'client'],
        [{ client: { db: () => db }, dbName: '' }, 'dbName'],
        [{ db: {} }, 'db'],
      ];
      for (const [options, field] of cases) {
        const error = await rejection(publish(session, { tenantId: 'acme', type: 't', payload: {} }, options as never));
        expect(error.message, field).to.match(new RegExp(`^${field}: `));
      }
    });
  });

  describe('against a replica set', () => {
    let uri: string;
    let client: MongoClient;
    let dbName: string;
    let store: MongoStore;
    const clock = new ManualClock();

    before(async function () {
      uri = await replicaSetOrSkip(this);
      client = new MongoClient(uri);
      await client.connect();
    });

    after(async () => {
      await client?.close();
    });

    beforeEach(async () => {
      dbName = freshDbName('herald_publish');
      store = new MongoStore({ uri, dbName, clock, retentionMs: null });
      await store.init({ slotCount: 8 });
      await store.createEndpoint({
        id: 'ep_1', tenantId: 'acme', url: 'https://hooks.example.com/1', description: '', eventTypes: [], retry: { preset: 'default' },
        timeoutMs: 1_000, mode: 'at-least-once', ordering: 'none', concurrency: 1, status: 'enabled', disabledReason: null, failingSince: null,
        secrets: [], createdAt: clock.now(), updatedAt: clock.now(),
      });
    });

    afterEach(async () => {
      await store.close();
      await dropDatabase(uri, dbName);
    });

    it('commits a batch atomically in its own transaction when the session has none', async () => {
      const s = client.startSession();
      try {
        const stored = await publish(s, [
          { id: 'evt_a', tenantId: 'acme', type: 't', payload: { n: 1 } },
          { id: 'evt_b', tenantId: 'acme', type: 't', payload: { n: 2 }, endpointId: 'ep_1', orderingKey: 'order-9' },
        ], { client, dbName, clock });
        expect(stored.map((e) => [e.id, e.endpointId, e.payload])).to.deep.equal([['evt_a', null, '{"n":1}'], ['evt_b', 'ep_1', '{"n":2}']]);
        expect((await store.getEvent('evt_b'))?.orderingKey).to.equal('order-9');
        expect((await store.unfannedEvents(10)).map((e) => e.id)).to.deep.equal(['evt_a', 'evt_b']);

        const error = await rejection(publish(s, [
          { id: 'evt_c', tenantId: 'acme', type: 't', payload: {} },
          { tenantId: 'acme', type: 't', payload: {}, endpointId: 'ep_elsewhere' },
        ], { client, dbName, clock }));
        expect(error.code).to.equal(ErrorCode.NOT_FOUND);
        expect(await store.getEvent('evt_c')).to.equal(undefined);
      } finally {
        await s.endSession();
      }
    });

    it('refuses an id already used by another tenant', async () => {
      await store.appendEvents([{ id: 'evt_x', tenantId: 'globex', type: 't', payload: '{}', createdAt: clock.now(), endpointId: null, orderingKey: null }]);
      const s = client.startSession();
      try {
        const error = await rejection(publish(s, { id: 'evt_x', tenantId: 'acme', type: 't', payload: {} }, { client, dbName }));
        expect(error.code).to.equal(ErrorCode.CONFLICT);
      } finally {
        await s.endSession();
      }
    });
  });
});
