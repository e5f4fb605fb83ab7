/**
 * Claims: due deliveries claimed under the leases a node holds, each stamped with the slot's epoch
 * that later fences its settle; by slot (`claimDue`) and by endpoint (`claimForEndpoints`).
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import { slotOf } from '../../../lib/ids.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SLOTS, SECOND, MINUTE, HOUR, LEASE_MS, allSlots, endpointIdInSlot, type ConformanceSuite } from './fixtures.ts';

export function describeClaimDue(suite: ConformanceSuite): void {
  const { addEndpoint, seed, lease, claim } = suite;
  describe('claimDue', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when the owner holds no lease', () => {
      it('claims nothing', async () => {
        await addEndpoint('ep_1');
        await seed(['ep_1']);
        expect(await claim()).to.deep.equal([]);
        await lease('node-b');
        expect(await claim()).to.deep.equal([]);
      });
    });

    context('when the owner\'s lease has expired', () => {
      it('claims nothing', async () => {
        await addEndpoint('ep_1');
        await seed(['ep_1']);
        await lease();
        clock.advance(LEASE_MS);
        expect(await claim()).to.deep.equal([]);
      });
    });

    context('when the owner leases only some slots', () => {
      it('claims only deliveries in those slots', async () => {
        const mine = endpointIdInSlot(1);
        const theirs = endpointIdInSlot(2);
        await addEndpoint(mine);
        await addEndpoint(theirs);
        await seed([mine, theirs]);
        await lease('node-a', [1]);
        const jobs = await claim();
        expect(jobs.map((j) => j.delivery.endpointId)).to.deep.equal([mine]);
      });
    });

    context('when deliveries are due', () => {
      it('marks them in flight at the slot\'s epoch and returns them with their events', async () => {
        await addEndpoint('ep_1');
        const { event, deliveryIds } = await seed(['ep_1']);
        clock.advance(SECOND);
        const [held] = await lease('node-a', [slotOf('ep_1', SLOTS)]);
        const jobs = await claim();
        expect(jobs).to.have.length(1);
        expect(jobs[0]!.event).to.deep.equal(event);
        expect(jobs[0]!.delivery).to.include({
          id: deliveryIds[0],
          status: 'in_flight',
          leaseEpoch: held!.epoch,
          attempts: 0,
          updatedAt: clock.now(),
        });
        expect(await store.getDelivery(deliveryIds[0]!)).to.deep.equal(jobs[0]!.delivery);
      });

      it('does not claim them again while the claim stands', async () => {
        await addEndpoint('ep_1');
        await seed(['ep_1']);
        await lease();
        expect(await claim()).to.have.length(1);
        expect(await claim()).to.deep.equal([]);
      });

      it('claims at most `limit`, earliest due first', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const late = await seed(['ep_1'], { dueAt: clock.now() - SECOND });
        const early = await seed(['ep_2'], { dueAt: clock.now() - HOUR });
        const middle = await seed(['ep_1'], { dueAt: clock.now() - MINUTE });
        await lease();
        const jobs = await claim({ limit: 2 });
        expect(jobs.map((j) => j.delivery.id)).to.deep.equal([early.deliveryIds[0], middle.deliveryIds[0]]);
        expect((await claim()).map((j) => j.delivery.id)).to.deep.equal(late.deliveryIds);
      });
    });

    context('when a delivery is not yet due', () => {
      it('claims it only once its time has come', async () => {
        await addEndpoint('ep_1');
        await seed(['ep_1'], { dueAt: clock.now() + MINUTE });
        await lease('node-a', allSlots, HOUR);
        expect(await claim()).to.deep.equal([]);
        clock.advance(MINUTE);
        expect(await claim()).to.have.length(1);
      });
    });

    context('when one endpoint has a large backlog', () => {
      it('caps each endpoint at perEndpointLimit so the others are in the first claim', async () => {
        await addEndpoint('ep_a');
        await addEndpoint('ep_b');
        for (let i = 0; i < 50; i++) await seed(['ep_a'], { dueAt: clock.now() - HOUR + i });
        await seed(['ep_b'], { dueAt: clock.now() });
        await lease();
        const jobs = await claim({ limit: 10, perEndpointLimit: 5 });
        const perEndpoint = (id: string) => jobs.filter((j) => j.delivery.endpointId === id).length;
        expect(perEndpoint('ep_a')).to.equal(5);
        expect(perEndpoint('ep_b')).to.equal(1);
        // The backlog's earliest go first.
        const aDue = jobs.filter((j) => j.delivery.endpointId === 'ep_a').map((j) => j.delivery.nextAttemptAt);
        expect(aDue).to.deep.equal([0, 1, 2, 3, 4].map((i) => clock.now() - HOUR + i));
      });
    });

    context('when endpoints are skipped, chosen or disabled', () => {
      it('leaves the skipped endpoints\' deliveries pending', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        await seed(['ep_1', 'ep_2']);
        await lease();
        const jobs = await claim({ skipEndpointIds: ['ep_1'] });
        expect(jobs.map((j) => j.delivery.endpointId)).to.deep.equal(['ep_2']);
      });

      it('claims for one endpoint only when endpointId is given', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        await seed(['ep_1', 'ep_2']);
        await lease();
        const jobs = await claim({ endpointId: 'ep_2' });
        expect(jobs.map((j) => j.delivery.endpointId)).to.deep.equal(['ep_2']);
      });

      it('does not claim for a disabled endpoint until it is enabled again', async () => {
        await addEndpoint('ep_1', 'acme', { status: 'disabled', disabledReason: 'operator' });
        await seed(['ep_1']);
        await lease();
        expect(await claim()).to.deep.equal([]);
        await store.updateEndpoint('ep_1', { status: 'enabled', disabledReason: null }, clock.now());
        expect(await claim()).to.have.length(1);
      });
    });
  });
}

export function describeClaimForEndpoints(suite: ConformanceSuite): void {
  const { addEndpoint, seed, lease, claim, claimedDelivery } = suite;
  describe('claimForEndpoints', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    async function claimFor(endpoints: ReadonlyArray<{ endpointId: string; limit: number }>, owner = 'node-a') {
      return store.claimForEndpoints({ owner, now: clock.now(), endpoints });
    }

    context('when the named endpoints have due deliveries', () => {
      it('claims each one\'s earliest up to its own limit, at the slot\'s epoch, earliest due first, with events', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        await addEndpoint('ep_3');
        const ones = [];
        for (let i = 0; i < 5; i++) ones.push(await seed(['ep_1'], { dueAt: clock.now() - MINUTE + i }));
        const two = await seed(['ep_2'], { dueAt: clock.now() - HOUR });
        await seed(['ep_3']);
        const leases = await lease();
        const jobs = await claimFor([{ endpointId: 'ep_1', limit: 3 }, { endpointId: 'ep_2', limit: 3 }]);
        expect(jobs.map((j) => j.delivery.id)).to.deep.equal([
          two.deliveryIds[0],
          ...ones.slice(0, 3).map((o) => o.deliveryIds[0]),
        ]);
        expect(jobs[0]!.event).to.deep.equal(two.event);
        const epochOf = (endpointId: string) => leases.find((l) => l.slot === slotOf(endpointId, SLOTS))!.epoch;
        for (const job of jobs) {
          expect(job.delivery).to.include({ status: 'in_flight', leaseEpoch: epochOf(job.delivery.endpointId), updatedAt: clock.now() });
        }
        // ep_3 was not named; what was claimed is not claimed again.
        expect((await claimFor([{ endpointId: 'ep_1', limit: 10 }])).map((j) => j.delivery.id)).to.deep.equal(
          ones.slice(3).map((o) => o.deliveryIds[0]),
        );
        expect((await claim()).map((j) => j.delivery.endpointId)).to.deep.equal(['ep_3']);
      });
    });

    context('when an endpoint is not claimable', () => {
      it('claims nothing for a slot the owner does not hold, a disabled endpoint, work not yet due, or a limit of 0', async () => {
        const mine = endpointIdInSlot(1);
        const theirs = endpointIdInSlot(2);
        const off = endpointIdInSlot(3, 'off');
        const later = endpointIdInSlot(4, 'later');
        await addEndpoint(mine);
        await addEndpoint(theirs);
        await addEndpoint(off, 'acme', { status: 'disabled', disabledReason: 'operator' });
        await addEndpoint(later);
        await seed([mine, theirs, off]);
        await seed([later], { dueAt: clock.now() + MINUTE });
        await lease('node-a', [1, 3, 4]);
        const none = await claimFor([
          { endpointId: theirs, limit: 5 },
          { endpointId: off, limit: 5 },
          { endpointId: later, limit: 5 },
          { endpointId: mine, limit: 0 },
        ]);
        expect(none).to.deep.equal([]);
        expect((await claimFor([{ endpointId: mine, limit: 5 }])).map((j) => j.delivery.endpointId)).to.deep.equal([mine]);
      });
    });

    context('when the slot changed owner while a delivery was in flight', () => {
      it('leaves the orphan to claimDue, which claims it at the new epoch', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        clock.advance(LEASE_MS + SECOND);
        await lease('node-b');
        expect(await claimFor([{ endpointId: 'ep_1', limit: 5 }], 'node-b')).to.deep.equal([]);
        const jobs = await claim({ owner: 'node-b' });
        expect(jobs.map((j) => j.delivery.id)).to.deep.equal([delivery.id]);
        expect(jobs[0]!.delivery).to.include({ status: 'in_flight', leaseEpoch: 2 });
      });

      it('says the orphan was taken over (resumed), and a fresh claim beside it was not', async () => {
        await addEndpoint('ep_1');
        const { delivery: orphan } = await claimedDelivery('ep_1');
        const { deliveryIds: [fresh] } = await seed(['ep_1']);
        clock.advance(LEASE_MS + SECOND);
        await lease('node-b');
        const jobs = await claim({ owner: 'node-b' });
        expect(jobs.map((j) => [j.delivery.id, j.resumed ?? false]).sort()).to.deep.equal([[orphan.id, true], [fresh!, false]].sort());
        // Claimed again after a give-back, it is a fresh claim.
        const taken = jobs.find((j) => j.delivery.id === orphan.id)!;
        await store.settle([{ kind: 'release', deliveryId: orphan.id, epoch: taken.delivery.leaseEpoch, nextAttemptAt: clock.now() }], clock.now());
        const again = await claim({ owner: 'node-b' });
        expect(again.map((j) => [j.delivery.id, j.resumed ?? false])).to.deep.equal([[orphan.id, false]]);
      });
    });
  });
}
