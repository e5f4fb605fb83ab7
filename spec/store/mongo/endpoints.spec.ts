import { expect } from 'chai';
import { CHUNK } from '../../../lib/store/mongo/collections.ts';
import { deleteEndpoint } from '../../../lib/store/mongo/endpoints.ts';
import { cancelChunkFilter, cancelDeliveriesFilter, cancelDeliveriesUpdate } from '../../../lib/store/mongo/queries.ts';
import { fakeDb } from './fake-db.ts';

const NOW = 1_000_000;

describe('MongoDB endpoints', () => {
  context('when an endpoint with a backlog far larger than a transaction can hold is deleted', () => {
    it('deletes the endpoint first, then cancels its deliveries a chunk at a time, with no transaction', async () => {
      const fake = fakeDb();
      let left = 2 * CHUNK + 7;
      fake.c.deliveries.on('find', (_filter: unknown, _options: unknown, cursor: { limit: number }) => {
        const n = Math.min(left, cursor.limit);
        left -= n;
        return Array.from({ length: n }, (_, i) => ({ _id: `dlv_${left + i}` }));
      });
      fake.c.deliveries.on('updateMany', (filter: { _id: { $in: string[] } }) => ({ matchedCount: filter._id.$in.length, modifiedCount: filter._id.$in.length }));

      expect(await deleteEndpoint(fake.db, 'ep_1', NOW)).to.equal(true);

      expect(fake.transactions()).to.equal(0);
      expect(fake.calls[0]).to.deep.include({ collection: 'endpoints', op: 'deleteOne' });
      const finds = fake.callsTo('deliveries', 'find');
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
    });
  });
});
