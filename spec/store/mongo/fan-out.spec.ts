import { expect } from 'chai';
import { appendEvents, fanOutBatch, recordFanOuts } from '../../../lib/store/mongo/fan-out.ts';
import { lineHeadFilter } from '../../../lib/store/mongo/line-heads.ts';
import { staleResumeTokensFilter } from '../../../lib/store/mongo/work-signal.ts';
import { loadMongoDriver } from '../../../lib/store/mongo/driver.ts';
import { fakeDb } from './fake-db.ts';

const NOW = 1_000_000;

describe('MongoDB outbox and fan-out', () => {
  // The adapter takes the driver's classes from the loaded driver, as after MongoStore.init().
  before(() => loadMongoDriver({ key: 'store', value: 'mongodb://spec' }));

  context('when this store inserts events and deliveries', () => {
    it('marks them with its origin, which its own change feed leaves out', async () => {
      const fake = fakeDb('store-a');
      await appendEvents(fake.db, [{ id: 'evt_1', tenantId: 'acme', type: 't', payload: '{}', createdAt: NOW, endpointId: null, orderingKey: null }]);
      const [events] = fake.callsTo('events', 'bulkWrite');
      const [op] = events!.args[0] as Array<{ updateOne: { update: { $setOnInsert: { origin: string } } } }>;
      expect(op!.updateOne.update.$setOnInsert.origin).to.equal('store-a');

      fake.c.events.on('updateMany', () => ({ matchedCount: 1, modifiedCount: 1 }));
      fake.c.deliveries.on('bulkWrite', () => ({ upsertedIds: {} }));
      fake.c.endpointSequences.on('findOneAndUpdate', () => ({ _id: 'ep_1', last: 1 }));
      const delivery = { id: 'dlv_1', eventId: 'evt_1', endpointId: 'ep_1', tenantId: 'acme', eventType: 't', slot: 0, nextAttemptAt: NOW, createdAt: NOW, orderingKey: null };
      await recordFanOuts(fake.db, fanOutBatch([{ eventId: 'evt_1', deliveries: [delivery] }], undefined), NOW);
      const [deliveries] = fake.callsTo('deliveries', 'bulkWrite');
      const [insert] = deliveries!.args[0] as Array<{ updateOne: { update: { $setOnInsert: { origin: string } } } }>;
      expect(insert!.updateOne.update.$setOnInsert.origin).to.equal('store-a');
    });
  });

  context('when deliveries are numbered', () => {
    it('adds each endpoint\'s count of new deliveries to its counter once, in endpoint order, in the transaction, and numbers them in the order given', async () => {
      const fake = fakeDb();
      fake.c.events.on('updateMany', () => ({ matchedCount: 3, modifiedCount: 3 }));
      // dlv_a1 exists (a re-planned event): it takes no number.
      fake.c.deliveries.on('find', () => [{ _id: 'dlv_a1' }]);
      fake.c.deliveries.on('bulkWrite', () => ({ upsertedIds: {} }));
      const counters: Record<string, number> = { ep_a: 4, ep_b: 0 };
      fake.c.endpointSequences.on('findOneAndUpdate', (filter: { _id: string }, update: { $inc: { last: number } }) => {
        counters[filter._id] = (counters[filter._id] ?? 0) + update.$inc.last;
        return { _id: filter._id, last: counters[filter._id] };
      });
      const delivery = (id: string, eventId: string, endpointId: string) =>
        ({ id, eventId, endpointId, tenantId: 'acme', eventType: 't', slot: 0, nextAttemptAt: NOW, createdAt: NOW, orderingKey: eventId === 'evt_2' ? 'k' : null });
      await recordFanOuts(fake.db, fanOutBatch([
        { eventId: 'evt_1', deliveries: [delivery('dlv_b1', 'evt_1', 'ep_b'), delivery('dlv_a1', 'evt_1', 'ep_a')] },
        { eventId: 'evt_2', deliveries: [delivery('dlv_b2', 'evt_2', 'ep_b'), delivery('dlv_a2', 'evt_2', 'ep_a')] },
        { eventId: 'evt_3', deliveries: [delivery('dlv_a3', 'evt_3', 'ep_a')] },
      ], undefined), NOW);
      const incs = fake.callsTo('endpointSequences', 'findOneAndUpdate');
      expect(incs.map((call) => [call.args[0], call.args[1]])).to.deep.equal([
        [{ _id: 'ep_a' }, { $inc: { last: 2 } }],
        [{ _id: 'ep_b' }, { $inc: { last: 2 } }],
      ]);
      expect(incs.every((call) => (call.args[2] as { session: unknown; upsert: boolean }).upsert === true)).to.equal(true);
      const [write] = fake.callsTo('deliveries', 'bulkWrite');
      const inserted = (write!.args[0] as Array<{ updateOne: { filter: { _id: string }; update: { $setOnInsert: { sequence: number; orderingKey: string | null } } } }>)
        .map(({ updateOne }) => [updateOne.filter._id, updateOne.update.$setOnInsert.sequence, updateOne.update.$setOnInsert.orderingKey]);
      expect(inserted).to.deep.equal([['dlv_b1', 1, null], ['dlv_b2', 2, 'k'], ['dlv_a2', 5, 'k'], ['dlv_a3', 6, null]]);
    });
  });

  context('when the caller claims deliveries of a FIFO endpoint as they are created', () => {
    const OWNER = 'node-a';
    const delivery = (id: string, endpointId: string, orderingKey: string | null) =>
      ({ id, eventId: `evt_${id}`, endpointId, tenantId: 'acme', eventType: 't', slot: 0, nextAttemptAt: NOW, createdAt: NOW, orderingKey });

    /** Fans out `planned` (each its own event), all named for claiming; `open` lines (their keys) have an open delivery. */
    async function fanOut(planned: ReturnType<typeof delivery>[], open: ReadonlyArray<string | null>) {
      const fake = fakeDb();
      fake.c.events.on('updateMany', () => ({ matchedCount: planned.length, modifiedCount: planned.length }));
      fake.c.leases.on('find', () => [{ _id: 0, owner: OWNER, until: NOW + 1_000, epoch: 4 }]);
      fake.c.endpointSequences.on('findOneAndUpdate', (filter: { _id: string }, update: { $inc: { last: number } }) => ({ _id: filter._id, last: update.$inc.last }));
      fake.c.endpoints.on('find', (filter: { _id: { $in: string[] } }) => filter._id.$in.filter((id) => id === 'ep_f').map((id) => ({ _id: id })));
      fake.c.deliveries.on('findOne', (filter: { orderingKey: string | null }) => (open.includes(filter.orderingKey) ? { _id: 'dlv_open' } : null));
      fake.c.deliveries.on('bulkWrite', (ops: Array<{ updateOne: { filter: { _id: string } } }>) => ({
        upsertedIds: Object.fromEntries(ops.map((op, i) => [i, op.updateOne.filter._id])),
      }));
      const batch = fanOutBatch(planned.map((d) => ({ eventId: d.eventId, deliveries: [d] })), { owner: OWNER, deliveryIds: new Set(planned.map((d) => d.id)) });
      const claimed = await recordFanOuts(fake.db, batch, NOW, { owner: OWNER, deliveryIds: new Set(planned.map((d) => d.id)) });
      return { fake, claimed: claimed.map((d) => d.id) };
    }

    it('inserts in flight only the first new delivery of each empty line; the rest, and every one of a line with an open delivery, pending', async () => {
      const { fake, claimed } = await fanOut(
        [delivery('a1', 'ep_f', 'a'), delivery('a2', 'ep_f', 'a'), delivery('b1', 'ep_f', 'b'), delivery('n1', 'ep_f', null), delivery('x1', 'ep_x', 'a'), delivery('x2', 'ep_x', 'a')],
        ['b'],
      );
      expect(claimed).to.deep.equal(['a1', 'n1', 'x1', 'x2']);
      // The lines of the FIFO endpoint only, read in the transaction.
      const reads = fake.callsTo('deliveries', 'findOne');
      expect(reads.map((call) => call.args[0])).to.deep.equal([
        lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'a' }),
        lineHeadFilter({ endpointId: 'ep_f', orderingKey: 'b' }),
        lineHeadFilter({ endpointId: 'ep_f', orderingKey: null }),
      ]);
      expect(reads.every((call) => (call.args[1] as { session?: unknown }).session !== undefined)).to.equal(true);
      expect(fake.callsTo('endpoints', 'find')[0]!.args[0]).to.deep.equal({ _id: { $in: ['ep_f', 'ep_x'] }, ordering: 'fifo' });
    });

    it('reads no line when no FIFO endpoint is named', async () => {
      const { fake, claimed } = await fanOut([delivery('x1', 'ep_x', 'a'), delivery('x2', 'ep_x', 'a')], []);
      expect(claimed).to.deep.equal(['x1', 'x2']);
      expect(fake.callsTo('deliveries', 'findOne')).to.deep.equal([]);
    });
  });

  context('when the change feed starts', () => {
    it('prunes only other feeds\' resume tokens not saved since the horizon', () => {
      expect(staleResumeTokensFilter(5_000, 'resume_token:host-a')).to.deep.equal({
        _id: { $regex: '^resume_token:', $ne: 'resume_token:host-a' },
        savedAt: { $lt: 5_000 },
      });
    });
  });
});
