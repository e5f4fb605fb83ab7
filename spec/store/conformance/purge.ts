/**
 * Retention: purge deletes attempts, dead letters and finished events older than the horizon,
 * and keeps what is still pending or replayable.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import type { Store } from '../../../lib/store/port.ts';
import { slotOf } from '../../../lib/ids.ts';
import { DAY, OK, BUSY, SLOTS, makeEvent, attempt, type ConformanceSuite } from './fixtures.ts';

export function describePurge(suite: ConformanceSuite): void {
  const { addEndpoint, seed, lease, claim, claimedDelivery } = suite;
  describe('purge', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when records are older than the horizon', () => {
      it('deletes old attempts, old dead letters and finished events, and keeps the rest', async () => {
        await addEndpoint('ep_1');
        // Old and finished: delivered.
        const { delivery: done, event: doneEvent } = await claimedDelivery('ep_1');
        await store.settle(
          [{ kind: 'delivered', deliveryId: done.id, epoch: done.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        // Old and still pending.
        const waiting = await seed(['ep_1'], { dueAt: clock.now() + 40 * DAY });
        // Old, never fanned out.
        const unfanned = makeEvent('evt_unfanned', 'acme', clock.now());
        await store.appendEvents([unfanned]);
        // Old and dead, its dead letter old too.
        const { delivery: oldDead, event: oldDeadEvent } = await claimedDelivery('ep_1');
        await store.settle(
          [{ kind: 'dead', deliveryId: oldDead.id, epoch: oldDead.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId: 'dl_old', reason: 'exhausted' }],
          clock.now(),
        );
        // Old event whose delivery died recently: its dead letter must still be replayable.
        const { delivery: lateDead, event: lateDeadEvent } = await claimedDelivery('ep_1');
        await store.settle(
          [{ kind: 'release', deliveryId: lateDead.id, epoch: lateDead.leaseEpoch, nextAttemptAt: clock.now() + 20 * DAY }],
          clock.now(),
        );

        clock.advance(20 * DAY);
        await lease();
        const [late] = await claim();
        expect(late?.delivery.id).to.equal(lateDead.id);
        await store.settle(
          [{ kind: 'dead', deliveryId: lateDead.id, epoch: late!.delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId: 'dl_recent', reason: 'exhausted' }],
          clock.now(),
        );
        const recent = await seed(['ep_1']);

        clock.advance(20 * DAY);
        const result = await store.purge(clock.now() - 30 * DAY);
        expect(result).to.deep.equal({ attempts: 2, deadLetters: 1, events: 2, replayJobs: 0 });

        expect(await store.getEvent(doneEvent.id)).to.equal(undefined);
        expect(await store.getEvent(oldDeadEvent.id)).to.equal(undefined);
        expect(await store.getDeadLetter('dl_old')).to.equal(undefined);
        expect(await store.listAttempts(done.id)).to.deep.equal([]);

        expect(await store.getEvent(waiting.event.id)).to.not.equal(undefined);
        expect(await store.getEvent(unfanned.id)).to.not.equal(undefined);
        expect(await store.getEvent(lateDeadEvent.id)).to.not.equal(undefined);
        expect(await store.getEvent(recent.event.id)).to.not.equal(undefined);
        expect((await store.getDeadLetter('dl_recent'))?.attempts).to.have.length(1);
        expect(await store.replayDeadLetters({ ids: ['dl_recent'] }, clock.now())).to.deep.equal(['dl_recent']);
      });

      it('deletes an old attempt of a delivery that stays (its event kept for another delivery), and counts it', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        // One event, two deliveries: one delivered at its first attempt, one still waiting.
        const event = makeEvent('evt_shared', 'acme', clock.now());
        await store.appendEvents([event]);
        const [done, waiting] = ['ep_1', 'ep_2'].map((endpointId) => ({
          id: `dlv_${endpointId}`, eventId: event.id, endpointId, tenantId: 'acme', eventType: event.type,
          slot: slotOf(endpointId, SLOTS), nextAttemptAt: endpointId === 'ep_1' ? clock.now() : clock.now() + 90 * DAY, createdAt: clock.now(), orderingKey: null,
        }));
        await store.recordFanOuts([{ eventId: event.id, deliveries: [done!, waiting!] }], clock.now());
        await lease();
        const claimed = await claim();
        expect(claimed.map((job) => job.delivery.id)).to.deep.equal([done!.id]);
        await store.settle([{ kind: 'delivered', deliveryId: done!.id, epoch: claimed[0]!.delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }], clock.now());
        expect(await store.listAttempts(done!.id)).to.have.length(1);

        clock.advance(40 * DAY);
        const result = await store.purge(clock.now() - 30 * DAY);
        expect(result.attempts).to.equal(1);
        expect(result.events, 'the event waits for its other delivery').to.equal(0);
        expect((await store.getDelivery(done!.id))?.status).to.equal('delivered');
        expect(await store.listAttempts(done!.id)).to.deep.equal([]);
        expect((await store.purge(clock.now() - 30 * DAY)).attempts, 'nothing left to purge').to.equal(0);
      });
    });
  });
}
