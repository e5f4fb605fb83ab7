import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { SlotWeigher } from '../../lib/cluster/slot-weigher.ts';
import type { SlotOpenCount, SlotWeights } from '../../lib/store/port.ts';

const SLOTS = 256;
/** 40 busy slots, 80 open deliveries each. */
const BUSY: SlotOpenCount[] = Array.from({ length: 40 }, (_, i) => ({ slot: (i * 97 + 13) % SLOTS, open: 80 })).sort((a, b) => a.slot - b.slot);

/** A store holding one weights record, counting what it is asked. */
function fakeStore(counts: () => readonly SlotOpenCount[]) {
  const calls = { counts: 0, writes: 0, failReads: false };
  let record: SlotWeights | undefined;
  return {
    calls,
    get record() {
      return record;
    },
    store: {
      async countOpenBySlot() {
        calls.counts += 1;
        return [...counts()];
      },
      async getSlotWeights() {
        if (calls.failReads) throw new Error('store down');
        return record;
      },
      async putSlotWeights(weights: SlotWeights) {
        calls.writes += 1;
        record = weights;
      },
    },
  };
}

describe('SlotWeigher (who measures, when weights are stored)', () => {
  // Node ids that the count leaves uneven on these 40 slots: the busiest holds 1.35 × its fair share.
  const nodes = ['node_a15', 'node_b15', 'node_c15'];

  context('when this node is the first live node', () => {
    it('counts at each heartbeat and stores new weights only once two heartbeats in a row call for them', async () => {
      const fake = fakeStore(() => BUSY);
      const errors: unknown[] = [];
      const weigher = new SlotWeigher({ owner: 'node_a15', slotCount: SLOTS }, { store: fake.store, clock: new ManualClock(1_000), onError: (e) => errors.push(e) });
      expect(await weigher.weights(nodes)).to.deep.equal([]);
      expect(fake.calls).to.include({ counts: 1, writes: 0 });
      const second = await weigher.weights(nodes);
      expect(fake.calls).to.include({ counts: 2, writes: 1 });
      expect(second).to.have.length(SLOTS);
      expect(fake.record).to.include({ by: 'node_a15', at: 1_000 });
      // Stored and even now: nothing more to write.
      await weigher.weights(nodes);
      await weigher.weights(nodes);
      expect(fake.calls.writes).to.equal(1);
      expect(errors).to.deep.equal([]);
    });

    it('does not store when one heartbeat calls for new weights and the next does not', async () => {
      let round = 0;
      const fake = fakeStore(() => (round++ % 2 === 0 ? BUSY : []));
      const weigher = new SlotWeigher({ owner: 'node_a15', slotCount: SLOTS }, { store: fake.store, clock: new ManualClock(1_000), onError: () => undefined });
      for (let i = 0; i < 6; i++) await weigher.weights(nodes);
      expect(fake.calls.writes).to.equal(0);
    });
  });

  context('when another node is the first live node', () => {
    it('never counts nor writes, and assigns by what that node stored', async () => {
      const fake = fakeStore(() => BUSY);
      const first = new SlotWeigher({ owner: 'node_a15', slotCount: SLOTS }, { store: fake.store, clock: new ManualClock(1_000), onError: () => undefined });
      const other = new SlotWeigher({ owner: 'node_c15', slotCount: SLOTS }, { store: fake.store, clock: new ManualClock(1_000), onError: () => undefined });
      await first.weights(nodes);
      await first.weights(nodes);
      const counted = fake.calls.counts;
      expect(await other.weights(nodes)).to.deep.equal(fake.record?.weights);
      expect(fake.calls.counts).to.equal(counted);
    });
  });

  context('when the store fails', () => {
    it('reports it and answers the last weights it had, so the slots stay where they are', async () => {
      const fake = fakeStore(() => BUSY);
      const errors: unknown[] = [];
      const weigher = new SlotWeigher({ owner: 'node_a15', slotCount: SLOTS }, { store: fake.store, clock: new ManualClock(1_000), onError: (e) => errors.push(e) });
      await weigher.weights(nodes);
      const stored = await weigher.weights(nodes);
      fake.calls.failReads = true;
      expect(await weigher.weights(nodes)).to.equal(stored);
      expect(errors).to.have.length(1);
    });
  });
});
