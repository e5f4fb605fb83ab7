/**
 * Delivery minutes: per-endpoint, per-minute increments added up from every node, read back per
 * scope, window and endpoint, and deleted once past their retention.
 */
import { expect } from 'chai';
import { LATENCY_BUCKETS, type DeliveryMinuteIncrement } from '../../../lib/store/delivery-minutes.ts';
import type { Store } from '../../../lib/store/port.ts';
import { MINUTE, HOUR, DAY, type ConformanceSuite } from './fixtures.ts';

export function describeDeliveryMinutes(suite: ConformanceSuite): void {
  describe('delivery minutes', () => {
    let store: Store;
    beforeEach(() => {
      store = suite.store;
    });

    const T0 = Date.UTC(2026, 0, 1, 12, 0);

    /** An increment with every count `n` (first-attempt successes `n - 1`) and `n` attempts in latency bucket `bucket`. */
    function increment(endpointId: string, tenantId: string, minute: number, n: number, bucket = 3): DeliveryMinuteIncrement {
      const latency = new Array<number>(LATENCY_BUCKETS).fill(0);
      latency[bucket] = n;
      return { endpointId, tenantId, minute, attempts: n, delivered: n, retriesScheduled: n, deadLettered: n, firstAttempts: n, firstAttemptSuccesses: n - 1, latency };
    }

    context('when increments of the same rows are added several times (several flushes, several nodes)', () => {
      it('adds them field by field, and sums the endpoints of a scope per minute, oldest first', async () => {
        await store.addDeliveryMinutes([increment('ep_a', 'acme', T0, 2), increment('ep_b', 'acme', T0, 3, 0)]);
        await store.addDeliveryMinutes([increment('ep_a', 'acme', T0, 5, LATENCY_BUCKETS - 1), increment('ep_a', 'acme', T0 + MINUTE, 1)]);
        await store.addDeliveryMinutes([increment('ep_c', 'globex', T0, 7)]);

        const one = await store.deliveryMinutes({ scope: { kind: 'endpoints', endpointIds: ['ep_a'] }, from: T0, to: T0 + HOUR });
        expect(one.map((m) => m.minute)).to.deep.equal([T0, T0 + MINUTE]);
        expect(one[0]).to.include({ attempts: 7, delivered: 7, retriesScheduled: 7, deadLettered: 7, firstAttempts: 7, firstAttemptSuccesses: 5 });
        expect(one[0]?.latency[3]).to.equal(2);
        expect(one[0]?.latency[LATENCY_BUCKETS - 1]).to.equal(5);
        expect(one[0]?.latency).to.have.length(LATENCY_BUCKETS);

        const all = await store.deliveryMinutes({ scope: { kind: 'all' }, from: T0, to: T0 + HOUR });
        expect(all.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0, 17], [T0 + MINUTE, 1]]);
        expect(all[0]?.latency[0]).to.equal(3);
        expect(all[0]?.latency[3]).to.equal(9);

        const tenant = await store.deliveryMinutes({ scope: { kind: 'tenant', tenantId: 'acme' }, from: T0, to: T0 + HOUR });
        expect(tenant.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0, 10], [T0 + MINUTE, 1]]);
        const named = await store.deliveryMinutes({ scope: { kind: 'endpoints', endpointIds: ['ep_b', 'ep_c'] }, from: T0, to: T0 + HOUR });
        expect(named.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0, 10]]);
        expect(await store.deliveryMinutes({ scope: { kind: 'endpoints', endpointIds: [] }, from: T0, to: T0 + HOUR })).to.deep.equal([]);
      });
    });

    context('when the minutes are summed per endpoint (deliveryTotals)', () => {
      it('adds every node\'s increments of each endpoint over the window, within the scope, by endpoint id', async () => {
        // Two nodes' flushes into the same rows, a minute outside the window on each side.
        await store.addDeliveryMinutes([increment('ep_b', 'acme', T0, 2), increment('ep_a', 'acme', T0, 3)]);
        await store.addDeliveryMinutes([increment('ep_b', 'acme', T0, 5), increment('ep_b', 'acme', T0 + MINUTE, 1)]);
        await store.addDeliveryMinutes([increment('ep_c', 'globex', T0 + 2 * MINUTE, 4)]);
        await store.addDeliveryMinutes([increment('ep_a', 'acme', T0 - MINUTE, 100), increment('ep_a', 'acme', T0 + HOUR, 100)]);
        const window = { from: T0, to: T0 + HOUR };

        const all = await store.deliveryTotals({ scope: { kind: 'all' }, ...window });
        expect(all).to.deep.equal([
          { endpointId: 'ep_a', attempts: 3, delivered: 3, retriesScheduled: 3, deadLettered: 3, firstAttempts: 3, firstAttemptSuccesses: 2 },
          { endpointId: 'ep_b', attempts: 8, delivered: 8, retriesScheduled: 8, deadLettered: 8, firstAttempts: 8, firstAttemptSuccesses: 5 },
          { endpointId: 'ep_c', attempts: 4, delivered: 4, retriesScheduled: 4, deadLettered: 4, firstAttempts: 4, firstAttemptSuccesses: 3 },
        ]);
        const tenant = await store.deliveryTotals({ scope: { kind: 'tenant', tenantId: 'acme' }, ...window });
        expect(tenant.map((t) => [t.endpointId, t.attempts])).to.deep.equal([['ep_a', 3], ['ep_b', 8]]);
        const named = await store.deliveryTotals({ scope: { kind: 'endpoints', endpointIds: ['ep_c', 'ep_b'] }, ...window });
        expect(named.map((t) => [t.endpointId, t.attempts])).to.deep.equal([['ep_b', 8], ['ep_c', 4]]);
        expect(await store.deliveryTotals({ scope: { kind: 'endpoints', endpointIds: [] }, ...window })).to.deep.equal([]);
        expect(await store.deliveryTotals({ scope: { kind: 'tenant', tenantId: 'initech' }, ...window })).to.deep.equal([]);
      });
    });

    context('when a window is asked for', () => {
      it('covers the minutes from its start, inclusive, to its end, exclusive', async () => {
        await store.addDeliveryMinutes([0, 1, 2, 3].map((i) => increment('ep_a', 'acme', T0 + i * MINUTE, i + 1)));
        const window = await store.deliveryMinutes({ scope: { kind: 'all' }, from: T0 + MINUTE, to: T0 + 3 * MINUTE });
        expect(window.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0 + MINUTE, 2], [T0 + 2 * MINUTE, 3]]);
      });
    });

    context('when minutes are older than their retention', () => {
      it('deletes them, in chunks, and keeps the newer ones', async () => {
        // More rows than one purge chunk (500), so the delete runs more than once.
        const old = Array.from({ length: 620 }, (_, i) => increment(`ep_${i}`, 'acme', T0 - 2 * DAY, 1));
        await store.addDeliveryMinutes(old);
        await store.addDeliveryMinutes([increment('ep_0', 'acme', T0, 4)]);
        expect(await store.purgeDeliveryMinutes(T0 - DAY)).to.equal(620);
        expect(await store.purgeDeliveryMinutes(T0 - DAY)).to.equal(0);
        const left = await store.deliveryMinutes({ scope: { kind: 'all' }, from: T0 - 3 * DAY, to: T0 + HOUR });
        expect(left.map((m) => [m.minute, m.attempts])).to.deep.equal([[T0, 4]]);
      });
    });
  });
}
