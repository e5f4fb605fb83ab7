/**
 * Nodes and slot leases: heartbeats and the member list with each node's figures, the store's own
 * clock; leases taken, renewed, expired and released with their epochs; the open work per slot and
 * the weights by which slots are shared.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SECOND, MINUTE, LEASE_MS, allSlots, OK, endpointIdInSlot, attempt, type ConformanceSuite } from './fixtures.ts';

export function describeMembership(suite: ConformanceSuite): void {
  describe('membership', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    /** A heartbeat with no requests in flight and no clock offset. */
    const beat = (id: string, startedAt: number, now: number) => ({ id, startedAt, now, inFlight: 0, clockOffsetMs: 0 });

    context('when nodes heartbeat', () => {
      it('lists those seen since a time, by id, and forgets a removed one', async () => {
        const startedAt = clock.now();
        await store.heartbeat(beat('node-b', startedAt, clock.now()));
        await store.heartbeat(beat('node-a', startedAt, clock.now()));
        clock.advance(5 * SECOND);
        await store.heartbeat(beat('node-b', startedAt, clock.now()));
        expect(await store.listNodes(clock.now() - 10 * SECOND)).to.deep.equal([
          { id: 'node-a', startedAt, seenAt: startedAt, inFlight: 0, clockOffsetMs: 0 },
          { id: 'node-b', startedAt, seenAt: clock.now(), inFlight: 0, clockOffsetMs: 0 },
        ]);
        expect((await store.listNodes(clock.now() - SECOND)).map((n) => n.id)).to.deep.equal(['node-b']);
        await store.removeNode('node-b');
        expect((await store.listNodes(0)).map((n) => n.id)).to.deep.equal(['node-a']);
      });

      it('never moves a node\'s last heartbeat backwards', async () => {
        await store.heartbeat(beat('node-a', clock.now(), clock.now() + SECOND));
        await store.heartbeat(beat('node-a', clock.now(), clock.now()));
        expect((await store.listNodes(0))[0]?.seenAt).to.equal(clock.now() + SECOND);
      });
    });

    context('when a heartbeat carries the node\'s figures', () => {
      it('lists each node with those of its last heartbeat, written even when its time is older (a corrected clock)', async () => {
        const startedAt = clock.now();
        await store.heartbeat({ id: 'node-a', startedAt, now: clock.now(), inFlight: 7, clockOffsetMs: -30_012 });
        await store.heartbeat({ id: 'node-b', startedAt, now: clock.now(), inFlight: 0, clockOffsetMs: 4 });
        clock.advance(SECOND);
        await store.heartbeat({ id: 'node-a', startedAt, now: clock.now(), inFlight: 12, clockOffsetMs: -30_010 });
        // Its clock was corrected backwards by a few ms: the time stays, the figures are the new ones.
        await store.heartbeat({ id: 'node-a', startedAt, now: clock.now() - 3, inFlight: 3, clockOffsetMs: -30_013 });
        expect(await store.listNodes(0)).to.deep.equal([
          { id: 'node-a', startedAt, seenAt: clock.now(), inFlight: 3, clockOffsetMs: -30_013 },
          { id: 'node-b', startedAt, seenAt: startedAt, inFlight: 0, clockOffsetMs: 4 },
        ]);
      });
    });

    context('when asked for its own time', () => {
      it('answers its clock in epoch ms, or undefined when it has none apart from this host\'s', async () => {
        const before = Date.now();
        const time = await store.serverTime();
        const after = Date.now();
        if (time === undefined) return;
        // The server of the specs runs on this machine: its clock is this one, to within the read.
        expect(time).to.be.within(before - SECOND, after + SECOND);
      });
    });
  });
}

export function describeLeases(suite: ConformanceSuite): void {
  const { lease } = suite;
  describe('leases', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when slots are free', () => {
      it('takes them at epoch 1 until now + leaseMs', async () => {
        const leases = await lease('node-a', [0, 1]);
        expect(leases).to.deep.equal([
          { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 1 },
          { slot: 1, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 1 },
        ]);
        expect(await store.listLeases()).to.deep.equal(leases);
      });
    });

    context('when the owner renews before expiry', () => {
      it('extends the lease and keeps the epoch', async () => {
        await lease('node-a', [0]);
        clock.advance(10 * SECOND);
        expect(await lease('node-a', [0])).to.deep.equal([
          { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 1 },
        ]);
      });
    });

    context('when another owner holds a live lease', () => {
      it('does not take it, and returns only the slots it holds', async () => {
        await lease('node-a', [0, 1]);
        clock.advance(10 * SECOND);
        const got = await lease('node-b', [1, 2]);
        expect(got).to.deep.equal([{ slot: 2, owner: 'node-b', until: clock.now() + LEASE_MS, epoch: 1 }]);
        const slot1 = (await store.listLeases()).find((l) => l.slot === 1);
        expect(slot1?.owner).to.equal('node-a');
      });
    });

    context('when a lease has expired', () => {
      it('lets another owner take it with the next epoch (until = now counts as expired)', async () => {
        await lease('node-a', [0]);
        clock.advance(LEASE_MS);
        expect(await lease('node-b', [0])).to.deep.equal([
          { slot: 0, owner: 'node-b', until: clock.now() + LEASE_MS, epoch: 2 },
        ]);
      });

      it('lets the same owner renew it at the same epoch when nobody took it meanwhile', async () => {
        // Nobody else claimed in the slot, so the owner's claims are still the only ones: no fencing needed.
        await lease('node-a', [0]);
        clock.advance(LEASE_MS + SECOND);
        expect(await lease('node-a', [0])).to.deep.equal([
          { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 1 },
        ]);
      });

      it('gives it back to its earlier owner only after the taker\'s lease ends, at the epoch after the taker\'s', async () => {
        await lease('node-a', [0]);
        clock.advance(LEASE_MS);
        await lease('node-b', [0]);
        expect(await lease('node-a', [0]), 'no renewal of a lease someone else took').to.deep.equal([]);
        clock.advance(LEASE_MS);
        expect(await lease('node-a', [0])).to.deep.equal([
          { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 3 },
        ]);
      });
    });

    context('when released', () => {
      it('frees the slots at once; the next taker gets the next epoch', async () => {
        await lease('node-a', [0, 1]);
        await store.releaseLeases('node-a', [0]);
        expect((await store.listLeases()).map((l) => l.slot)).to.deep.equal([1]);
        expect(await lease('node-b', [0])).to.deep.equal([
          { slot: 0, owner: 'node-b', until: clock.now() + LEASE_MS, epoch: 2 },
        ]);
      });

      it('gives the next epoch to its last owner too when it takes the slot again', async () => {
        await lease('node-a', [0]);
        await store.releaseLeases('node-a', [0]);
        expect(await lease('node-a', [0])).to.deep.equal([
          { slot: 0, owner: 'node-a', until: clock.now() + LEASE_MS, epoch: 2 },
        ]);
      });

      it('does not release another owner\'s lease', async () => {
        await lease('node-a', [0]);
        await store.releaseLeases('node-b', [0]);
        expect((await store.listLeases())[0]?.owner).to.equal('node-a');
      });
    });
  });
}

export function describeSlotWeights(suite: ConformanceSuite): void {
  const { addEndpoint, seed, lease, claim } = suite;
  describe('slot weights', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when deliveries are open in some slots', () => {
      it('counts per slot those pending and due or in flight, leaving out the rest and the empty slots', async () => {
        const one = endpointIdInSlot(1);
        const two = endpointIdInSlot(2);
        const three = endpointIdInSlot(3);
        for (const id of [one, two, three]) await addEndpoint(id);
        await seed([one]);
        await seed([one]);
        const { deliveryIds } = await seed([two]);
        await seed([two], { dueAt: clock.now() + MINUTE });
        await seed([three]);
        await lease('node-a', [2, 3]);
        const jobs = await claim();
        expect(jobs.map((j) => j.delivery.endpointId).sort()).to.deep.equal([two, three].sort());
        const done = jobs.find((j) => j.delivery.endpointId === three)!.delivery;
        await store.settle([{ kind: 'delivered', deliveryId: done.id, epoch: done.leaseEpoch, attempt: attempt(clock.now(), OK, null) }], clock.now());
        expect(jobs.find((j) => j.delivery.id === deliveryIds[0])).to.not.equal(undefined);
        // Slot 1: two pending and due; slot 2: one in flight (the other not due yet); slot 3: delivered.
        expect(await store.countOpenBySlot(clock.now())).to.deep.equal([
          { slot: 1, open: 2 },
          { slot: 2, open: 1 },
        ]);
        expect(await store.countOpenBySlot(clock.now() + MINUTE)).to.deep.equal([
          { slot: 1, open: 2 },
          { slot: 2, open: 2 },
        ]);
      });
    });

    context('when weights are stored', () => {
      it('has none before the first, then answers the last written', async () => {
        expect(await store.getSlotWeights()).to.equal(undefined);
        const first = { weights: allSlots.map((slot) => (slot % 5 === 0 ? 3 : 0)), by: 'node-a', at: clock.now() };
        await store.putSlotWeights(first);
        expect(await store.getSlotWeights()).to.deep.equal(first);
        const second = { weights: allSlots.map(() => 1), by: 'node-b', at: clock.now() + SECOND };
        await store.putSlotWeights(second);
        expect(await store.getSlotWeights()).to.deep.equal(second);
      });
    });
  });
}
