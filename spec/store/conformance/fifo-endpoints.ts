/**
 * FIFO endpoints: only the head of each line (ordering key) is claimed, and the next one only once
 * the head is delivered or dead; through retries, releases, a change of owner and replays.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SECOND, MINUTE, LEASE_MS, OK, BUSY, makeEvent, attempt, type ConformanceSuite } from './fixtures.ts';

export function describeFifoEndpoints(suite: ConformanceSuite): void {
  const { addEndpoint, seed, plan, lease, claim } = suite;
  describe('FIFO endpoints', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    const ids = (jobs: readonly { delivery: { id: string } }[]) => jobs.map((j) => j.delivery.id);
    /** Seeds `keys.length` events to `endpointId`, one per key (null: the default line), due in that order. */
    async function line(endpointId: string, keys: ReadonlyArray<string | null>): Promise<string[]> {
      const out: string[] = [];
      for (const key of keys) {
        clock.advance(1);
        out.push((await seed([endpointId], key === null ? {} : { orderingKey: key })).deliveryIds[0]!);
      }
      return out;
    }
    async function settleAs(kind: 'delivered' | 'dead', job: { delivery: { id: string; leaseEpoch: number } }) {
      const base = { deliveryId: job.delivery.id, epoch: job.delivery.leaseEpoch };
      const settlement = kind === 'delivered'
        ? { kind, ...base, attempt: attempt(clock.now(), OK, null) }
        : { kind, ...base, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId: `dl_${job.delivery.id}`, reason: 'exhausted' };
      expect((await store.settle([settlement], clock.now())).applied).to.deep.equal([job.delivery.id]);
    }

    context('when a FIFO endpoint has several lines', () => {
      it('claims only the head of each line (by claimDue and by claimForEndpoints), and all of an endpoint without ordering', async () => {
        await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
        await addEndpoint('ep_any');
        const [a1, b1, a2, n1, b2, n2] = await line('ep_fifo', ['a', 'b', 'a', null, 'b', null]);
        const any = await line('ep_any', ['a', 'a', 'a']);
        await lease();
        const viaEndpoints = await store.claimForEndpoints({ owner: 'node-a', now: clock.now(), endpoints: [{ endpointId: 'ep_fifo', limit: 10 }] });
        expect(ids(viaEndpoints)).to.deep.equal([a1, b1, n1]);
        expect(ids(await claim())).to.deep.equal(any);
        // Heads in flight hold their lines: nothing more, either way.
        expect(await claim({ endpointId: 'ep_fifo' })).to.deep.equal([]);
        expect(await store.claimForEndpoints({ owner: 'node-a', now: clock.now(), endpoints: [{ endpointId: 'ep_fifo', limit: 10 }] })).to.deep.equal([]);
        expect([a2, b2, n2]).to.have.length(3);
      });

      it('never hands out two of one line in one claim', async () => {
        await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
        const [first] = await line('ep_fifo', ['k', 'k', 'k', 'k']);
        await lease();
        expect(ids(await claim({ perEndpointLimit: 10 }))).to.deep.equal([first]);
      });
    });

    context('when the head of a line settles', () => {
      it('holds the line while the head waits for a retry, then claims the next after it is delivered, or dead', async () => {
        await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
        const [d1, d2, d3] = await line('ep_fifo', ['k', 'k', 'k']);
        await lease();
        const [job1] = await claim();
        expect(job1?.delivery.id).to.equal(d1);
        await store.settle(
          [{ kind: 'retry', deliveryId: d1!, epoch: job1!.delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), nextAttemptAt: clock.now() + MINUTE }],
          clock.now(),
        );
        // The head is pending, not due: the line waits behind it.
        expect(await claim()).to.deep.equal([]);
        clock.advance(MINUTE);
        await lease();
        const [again] = await claim();
        expect(again?.delivery.id).to.equal(d1);
        await settleAs('delivered', again!);
        const [job2] = await claim();
        expect(job2?.delivery.id).to.equal(d2);
        await settleAs('dead', job2!);
        expect(ids(await claim())).to.deep.equal([d3]);
      });

      it('keeps a released head the head (breaker open, pause, shutdown)', async () => {
        await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
        const [d1] = await line('ep_fifo', ['k', 'k']);
        await lease();
        const [job] = await claim();
        await store.settle([{ kind: 'release', deliveryId: d1!, epoch: job!.delivery.leaseEpoch, nextAttemptAt: clock.now() + SECOND }], clock.now());
        expect(await claim()).to.deep.equal([]);
        clock.advance(SECOND);
        expect(ids(await claim())).to.deep.equal([d1]);
      });
    });

    context('when the slot changes owner while a head is in flight', () => {
      it('lets the next owner claim the orphaned head again, and only it', async () => {
        await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
        const [d1] = await line('ep_fifo', ['k', 'k', 'k']);
        await lease();
        expect(ids(await claim())).to.deep.equal([d1]);
        clock.advance(LEASE_MS + SECOND);
        await lease('node-b');
        expect(ids(await claim({ owner: 'node-b' }))).to.deep.equal([d1]);
        expect(await claim({ owner: 'node-b' })).to.deep.equal([]);
      });
    });

    context('when fan-out claims deliveries as it creates them', () => {
      it('inserts in flight at most the head of a line; the others of the line go in pending', async () => {
        await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
        await lease();
        const events = ['evt_f1', 'evt_f2'].map((id) => makeEvent(id, 'acme', clock.now(), { orderingKey: 'k' }));
        await store.appendEvents(events);
        const fanOuts = events.map((event) => ({ eventId: event.id, deliveries: plan(event, ['ep_fifo'], clock.now()) }));
        const [first, second] = fanOuts.map((f) => f.deliveries[0]!.id);
        const claimed = await store.recordFanOuts(fanOuts, clock.now(), { owner: 'node-a', deliveryIds: new Set([first!, second!]) });
        // A store may also leave the head pending, for the claim to decide (PostgreSQL does).
        expect(claimed.map((d) => d.id)).to.satisfy((got: string[]) => got.length === 0 || (got.length === 1 && got[0] === first));
        expect(await store.getDelivery(second!)).to.include({ status: 'pending' });
        const heads = claimed.length === 0 ? ids(await claim()) : [];
        expect([...ids(claimed.map((delivery) => ({ delivery }))), ...heads]).to.deep.equal([first]);

        // A later event of a line with an open delivery never goes in flight.
        const third = makeEvent('evt_f3', 'acme', clock.now(), { orderingKey: 'k' });
        await store.appendEvents([third]);
        const deliveries = plan(third, ['ep_fifo'], clock.now());
        expect(await store.recordFanOuts([{ eventId: third.id, deliveries }], clock.now(), { owner: 'node-a', deliveryIds: new Set([deliveries[0]!.id]) })).to.deep.equal([]);
        expect(await store.getDelivery(deliveries[0]!.id)).to.include({ status: 'pending' });
      });
    });

    context('when a dead letter of a line is replayed', () => {
      it('re-enters its line at its own sequence: it goes before the later ones still pending', async () => {
        await addEndpoint('ep_fifo', 'acme', { ordering: 'fifo' });
        const [d1, d2, d3] = await line('ep_fifo', ['k', 'k', 'k']);
        await lease();
        await settleAs('dead', (await claim())[0]!);
        const [job2] = await claim();
        expect(job2?.delivery.id).to.equal(d2);
        await settleAs('delivered', job2!);
        expect(await store.replayDeadLetters({ ids: [`dl_${d1}`] }, clock.now())).to.have.length(1);
        expect(ids(await claim())).to.deep.equal([d1]);
        expect(d3).to.be.a('string');
      });
    });

    context('when an endpoint is switched to FIFO and back', () => {
      it('stores the ordering and claims accordingly', async () => {
        await addEndpoint('ep_1');
        const [d1, d2] = await line('ep_1', ['k', 'k']);
        expect((await store.updateEndpoint('ep_1', { ordering: 'fifo' }, clock.now()))?.ordering).to.equal('fifo');
        expect((await store.getEndpoint('ep_1'))?.ordering).to.equal('fifo');
        await lease();
        expect(ids(await claim())).to.deep.equal([d1]);
        await store.updateEndpoint('ep_1', { ordering: 'none' }, clock.now());
        expect(ids(await claim())).to.deep.equal([d2]);
      });
    });
  });
}
