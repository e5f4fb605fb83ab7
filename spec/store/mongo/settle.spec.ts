import { expect } from 'chai';
import { ObjectId } from 'mongodb';
import { planSettle, settle } from '../../../lib/store/mongo/settle.ts';
import { settleFilter, settleUpdate } from '../../../lib/store/mongo/queries.ts';
import type { DeliveryDoc, LeaseDoc } from '../../../lib/store/mongo/schema.ts';
import type { Settlement } from '../../../lib/store/port.ts';
import { loadMongoDriver } from '../../../lib/store/mongo/driver.ts';
import { FAKE_SESSION, fakeDb } from './fake-db.ts';

const NOW = 1_000_000;
const EPOCH = 4;
const OK = { kind: 'response', status: 200, location: null, retryAfter: null, body: 'ok' } as const;
const attempt = { number: 1, startedAt: NOW - 100, durationMs: 100, outcome: OK, error: null };

function inFlight(id: string, overrides: Partial<DeliveryDoc> = {}): DeliveryDoc {
  return {
    _id: id, eventId: `evt_${id}`, endpointId: `ep_${id}`, tenantId: 'acme', eventType: 't', slot: 1, status: 'in_flight',
    attempts: 2, round: 1, nextAttemptAt: NOW, leaseEpoch: EPOCH, lastError: null, createdAt: NOW, updatedAt: NOW,
    deliveredAt: null, claimId: new ObjectId(), ...overrides,
  };
}

const LEASE: LeaseDoc = { _id: 1, owner: 'node-a', until: NOW + 1_000, epoch: EPOCH };

/** A batch of `n` settlements of every kind, over deliveries all in flight at EPOCH. */
function batch(n: number): { settlements: Settlement[]; docs: DeliveryDoc[] } {
  const settlements: Settlement[] = [];
  const docs: DeliveryDoc[] = [];
  for (let i = 0; i < n; i++) {
    const id = `dlv_${i}`;
    docs.push(inFlight(id));
    const base = { deliveryId: id, epoch: EPOCH };
    switch (i % 4) {
      case 0:
        settlements.push({ kind: 'delivered', ...base, attempt });
        break;
      case 1:
        settlements.push({ kind: 'retry', ...base, attempt: { ...attempt, error: 'HTTP 503' }, nextAttemptAt: NOW + 30 });
        break;
      case 2:
        settlements.push({ kind: 'dead', ...base, attempt: { ...attempt, error: 'HTTP 500' }, deadLetterId: `dl_${i}`, reason: 'exhausted' });
        break;
      default:
        settlements.push({ kind: 'release', ...base, nextAttemptAt: NOW + 60 });
    }
  }
  return { settlements, docs };
}

describe('MongoDB settle', () => {
  // The adapter takes the driver's classes from the loaded driver, as after MongoStore.init().
  before(() => loadMongoDriver({ key: 'store', value: 'mongodb://spec' }));

  context('when a batch of 256 settlements of every kind is written', () => {
    it('takes a fixed number of round trips in one transaction, not a few per settlement', async () => {
      const { settlements, docs } = batch(256);
      const fake = fakeDb();
      fake.c.deliveries.on('find', () => docs);
      fake.c.leases.on('find', () => [LEASE]);
      fake.c.events.on('find', (filter: { _id: { $in: string[] } }) => filter._id.$in.map((id) => ({ _id: id, payload: `{"for":"${id}"}` })));

      const result = await settle(fake.db, settlements, NOW);

      expect(result.applied).to.have.length(256);
      expect(result.fenced).to.deep.equal([]);
      expect(fake.transactions()).to.equal(1);
      expect(fake.calls.map((call) => `${call.collection}.${call.op}`)).to.deep.equal([
        'deliveries.find',
        'leases.find',
        'deliveries.bulkWrite',
        'attempts.insertMany',
        'endpoints.bulkWrite',
        'events.find',
        'deadLetters.insertMany',
      ]);
      for (const call of fake.calls) expect((call.args.find((a) => typeof a === 'object' && a !== null && 'session' in a) as { session: unknown }).session).to.equal(FAKE_SESSION);
      const [updates] = fake.callsTo('deliveries', 'bulkWrite');
      expect(updates!.args[1]).to.deep.include({ ordered: true });
      expect((updates!.args[0] as unknown[])[1]).to.deep.equal({ updateOne: { filter: settleFilter(settlements[1]!), update: settleUpdate(settlements[1]!, NOW) } });
      // Releases spend no attempt: 3 of every 4 write one, numbered after the 2 already made.
      const attempts = fake.callsTo('attempts', 'insertMany')[0]!.args[0] as Array<{ number: number; round: number }>;
      expect(attempts).to.have.length(192);
      expect(new Set(attempts.map((a) => `${a.number}/${a.round}`))).to.deep.equal(new Set(['3/1']));
      const letters = fake.callsTo('deadLetters', 'insertMany')[0]!.args[0] as Array<{ _id: string; payload: string; triage: unknown }>;
      expect(letters).to.have.length(64);
      expect(letters[0]).to.deep.include({ _id: 'dl_2', payload: '{"for":"evt_dlv_2"}', triage: { state: 'new', note: null, by: null, at: NOW } });
    });
  });

  context('when nothing in the batch is current', () => {
    it('writes nothing after its two reads', async () => {
      const fake = fakeDb();
      fake.c.deliveries.on('find', () => [inFlight('dlv_1', { leaseEpoch: EPOCH - 1 })]);
      fake.c.leases.on('find', () => [LEASE]);
      const result = await settle(fake.db, [{ kind: 'delivered', deliveryId: 'dlv_1', epoch: EPOCH - 1, attempt }], NOW);
      expect(result).to.deep.equal({ applied: [], fenced: ['dlv_1'] });
      expect(fake.calls.map((call) => call.op)).to.deep.equal(['find', 'find']);
    });
  });

  context('when an update matches less than was worked out', () => {
    it('abandons the transaction rather than writing attempts for a settle that did not happen', async () => {
      const fake = fakeDb();
      fake.c.deliveries.on('find', () => [inFlight('dlv_1')]);
      fake.c.leases.on('find', () => [LEASE]);
      fake.c.deliveries.on('bulkWrite', () => ({ matchedCount: 0, modifiedCount: 0 }));
      const error = await settle(fake.db, [{ kind: 'delivered', deliveryId: 'dlv_1', epoch: EPOCH, attempt }], NOW).then(() => undefined, (e: unknown) => e);
      expect((error as Error).message).to.include('changed under the transaction');
      expect(fake.callsTo('attempts', 'insertMany')).to.deep.equal([]);
    });
  });

  describe('planSettle', () => {
    it('fences a second settlement of the same delivery on the first one\'s result, as the writes would', () => {
      const docs = new Map([['dlv_1', inFlight('dlv_1')]]);
      const plan = planSettle(
        [
          { kind: 'retry', deliveryId: 'dlv_1', epoch: EPOCH, attempt, nextAttemptAt: NOW + 5 },
          { kind: 'delivered', deliveryId: 'dlv_1', epoch: EPOCH, attempt },
          { kind: 'delivered', deliveryId: 'dlv_missing', epoch: EPOCH, attempt },
        ],
        docs,
        new Map([[1, LEASE]]),
        NOW,
      );
      expect(plan.applied).to.deep.equal(['dlv_1']);
      expect(plan.fenced).to.deep.equal(['dlv_1', 'dlv_missing']);
      expect(plan.updates).to.have.length(1);
      expect(docs.get('dlv_1')?.status, 'the documents read are left as they are').to.equal('in_flight');
    });

    it('marks the endpoint failing or clears it in settlement order, and counts attempts in the round', () => {
      const plan = planSettle(
        [
          { kind: 'delivered', deliveryId: 'a', epoch: EPOCH, attempt },
          { kind: 'retry', deliveryId: 'b', epoch: EPOCH, attempt: { ...attempt, startedAt: NOW - 7 }, nextAttemptAt: NOW + 5 },
        ],
        new Map([
          ['a', inFlight('a', { endpointId: 'ep' })],
          ['b', inFlight('b', { endpointId: 'ep', attempts: 5, round: 3 })],
        ]),
        new Map([[1, LEASE]]),
        NOW,
      );
      expect(plan.endpointMarks).to.deep.equal([
        { updateOne: { filter: { _id: 'ep', failingSince: { $ne: null } }, update: { $set: { failingSince: null } } } },
        { updateOne: { filter: { _id: 'ep', failingSince: null }, update: { $set: { failingSince: NOW - 7 } } } },
      ]);
      expect(plan.attempts.map((a) => [a.deliveryId, a.number, a.round])).to.deep.equal([
        ['a', 3, 1],
        ['b', 6, 3],
      ]);
    });

    it('leaves the endpoint\'s failing mark alone for a failure of the egress proxy, recording the attempt', () => {
      const proxied = { kind: 'proxy', status: 502, message: '502 from proxy http://proxy:3128: Bad Gateway' } as const;
      const plan = planSettle(
        [{ kind: 'retry', deliveryId: 'a', epoch: EPOCH, attempt: { ...attempt, outcome: proxied, error: 'proxy: 502' }, nextAttemptAt: NOW + 5 }],
        new Map([['a', inFlight('a', { endpointId: 'ep' })]]),
        new Map([[1, LEASE]]),
        NOW,
      );
      expect(plan.endpointMarks).to.deep.equal([]);
      expect(plan.attempts.map((a) => a.outcome)).to.deep.equal([proxied]);
    });
  });
});
