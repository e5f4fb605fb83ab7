import { expect } from 'chai';
import { appendEvents, fanOutBatch, recordFanOuts } from '../../../lib/store/mongo/fan-out.ts';
import { staleResumeTokensFilter } from '../../../lib/store/mongo/mongo-store.ts';
import { fakeDb } from './fake-db.ts';

const NOW = 1_000_000;

describe('MongoDB outbox and fan-out', () => {
  context('when this store inserts events and deliveries', () => {
    it('marks them with its origin, which its own change feed leaves out', async () => {
      const fake = fakeDb('store-a');
      await appendEvents(fake.db, [{ id: 'evt_1', tenantId: 'acme', type: 't', payload: '{}', createdAt: NOW, endpointId: null }]);
      const [events] = fake.callsTo('events', 'bulkWrite');
      const [op] = events!.args[0] as Array<{ updateOne: { update: { $setOnInsert: { origin: string } } } }>;
      expect(op!.updateOne.update.$setOnInsert.origin).to.equal('store-a');

      fake.c.events.on('updateMany', () => ({ matchedCount: 1, modifiedCount: 1 }));
      fake.c.deliveries.on('bulkWrite', () => ({ upsertedIds: {} }));
      const delivery = { id: 'dlv_1', eventId: 'evt_1', endpointId: 'ep_1', tenantId: 'acme', eventType: 't', slot: 0, nextAttemptAt: NOW, createdAt: NOW };
      await recordFanOuts(fake.db, fanOutBatch([{ eventId: 'evt_1', deliveries: [delivery] }], undefined), NOW);
      const [deliveries] = fake.callsTo('deliveries', 'bulkWrite');
      const [insert] = deliveries!.args[0] as Array<{ updateOne: { update: { $setOnInsert: { origin: string } } } }>;
      expect(insert!.updateOne.update.$setOnInsert.origin).to.equal('store-a');
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
