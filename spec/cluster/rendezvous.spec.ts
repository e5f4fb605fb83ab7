import { expect } from 'chai';
import { assignSlots, slotsFor } from '../../lib/cluster/rendezvous.ts';

const SLOTS = 256;
const ids = (n: number, prefix = 'node_'): string[] => Array.from({ length: n }, (_, i) => `${prefix}${(i * 7919).toString(36)}${i}`);
const share = (owners: readonly string[], id: string): number => owners.filter((o) => o === id).length;
const moved = (a: readonly string[], b: readonly string[]): number => a.filter((owner, slot) => owner !== b[slot]).length;

describe('rendezvous slot assignment', () => {
  context('when three nodes share 256 slots', () => {
    it('gives every slot an owner and each node its share within two slots (±10 % asked)', () => {
      for (let trial = 0; trial < 20; trial++) {
        const nodes = ids(3, `t${trial}_`);
        const owners = assignSlots(nodes, SLOTS);
        expect(owners.every((o) => nodes.includes(o))).to.equal(true);
        for (const id of nodes) expect(Math.abs(share(owners, id) - SLOTS / 3)).to.be.at.most(2);
      }
    });

    it('is the same whatever the order of the node list, and slotsFor agrees with it', () => {
      const nodes = ids(3);
      const owners = assignSlots(nodes, SLOTS);
      expect(assignSlots([...nodes].reverse(), SLOTS)).to.deep.equal(owners);
      const mine = slotsFor(nodes[1] ?? '', nodes, SLOTS);
      expect(mine).to.deep.equal(owners.flatMap((o, slot) => (o === nodes[1] ? [slot] : [])));
    });
  });

  context('when a fourth node joins', () => {
    it('moves about a quarter of the slots, all of them to the newcomer', () => {
      for (let trial = 0; trial < 20; trial++) {
        const three = ids(3, `j${trial}_`);
        const four = [...three, `newcomer_${trial}`];
        const before = assignSlots(three, SLOTS);
        const after = assignSlots(four, SLOTS);
        expect(share(after, `newcomer_${trial}`)).to.be.within(63, 64);
        const n = moved(before, after);
        expect(n, `trial ${trial}`).to.be.within(63, 0.32 * SLOTS);
      }
    });
  });

  context('when a node leaves', () => {
    it('moves its slots and only a few others', () => {
      for (let trial = 0; trial < 20; trial++) {
        const four = ids(4, `l${trial}_`);
        const leaver = four[0] ?? '';
        const before = assignSlots(four, SLOTS);
        const after = assignSlots(four.slice(1), SLOTS);
        const extra = before.filter((owner, slot) => owner !== leaver && owner !== after[slot]).length;
        expect(extra, `trial ${trial}`).to.be.at.most(0.08 * SLOTS);
      }
    });
  });

  context('when there are no nodes', () => {
    it('assigns nothing', () => {
      expect(assignSlots([], 4)).to.deep.equal(['', '', '', '']);
    });
  });
});
