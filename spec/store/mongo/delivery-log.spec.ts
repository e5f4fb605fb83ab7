import { expect } from 'chai';
import { DeliveryStatus } from '../../../lib/model.ts';
import { countDeliveries } from '../../../lib/store/mongo/delivery-log.ts';
import { statusCountFilter } from '../../../lib/store/mongo/queries.ts';
import { fakeDb } from './fake-db.ts';

describe('MongoDB delivery log', () => {
  context('when deliveries are counted by status', () => {
    it('counts each status on its own (an index count) instead of grouping the whole collection', async () => {
      const fake = fakeDb();
      fake.c.deliveries.on('countDocuments', (filter: { status: string }) => (filter.status === 'delivered' ? 41 : filter.status === 'dead' ? 2 : 0));
      const counts = await countDeliveries(fake.db);
      expect(counts).to.include({ delivered: 41, dead: 2, pending: 0 });
      expect(fake.callsTo('deliveries', 'aggregate')).to.deep.equal([]);
      expect(fake.callsTo('deliveries', 'countDocuments').map((c) => c.args[0])).to.deep.equal(Object.values(DeliveryStatus).map(statusCountFilter));
    });
  });
});
