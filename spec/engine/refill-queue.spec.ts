import { expect } from 'chai';
import { RefillQueue } from '../../lib/engine/refill-queue.ts';

/** The first `n` endpoints a refill would serve. */
function firstInTurn(queue: RefillQueue, n: number): string[] {
  const out: string[] = [];
  for (const id of queue.inTurn()) {
    if (out.length === n) break;
    out.push(id);
  }
  return out;
}

describe('RefillQueue', () => {
  context('when a tenant with 1 000 endpoints waits ahead of a tenant with one', () => {
    it('serves the second tenant\'s endpoint second, not after the 1 000', () => {
      const queue = new RefillQueue();
      for (let i = 0; i < 1_000; i++) queue.add(`bulk-${i}`, 'bulk');
      queue.add('quiet-0', 'quiet');
      expect(firstInTurn(queue, 3)).to.deep.equal(['bulk-0', 'quiet-0', 'bulk-1']);
      expect(queue.size).to.equal(1_001);
    });
  });

  context('when endpoints are served and stay', () => {
    it('moves each to the back of its tenant, and its tenant to the back of the turn', () => {
      const queue = new RefillQueue();
      queue.add('a1', 'a');
      queue.add('a2', 'a');
      queue.add('b1', 'b');
      queue.add('c1', 'c');
      queue.served('a1');
      // a served: b and c first, then a with a2 ahead of a1.
      expect([...queue.inTurn()]).to.deep.equal(['b1', 'c1', 'a2', 'a1']);
      queue.served('b1');
      expect([...queue.inTurn()]).to.deep.equal(['c1', 'a2', 'b1', 'a1']);
    });
  });

  context('when endpoints leave', () => {
    it('drops a tenant with its last endpoint, ignores unknown ones and a second add', () => {
      const queue = new RefillQueue();
      queue.add('a1', 'a');
      queue.add('a1', 'a');
      queue.add('b1', 'b');
      queue.delete('a1');
      queue.delete('nobody');
      queue.served('nobody');
      expect(queue.has('a1')).to.equal(false);
      expect(queue.size).to.equal(1);
      expect([...queue.inTurn()]).to.deep.equal(['b1']);
      queue.add('a1', 'a');
      expect([...queue.inTurn()]).to.deep.equal(['b1', 'a1']);
    });

    it('may drop endpoints while a refill walks the turn', () => {
      const queue = new RefillQueue();
      for (const id of ['a1', 'a2', 'a3']) queue.add(id, 'a');
      queue.add('b1', 'b');
      const seen: string[] = [];
      for (const id of queue.inTurn()) {
        seen.push(id);
        queue.delete(id);
      }
      expect(seen).to.deep.equal(['a1', 'b1', 'a2', 'a3']);
      expect(queue.size).to.equal(0);
    });
  });
});
