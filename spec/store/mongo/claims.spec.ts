import { expect } from 'chai';
import { MongoNetworkError, ObjectId } from 'mongodb';
import type { Filter } from 'mongodb';
import { slotOf } from '../../../lib/ids.ts';
import { claimDue, claimForEndpoints, UnsentClaims } from '../../../lib/store/mongo/claims.ts';
import {
  busyEndpointsPipeline,
  CANDIDATE_PROJECTION,
  claimableFilter,
  claimedFilter,
  CLAIM_SCAN_MAX,
  DUE_ORDER,
  dueCountFilter,
  endpointDueFilter,
  giveBackFilter,
  giveBackUpdate,
  orphansFilter,
} from '../../../lib/store/mongo/queries.ts';
import { LINE_HEAD_PROJECTION, LINE_ORDER, lineHeadFilter, pendingLinesPipeline } from '../../../lib/store/mongo/line-heads.ts';
import type { DeliveryDoc, EventDoc } from '../../../lib/store/mongo/schema.ts';
import type { ClaimRequest } from '../../../lib/store/port.ts';
import { loadMongoDriver } from '../../../lib/store/mongo/driver.ts';
import { fakeDb } from './fake-db.ts';
import type { FakeDb } from './fake-db.ts';

const NOW = 1_000_000;
const OWNER = 'node-a';
const SLOTS = 8;
const SLOT = slotOf('ep_1', SLOTS);
const EPOCH = 3;

function delivery(id: string, endpointId = 'ep_1', overrides: Partial<DeliveryDoc> = {}): DeliveryDoc {
  return {
    _id: id, eventId: `evt_${id}`, endpointId, tenantId: 'acme', eventType: 't', slot: slotOf(endpointId, SLOTS), status: 'in_flight',
    attempts: 0, round: 0, nextAttemptAt: NOW, leaseEpoch: EPOCH, lastError: null, createdAt: NOW, updatedAt: NOW, deliveredAt: null,
    ...overrides,
  };
}

function event(id: string): EventDoc {
  return { _id: id, tenantId: 'acme', type: 't', payload: '{}', createdAt: NOW, endpointId: null, fannedOut: true, fannedOutAt: NOW, ord: new ObjectId() };
}

const isReadBack = (filter: unknown): filter is { claimId: ObjectId } => typeof filter === 'object' && filter !== null && 'claimId' in filter;

/** A store where ep_1 (enabled, in a slot node-a holds at EPOCH) has `due` due deliveries, and a claim wins them all. */
function world(due: readonly string[] = ['dlv_1', 'dlv_2']): FakeDb {
  const fake = fakeDb();
  fake.c.leases.on('find', () => [{ _id: SLOT, owner: OWNER, until: NOW + 1_000, epoch: EPOCH }]);
  fake.c.endpoints.on('find', () => [{ _id: 'ep_1' }]);
  fake.c.events.on('find', () => due.map((id) => event(`evt_${id}`)));
  fake.c.deliveries.on('find', (filter: unknown) =>
    isReadBack(filter)
      ? due.map((id) => delivery(id))
      : due.map((id) => ({ _id: id, endpointId: 'ep_1', slot: SLOT, nextAttemptAt: NOW })),
  );
  return fake;
}

const refill = (fake: FakeDb, unsent = new UnsentClaims()) =>
  claimForEndpoints(fake.db, OWNER, NOW, [{ endpointId: 'ep_1', limit: 5 }], SLOTS, unsent);

function request(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { owner: OWNER, now: NOW, limit: 10, perEndpointLimit: 2, skipEndpointIds: [], ...overrides };
}

/** The claim id the bulk write stamped. */
function stampedClaimId(fake: FakeDb): ObjectId {
  const [bulk] = fake.callsTo('deliveries', 'bulkWrite');
  const ops = bulk!.args[0] as Array<{ updateOne: { update: { $set: { claimId: ObjectId } } } }>;
  return ops[0]!.updateOne.update.$set.claimId;
}

describe('MongoDB claims', () => {
  // The adapter takes the driver's classes from the loaded driver, as after MongoStore.init().
  before(() => loadMongoDriver({ key: 'store', value: 'mongodb://spec' }));

  context('when a claim succeeds', () => {
    it('reads back only what is still in flight under its claim, and hands it out with its events', async () => {
      const fake = world();
      const jobs = await refill(fake);
      expect(jobs.map((j) => j.delivery.id)).to.deep.equal(['dlv_1', 'dlv_2']);
      const claimId = stampedClaimId(fake);
      const readBack = fake.callsTo('deliveries', 'find').find((call) => isReadBack(call.args[0]));
      expect(readBack?.args[0]).to.deep.equal(claimedFilter(claimId));
      expect(claimedFilter(claimId)).to.deep.equal({ claimId, status: 'in_flight' });
      expect(fake.callsTo('deliveries', 'updateMany'), 'nothing given back').to.deep.equal([]);
    });

    it("asks for each endpoint's first due deliveries in the index's order, covered, stopping at the limit", async () => {
      const fake = world();
      await refill(fake);
      const [candidates] = fake.callsTo('deliveries', 'find');
      expect(candidates!.args[0]).to.deep.equal(endpointDueFilter('ep_1', { slot: SLOT, epoch: EPOCH }, NOW));
      expect(candidates!.args[1]).to.deep.equal({ projection: CANDIDATE_PROJECTION });
      expect(candidates!.args[2]).to.deep.equal({ sort: DUE_ORDER, limit: 5 });
    });
  });

  context('when the read-back fails after the bulk write (an election, the network)', () => {
    it('gives the whole claim back at once, and once more before the next claim', async () => {
      const fake = world();
      fake.c.deliveries.on('find', (filter: unknown) => {
        if (isReadBack(filter)) throw new MongoNetworkError('connection reset');
        return [{ _id: 'dlv_1', endpointId: 'ep_1', slot: SLOT, nextAttemptAt: NOW }];
      });
      const unsent = new UnsentClaims();
      const error = await refill(fake, unsent).then(() => undefined, (e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      const claimId = stampedClaimId(fake);
      const givenBack = fake.callsTo('deliveries', 'updateMany');
      expect(givenBack.map((call) => call.args.slice(0, 2))).to.deep.equal([[giveBackFilter(claimId), giveBackUpdate(NOW)]]);
      expect(giveBackFilter(claimId)).to.deep.equal({ claimId, status: 'in_flight' });
      expect(giveBackUpdate(NOW)).to.deep.equal({ $set: { status: 'pending', updatedAt: NOW }, $unset: { claimId: '' } });
      expect(unsent.size).to.equal(1);

      const next = world([]);
      await refill(next, unsent);
      expect(next.calls[0]).to.deep.include({ collection: 'deliveries', op: 'updateMany' });
      expect(next.calls[0]!.args[0]).to.deep.equal(giveBackFilter(claimId));
      expect(unsent.size).to.equal(0);
    });

    it('keeps a claim whose give-back failed too, and gives it back at a later claim', async () => {
      const fake = world();
      fake.c.events.on('find', () => {
        throw new MongoNetworkError('down');
      });
      fake.c.deliveries.on('updateMany', () => {
        throw new MongoNetworkError('still down');
      });
      const unsent = new UnsentClaims();
      await refill(fake, unsent).catch(() => undefined);
      expect(unsent.size).to.equal(1);
      const stillDown = world([]);
      stillDown.c.deliveries.on('updateMany', () => {
        throw new MongoNetworkError('still down');
      });
      await refill(stillDown, unsent);
      expect(unsent.size).to.equal(1);
      const back = world([]);
      await refill(back, unsent);
      expect(back.callsTo('deliveries', 'updateMany')).to.have.length(1);
      expect(unsent.size).to.equal(0);
    });

    it('gives the claim back when the bulk write itself fails (it may have been applied in part)', async () => {
      const fake = world();
      fake.c.deliveries.on('bulkWrite', () => {
        throw new MongoNetworkError('reset during the write');
      });
      const unsent = new UnsentClaims();
      await refill(fake, unsent).catch(() => undefined);
      expect(fake.callsTo('deliveries', 'updateMany')).to.have.length(1);
      expect(unsent.size).to.equal(1);
    });
  });

  context('when the slot changed hands between reading the lease and the bulk write', () => {
    it('gives back what it took in that slot before reading back, so the stale owner sends nothing', async () => {
      const fake = world();
      let leaseReads = 0;
      fake.c.leases.on('find', () => {
        leaseReads++;
        // First read: node-a holds the slot. After the bulk write: node-b took it, epoch + 1.
        return [{ _id: SLOT, owner: leaseReads === 1 ? OWNER : 'node-b', until: NOW + 1_000, epoch: leaseReads === 1 ? EPOCH : EPOCH + 1 }];
      });
      fake.c.deliveries.on('find', (filter: unknown) =>
        isReadBack(filter) ? [] : [{ _id: 'dlv_1', endpointId: 'ep_1', slot: SLOT, nextAttemptAt: NOW }],
      );
      const jobs = await refill(fake);
      expect(jobs).to.deep.equal([]);
      const claimId = stampedClaimId(fake);
      const ops = fake.calls.filter((call) => call.collection === 'deliveries').map((call) => call.op);
      expect(ops).to.deep.equal(['find', 'bulkWrite', 'updateMany', 'find']);
      expect(fake.callsTo('deliveries', 'updateMany')[0]!.args.slice(0, 2)).to.deep.equal([giveBackFilter(claimId, [SLOT]), giveBackUpdate(NOW)]);
    });

    it('reads the leases once more only when the bulk write claimed something', async () => {
      const fake = world();
      fake.c.deliveries.on('bulkWrite', () => ({ matchedCount: 0, modifiedCount: 0 }));
      expect(await refill(fake)).to.deep.equal([]);
      expect(fake.callsTo('leases', 'find')).to.have.length(1);
    });
  });

  describe('FIFO endpoints', () => {
    /** A store where node-a holds every slot at EPOCH, ep_f is FIFO and ep_1 is not; a claim wins what it asks for. */
    function fifoWorld(): FakeDb {
      const fake = fakeDb();
      fake.c.leases.on('find', () => Array.from({ length: SLOTS }, (_, slot) => ({ _id: slot, owner: OWNER, until: NOW + 1_000, epoch: EPOCH })));
      fake.c.endpoints.on('find', (filter: { _id: { $in: string[] } }) =>
        filter._id.$in.map((id) => (id === 'ep_1' ? { _id: id } : { _id: id, ordering: 'fifo' })),
      );
      fake.c.events.on('find', (filter: { _id: { $in: string[] } }) => filter._id.$in.map(event));
      return fake;
    }

    /** The ids the bulk write tried to claim, in its order. */
    const attempted = (fake: FakeDb): string[] => {
      const [bulk] = fake.callsTo('deliveries', 'bulkWrite');
      return bulk === undefined ? [] : (bulk.args[0] as Array<{ updateOne: { filter: { _id: string } } }>).map((op) => op.updateOne.filter._id);
    };
    /** The read-back answers every delivery the bulk write named, in flight. */
    const readBack = (fake: FakeDb) => attempted(fake).map((id) => delivery(id, id.startsWith('dlv_1') ? 'ep_1' : 'ep_f'));
    const headDoc = (id: string, overrides: Partial<DeliveryDoc> = {}) =>
      ({ _id: id, endpointId: 'ep_f', slot: slotOf('ep_f', SLOTS), status: 'pending', nextAttemptAt: NOW - 1, ...overrides });

    context('when a refill asks for a FIFO endpoint', () => {
      it('walks its lines with a pending delivery, reads each head, and claims only the pending due ones, earliest first', async () => {
        const fake = fifoWorld();
        const heads: Record<string, object> = {
          a: headDoc('dlv_a1', { nextAttemptAt: NOW - 1 }),
          null: headDoc('dlv_n1', { status: 'in_flight' }),
          b: headDoc('dlv_b1', { nextAttemptAt: NOW - 10 }),
          c: headDoc('dlv_c1', { nextAttemptAt: NOW + 1 }),
        };
        fake.c.deliveries.on('aggregate', () => [{ _id: 'a' }, { _id: null }, { _id: 'b' }, { _id: 'c' }]);
        fake.c.deliveries.on('findOne', (filter: { orderingKey: string | null }) => heads[String(filter.orderingKey)]);
        fake.c.deliveries.on('find', (filter: unknown) => (isReadBack(filter) ? readBack(fake) : []));
        const jobs = await claimForEndpoints(fake.db, OWNER, NOW, [{ endpointId: 'ep_f', limit: 5 }], SLOTS, new UnsentClaims());

        expect(attempted(fake)).to.deep.equal(['dlv_b1', 'dlv_a1']);
        expect(jobs.map((j) => j.delivery.id)).to.deep.equal(['dlv_a1', 'dlv_b1']);
        expect(fake.callsTo('deliveries', 'aggregate').map((call) => call.args[0])).to.deep.equal([pendingLinesPipeline('ep_f')]);
        const reads = fake.callsTo('deliveries', 'findOne');
        expect(reads.map((call) => call.args[0])).to.deep.equal(
          ['a', null, 'b', 'c'].map((orderingKey) => lineHeadFilter({ endpointId: 'ep_f', orderingKey })),
        );
        expect(reads.every((call) => JSON.stringify(call.args[1]) === JSON.stringify({ sort: LINE_ORDER, projection: LINE_HEAD_PROJECTION }))).to.equal(true);
        // Not its first due deliveries: those may all wait behind the heads.
        expect(fake.callsTo('deliveries', 'find').filter((call) => !isReadBack(call.args[0]))).to.deep.equal([]);
      });

      it('takes at most the limit of heads', async () => {
        const fake = fifoWorld();
        fake.c.deliveries.on('aggregate', () => [{ _id: 'a' }, { _id: 'b' }]);
        fake.c.deliveries.on('findOne', (filter: { orderingKey: string }) => headDoc(`dlv_${filter.orderingKey}1`));
        fake.c.deliveries.on('find', (filter: unknown) => (isReadBack(filter) ? readBack(fake) : []));
        await claimForEndpoints(fake.db, OWNER, NOW, [{ endpointId: 'ep_f', limit: 1 }], SLOTS, new UnsentClaims());
        expect(attempted(fake)).to.deep.equal(['dlv_a1']);
      });
    });

    context(`when at most ${CLAIM_SCAN_MAX} deliveries are due`, () => {
      it('keeps of a FIFO endpoint\'s candidates only its lines\' heads, reading their keys and each line\'s head once', async () => {
        const fake = fifoWorld();
        const candidates = [
          { _id: 'dlv_1a', endpointId: 'ep_1', slot: slotOf('ep_1', SLOTS), nextAttemptAt: NOW - 3 },
          { _id: 'dlv_1b', endpointId: 'ep_1', slot: slotOf('ep_1', SLOTS), nextAttemptAt: NOW - 2 },
          { _id: 'dlv_k1', endpointId: 'ep_f', slot: slotOf('ep_f', SLOTS), nextAttemptAt: NOW - 9 },
          { _id: 'dlv_k2', endpointId: 'ep_f', slot: slotOf('ep_f', SLOTS), nextAttemptAt: NOW - 8 },
          { _id: 'dlv_j2', endpointId: 'ep_f', slot: slotOf('ep_f', SLOTS), nextAttemptAt: NOW - 7 },
        ];
        const keys: Record<string, string> = { dlv_k1: 'k', dlv_k2: 'k', dlv_j2: 'j' };
        fake.c.deliveries.on('countDocuments', () => 5);
        fake.c.deliveries.on('find', (filter: { _id?: { $in: string[] } }) => {
          if (isReadBack(filter)) return readBack(fake);
          if (filter._id !== undefined) return filter._id.$in.map((id) => ({ _id: id, endpointId: 'ep_f', orderingKey: keys[id] }));
          return candidates;
        });
        // Line j's head is dlv_j1, in flight: dlv_j2 waits behind it.
        fake.c.deliveries.on('findOne', (filter: { orderingKey: string }) =>
          filter.orderingKey === 'k' ? headDoc('dlv_k1') : headDoc('dlv_j1', { status: 'in_flight' }),
        );
        await claimDue(fake.db, request({ perEndpointLimit: 10 }), 10, 10, new UnsentClaims());

        expect(attempted(fake)).to.deep.equal(['dlv_k1', 'dlv_1a', 'dlv_1b']);
        const keyRead = fake.callsTo('deliveries', 'find')[1]!;
        expect(keyRead.args[0]).to.deep.equal({ _id: { $in: ['dlv_k1', 'dlv_k2', 'dlv_j2'] } });
        expect(fake.callsTo('deliveries', 'findOne').map((call) => call.args[0])).to.deep.equal([
          lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'k' }),
          lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'j' }),
        ]);
      });

      it('reads no key and no head when no candidate is a FIFO endpoint\'s', async () => {
        const fake = world();
        await claimDue(fake.db, request(), 10, 2, new UnsentClaims());
        expect(fake.callsTo('deliveries', 'findOne')).to.deep.equal([]);
        expect(fake.callsTo('deliveries', 'find')).to.have.length(2);
        expect(fake.callsTo('endpoints', 'find')[0]!.args[1]).to.deep.equal({ projection: { _id: 1, ordering: 1 } });
      });
    });

    context(`when more than ${CLAIM_SCAN_MAX} deliveries are due`, () => {
      it('gives a FIFO endpoint whose lines are all held no place among the limit earliest, so the others are still claimed', async () => {
        const fake = fifoWorld();
        fake.c.deliveries.on('countDocuments', () => CLAIM_SCAN_MAX + 1);
        fake.c.deliveries.on('aggregate', (pipeline: Array<{ $match: { slot?: number; endpointId?: string } }>) => {
          const match = pipeline[0]!.$match;
          if (match.endpointId === 'ep_f') return [{ _id: 'k' }];
          const busy = [
            { _id: 'ep_f', first: NOW - 100 },
            { _id: 'ep_1', first: NOW - 50 },
          ];
          return busy.filter((b) => slotOf(b._id, SLOTS) === match.slot);
        });
        fake.c.deliveries.on('findOne', () => headDoc('dlv_k1', { status: 'in_flight' }));
        fake.c.deliveries.on('find', (filter: Filter<DeliveryDoc>) => {
          if (isReadBack(filter)) return readBack(fake);
          if ('endpointId' in filter) return [{ _id: 'dlv_1a', endpointId: 'ep_1', slot: filter.slot, nextAttemptAt: NOW - 50 }];
          return [];
        });
        await claimDue(fake.db, request({ limit: 1 }), 1, 2, new UnsentClaims());

        expect(attempted(fake)).to.deep.equal(['dlv_1a']);
        const firstDueReads = fake.callsTo('deliveries', 'find').filter((call) => 'endpointId' in (call.args[0] as object));
        expect(firstDueReads.map((call) => (call.args[0] as { endpointId: string }).endpointId)).to.deep.equal(['ep_1']);
        expect(fake.callsTo('deliveries', 'aggregate').map((call) => call.args[0])).to.deep.include(pendingLinesPipeline('ep_f'));
      });

      it('keeps of a FIFO endpoint\'s orphans only its lines\' heads', async () => {
        const fake = fifoWorld();
        fake.c.deliveries.on('countDocuments', () => CLAIM_SCAN_MAX + 1);
        const orphans = ['dlv_o1', 'dlv_o2'].map((id) => ({ _id: id, endpointId: 'ep_f', slot: slotOf('ep_f', SLOTS), nextAttemptAt: NOW - 1 }));
        fake.c.deliveries.on('find', (filter: { _id?: { $in: string[] } }) => {
          if (isReadBack(filter)) return readBack(fake);
          if (filter._id !== undefined) return filter._id.$in.map((id) => ({ _id: id, endpointId: 'ep_f', orderingKey: 'k' }));
          return orphans;
        });
        // Switched to FIFO with two in flight in one line: only the first goes out again.
        fake.c.deliveries.on('findOne', () => headDoc('dlv_o1', { status: 'in_flight' }));
        await claimDue(fake.db, request(), 10, 10, new UnsentClaims());
        expect(attempted(fake)).to.deep.equal(['dlv_o1']);
      });
    });
  });

  describe('claimDue', () => {
    context('when an orphan (in flight under an older epoch) is among the candidates', () => {
      it('hands it out as taken over (resumed), and the pending one beside it as fresh', async () => {
        const fake = world();
        fake.c.deliveries.on('countDocuments', () => 1);
        fake.c.deliveries.on('find', (filter: unknown) =>
          isReadBack(filter)
            ? [delivery('dlv_1'), delivery('dlv_2')]
            : [
                { _id: 'dlv_1', endpointId: 'ep_1', slot: SLOT, nextAttemptAt: NOW - 5, status: 'in_flight' },
                { _id: 'dlv_2', endpointId: 'ep_1', slot: SLOT, nextAttemptAt: NOW, status: 'pending' },
              ],
        );
        const jobs = await claimDue(fake.db, request(), 10, 2, new UnsentClaims());
        expect(jobs.map((j) => [j.delivery.id, j.resumed ?? false])).to.deep.equal([['dlv_1', true], ['dlv_2', false]]);
      });
    });

    context(`when at most ${CLAIM_SCAN_MAX} deliveries are due`, () => {
      it('reads every due candidate and orphan of the owned slots in one query, and groups nothing', async () => {
        const fake = world();
        fake.c.deliveries.on('countDocuments', () => CLAIM_SCAN_MAX);
        const jobs = await claimDue(fake.db, request(), 10, 2, new UnsentClaims());
        expect(jobs).to.have.length(2);
        const [count] = fake.callsTo('deliveries', 'countDocuments');
        expect(count!.args).to.deep.equal([dueCountFilter(NOW), { limit: CLAIM_SCAN_MAX + 1 }]);
        const [candidates] = fake.callsTo('deliveries', 'find');
        expect(candidates!.args[0]).to.deep.equal(claimableFilter([{ slot: SLOT, epoch: EPOCH }], request()));
        expect(candidates!.args[1]).to.deep.equal({ projection: CANDIDATE_PROJECTION });
        expect(fake.callsTo('deliveries', 'aggregate')).to.deep.equal([]);
      });
    });

    context(`when more than ${CLAIM_SCAN_MAX} deliveries are due`, () => {
      it('walks each owned slot\'s busy endpoints, then reads the first few due of only those that can contribute', async () => {
        const fake = fakeDb();
        const slotB = slotOf('ep_b', SLOTS);
        const owned = [
          { _id: SLOT, owner: OWNER, until: NOW + 1_000, epoch: EPOCH },
          ...(slotB === SLOT ? [] : [{ _id: slotB, owner: OWNER, until: NOW + 1_000, epoch: EPOCH }]),
        ];
        fake.c.leases.on('find', () => owned);
        fake.c.deliveries.on('countDocuments', () => CLAIM_SCAN_MAX + 1);
        fake.c.deliveries.on('aggregate', (pipeline: Array<{ $match?: { slot: number } }>) => {
          const slot = pipeline[0]!.$match!.slot;
          const busy = [
            { _id: 'ep_1', first: NOW - 50 },
            { _id: 'ep_b', first: NOW - 10 },
            { _id: 'ep_later', first: NOW + 60_000 },
          ];
          return busy.filter((b) => slotOf(b._id, SLOTS) === slot || (b._id === 'ep_later' && slot === SLOT));
        });
        fake.c.endpoints.on('find', (filter: { _id: { $in: string[] } }) => filter._id.$in.map((id) => ({ _id: id })));
        fake.c.deliveries.on('find', (filter: Filter<DeliveryDoc>) => {
          if (isReadBack(filter)) return [];
          if ('endpointId' in filter) return [{ _id: `dlv_${String(filter.endpointId)}`, endpointId: filter.endpointId, slot: filter.slot, nextAttemptAt: NOW - 50 }];
          return [];
        });
        await claimDue(fake.db, request({ limit: 1 }), 1, 2, new UnsentClaims());

        const aggregates = fake.callsTo('deliveries', 'aggregate').map((call) => call.args[0]);
        expect(aggregates).to.deep.equal(owned.map((lease) => busyEndpointsPipeline(lease._id)));
        const finds = fake.callsTo('deliveries', 'find').filter((call) => !isReadBack(call.args[0]));
        const orphanQuery = finds.find((call) => !('endpointId' in (call.args[0] as object)));
        expect(orphanQuery?.args[0]).to.deep.equal(orphansFilter(owned.map((l) => ({ slot: l._id, epoch: l.epoch }))));
        // A limit of 1: only the endpoint whose earliest due comes first is read; not yet due ones never.
        const perEndpoint = finds.filter((call) => 'endpointId' in (call.args[0] as object));
        expect(perEndpoint.map((call) => (call.args[0] as { endpointId: string }).endpointId)).to.deep.equal(['ep_1']);
        expect(perEndpoint[0]!.args[2]).to.deep.equal({ sort: DUE_ORDER, limit: 2 });
      });
    });
  });
});
