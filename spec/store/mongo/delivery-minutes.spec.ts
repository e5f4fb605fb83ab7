import { expect } from 'chai';
import { deliveryTotals } from '../../../lib/store/mongo/delivery-minutes.ts';
import { fakeDb } from './fake-db.ts';

const T0 = Date.UTC(2026, 0, 1, 12, 0);
const HOUR = 3_600_000;

describe('MongoDB delivery minutes', () => {
  context('when summed per endpoint (deliveryTotals)', () => {
    it("groups the window's documents in scope by endpoint, summing the counts, and answers them by endpoint id", async () => {
      const fake = fakeDb();
      const counts = { attempts: 3, delivered: 2, retriesScheduled: 1, deadLettered: 0, firstAttempts: 2, firstAttemptSuccesses: 2 };
      fake.c.deliveryMinutes.on('aggregate', () => [{ _id: 'ep_b', ...counts }, { _id: 'ep_a', ...counts, attempts: 1 }]);
      const totals = await deliveryTotals(fake.db, { scope: { kind: 'tenant', tenantId: 'acme' }, from: T0, to: T0 + HOUR });
      expect(totals).to.deep.equal([{ endpointId: 'ep_a', ...counts, attempts: 1 }, { endpointId: 'ep_b', ...counts }]);
      const [pipeline] = fake.callsTo('deliveryMinutes', 'aggregate')[0]!.args as [Record<string, any>[]];
      expect(pipeline[0]).to.deep.equal({ $match: { minute: { $gte: T0, $lt: T0 + HOUR }, tenantId: 'acme' } });
      expect(pipeline[1]!.$group).to.deep.include({ _id: '$endpointId', attempts: { $sum: '$attempts' }, firstAttemptSuccesses: { $sum: '$firstAttemptSuccesses' } });
      expect(Object.keys(pipeline[1]!.$group).filter((key) => key.startsWith('latency') || key.startsWith('b'))).to.deep.equal([]);
    });

    it('reads nothing for an empty list of endpoints', async () => {
      const fake = fakeDb();
      expect(await deliveryTotals(fake.db, { scope: { kind: 'endpoints', endpointIds: [] }, from: T0, to: T0 + HOUR })).to.deep.equal([]);
      expect(fake.calls).to.deep.equal([]);
    });
  });
});
