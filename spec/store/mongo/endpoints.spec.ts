import { expect } from 'chai';
import { CHUNK } from '../../../lib/store/mongo/collections.ts';
import { endpointChangesAfter, recordEndpointChange } from '../../../lib/store/mongo/endpoint-changes.ts';
import { deleteEndpoint } from '../../../lib/store/mongo/endpoints.ts';
import { cancelChunkFilter, cancelDeliveriesFilter, cancelDeliveriesUpdate } from '../../../lib/store/mongo/queries.ts';
import { FAKE_SESSION, fakeDb } from './fake-db.ts';

const NOW = 1_000_000;

describe('MongoDB endpoints', () => {
  context('when an endpoint with a backlog far larger than a transaction can hold is deleted', () => {
    it('deletes the endpoint and numbers the change in one transaction, then cancels its deliveries a chunk at a time, outside it', async () => {
      const fake = fakeDb();
      let left = 2 * CHUNK + 7;
      fake.c.deliveries.on('find', (_filter: unknown, _options: unknown, cursor: { limit: number }) => {
        const n = Math.min(left, cursor.limit);
        left -= n;
        return Array.from({ length: n }, (_, i) => ({ _id: `dlv_${left + i}` }));
      });
      fake.c.deliveries.on('updateMany', (filter: { _id: { $in: string[] } }) => ({ matchedCount: filter._id.$in.length, modifiedCount: filter._id.$in.length }));

      expect(await deleteEndpoint(fake.db, 'ep_1', NOW)).to.equal(true);

      expect(fake.transactions()).to.equal(1);
      expect(fake.calls.slice(0, 3).map((call) => [call.collection, call.op, (call.args.at(-1) as { session?: unknown })?.session])).to.deep.equal([
        ['endpoints', 'deleteOne', FAKE_SESSION],
        ['meta', 'findOneAndUpdate', FAKE_SESSION],
        ['endpointChanges', 'insertOne', FAKE_SESSION],
      ]);
      const finds = fake.callsTo('deliveries', 'find');
      for (const find of finds) expect(find.args[1]).to.not.have.property('session');
      expect(finds).to.have.length(3);
      for (const find of finds) {
        expect(find.args[0]).to.deep.equal(cancelDeliveriesFilter('ep_1'));
        expect(find.args[2]).to.deep.include({ limit: CHUNK });
      }
      const updates = fake.callsTo('deliveries', 'updateMany');
      expect(updates.map((u) => (u.args[0] as { _id: { $in: string[] } })._id.$in.length)).to.deep.equal([CHUNK, CHUNK, 7]);
      expect(updates[0]!.args[0]).to.deep.equal(cancelChunkFilter((updates[0]!.args[0] as { _id: { $in: string[] } })._id.$in));
      expect(updates[0]!.args[1]).to.deep.equal(cancelDeliveriesUpdate(NOW));
    });
  });

  context('when the endpoint is already gone (a delete interrupted half way)', () => {
    it('still cancels what is left of its backlog, and answers false', async () => {
      const fake = fakeDb();
      fake.c.endpoints.on('deleteOne', () => ({ deletedCount: 0 }));
      let served = false;
      fake.c.deliveries.on('find', () => (served ? [] : ((served = true), [{ _id: 'dlv_left' }])));
      expect(await deleteEndpoint(fake.db, 'ep_1', NOW)).to.equal(false);
      expect(fake.callsTo('deliveries', 'updateMany')).to.have.length(1);
      expect(fake.callsTo('endpointChanges', 'insertOne'), 'no change to number').to.deep.equal([]);
    });
  });

  context('when a change is numbered', () => {
    it('takes the next number from the meta counter, upserted, and records the change under it, both in the change\'s session', async () => {
      const fake = fakeDb();
      fake.c.meta.on('findOneAndUpdate', () => ({ _id: 'endpoint_change_counter', value: 42 }));
      await recordEndpointChange(fake.db, FAKE_SESSION, 'ep_1', NOW);
      const [counter] = fake.callsTo('meta', 'findOneAndUpdate');
      expect(counter?.args).to.deep.equal([
        { _id: 'endpoint_change_counter' },
        { $inc: { value: 1 } },
        { upsert: true, returnDocument: 'after', session: FAKE_SESSION },
      ]);
      const [insert] = fake.callsTo('endpointChanges', 'insertOne');
      expect(insert?.args).to.deep.equal([{ _id: 42, endpointId: 'ep_1', changedAt: NOW }, { session: FAKE_SESSION }]);
    });

    it('reads the changes after a cursor by number, in order, at most a limit', async () => {
      const fake = fakeDb();
      fake.c.endpointChanges.on('find', () => [{ _id: 8, endpointId: 'ep_1', changedAt: NOW }, { _id: 9, endpointId: 'ep_2', changedAt: NOW }]);
      expect(await endpointChangesAfter(fake.db, 7, 2)).to.deep.equal([{ version: 8, endpointId: 'ep_1' }, { version: 9, endpointId: 'ep_2' }]);
      const [find] = fake.callsTo('endpointChanges', 'find');
      expect(find?.args[0]).to.deep.equal({ _id: { $gt: 7 } });
      expect(find?.args[2]).to.deep.equal({ sort: { _id: 1 }, limit: 2 });
    });
  });
});
