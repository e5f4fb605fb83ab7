/**
 * The delivery log: deliveries listed newest first under each filter and paged, counted by
 * status, and the next due time.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import type { Store } from '../../../lib/store/port.ts';
import { MINUTE, HOUR, OK, attempt, type ConformanceSuite } from './fixtures.ts';

export function describeDeliveryLog(suite: ConformanceSuite): void {
  const { addEndpoint, seed, lease, claim } = suite;
  describe('delivery log and counts', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when listing deliveries', () => {
      it('lists newest first with each filter', async () => {
        await addEndpoint('ep_1', 'acme');
        await addEndpoint('ep_2', 'acme');
        await addEndpoint('ep_3', 'globex');
        const t0 = clock.now();
        const a = await seed(['ep_1', 'ep_2']);
        clock.advance(MINUTE);
        const b = await seed(['ep_3'], { tenantId: 'globex' });
        clock.advance(MINUTE);
        const c = await seed(['ep_1'], { dueAt: clock.now() + HOUR });
        await lease();
        const [claimed] = await claim({ endpointId: 'ep_3' });

        const ids = async (filter: Parameters<Store['listDeliveries']>[0]) =>
          (await store.listDeliveries(filter)).map((d) => d.id);
        const [a1, a2] = a.deliveryIds;
        const all = await ids({});
        expect(all.slice(0, 2)).to.deep.equal([c.deliveryIds[0], b.deliveryIds[0]]);
        expect(all.slice(2).sort()).to.deep.equal([a1, a2].sort());
        expect(await ids({ endpointId: 'ep_1' })).to.deep.equal([c.deliveryIds[0], a1]);
        expect(await ids({ tenantId: 'globex' })).to.deep.equal(b.deliveryIds);
        expect((await ids({ eventId: a.event.id })).sort()).to.deep.equal([a1, a2].sort());
        expect(await ids({ status: 'in_flight' })).to.deep.equal([claimed!.delivery.id]);
        expect(await ids({ since: t0 + MINUTE })).to.deep.equal([c.deliveryIds[0], b.deliveryIds[0]]);
        expect(await ids({ since: t0, until: t0 + MINUTE, endpointId: 'ep_2' })).to.deep.equal([a2]);
        expect(await ids({ limit: 1 })).to.deep.equal([c.deliveryIds[0]]);
        expect(await store.getDelivery('dlv_missing')).to.equal(undefined);
      });

      it('filters by event type and pages with a cursor, ties broken by id', async () => {
        await addEndpoint('ep_1', 'acme');
        await addEndpoint('ep_2', 'acme');
        await addEndpoint('ep_3', 'acme');
        await seed(['ep_1', 'ep_2', 'ep_3'], { type: 'order.placed' });
        clock.advance(MINUTE);
        await seed(['ep_1', 'ep_2'], { type: 'invoice.paid' });
        const all = await store.listDeliveries({});
        expect(all.map((d) => d.createdAt)).to.deep.equal([...all.map((d) => d.createdAt)].sort((x, y) => y - x));
        const sameTime = all.filter((d) => d.createdAt === all[all.length - 1]?.createdAt).map((d) => d.id);
        expect(sameTime).to.deep.equal([...sameTime].sort().reverse());

        expect((await store.listDeliveries({ eventType: 'order.placed' })).map((d) => d.eventType)).to.deep.equal([
          'order.placed',
          'order.placed',
          'order.placed',
        ]);
        const pages: string[][] = [];
        let after: { createdAt: number; id: string } | undefined;
        for (;;) {
          const page = await store.listDeliveries({ limit: 2, ...(after === undefined ? {} : { after }) });
          if (page.length === 0) break;
          pages.push(page.map((d) => d.id));
          const last = page[page.length - 1]!;
          after = { createdAt: last.createdAt, id: last.id };
        }
        expect(pages.map((p) => p.length)).to.deep.equal([2, 2, 1]);
        expect(pages.flat()).to.deep.equal(all.map((d) => d.id));
      });
    });

    context('when counting deliveries', () => {
      it('counts every status, zeros included', async () => {
        await addEndpoint('ep_1');
        expect(await store.countDeliveries()).to.deep.equal({ pending: 0, in_flight: 0, delivered: 0, dead: 0, cancelled: 0 });
        await seed(['ep_1']);
        await seed(['ep_1']);
        await lease();
        const [job] = await claim({ limit: 1 });
        await store.settle(
          [{ kind: 'delivered', deliveryId: job!.delivery.id, epoch: job!.delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        await seed(['ep_1']);
        await claim({ limit: 1 });
        expect(await store.countDeliveries()).to.deep.equal({ pending: 1, in_flight: 1, delivered: 1, dead: 0, cancelled: 0 });
      });
    });

    context('when asking for the next due time', () => {
      it('gives the earliest pending delivery of an enabled endpoint, or undefined', async () => {
        expect(await store.nextDueAt()).to.equal(undefined);
        await addEndpoint('ep_on');
        await addEndpoint('ep_off', 'acme', { status: 'disabled', disabledReason: 'failing' });
        const now = clock.now();
        await seed(['ep_off'], { dueAt: now - HOUR });
        await seed(['ep_on'], { dueAt: now + MINUTE });
        await seed(['ep_on'], { dueAt: now + HOUR });
        expect(await store.nextDueAt()).to.equal(now + MINUTE);
        clock.advance(MINUTE);
        await lease();
        await claim();
        expect(await store.nextDueAt()).to.equal(now + HOUR);
      });
    });
  });
}
