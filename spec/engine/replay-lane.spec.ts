import { expect } from 'chai';
import { ReplayLane, replaySlots } from '../../lib/engine/replay-lane.ts';
import type { DeliveryJob } from '../../lib/model.ts';

/** Only the id matters to the lane: it hands jobs on untouched. */
const job = (id: string) => ({ delivery: { id } }) as DeliveryJob;

describe('ReplayLane', () => {
  describe('replaySlots', () => {
    it('leaves a quarter of the concurrency (at least one slot) to new events, and gives replays at least one', () => {
      expect([1, 2, 3, 4, 5, 8, 10, 16, 100].map(replaySlots)).to.deep.equal([1, 1, 2, 3, 4, 6, 8, 12, 75]);
    });
  });

  context('when more replays are offered than their share', () => {
    it('admits up to the share of the current limit, the next in order as each finishes, each finish counted once', () => {
      let limit = 4;
      const admitted: string[] = [];
      const finish = new Map<string, () => void>();
      const lane = new ReplayLane(
        (j, finished) => {
          admitted.push(j.delivery.id);
          finish.set(j.delivery.id, finished);
        },
        () => limit,
      );
      for (const id of ['r1', 'r2', 'r3', 'r4', 'r5', 'r6']) lane.offer(job(id));
      expect(admitted).to.deep.equal(['r1', 'r2', 'r3']);
      expect(lane.waiting).to.equal(3);

      finish.get('r2')!();
      finish.get('r2')!();
      expect(admitted, 'one more for one finish, however often it is reported').to.deep.equal(['r1', 'r2', 'r3', 'r4']);

      // The adaptive limit fell to 2 (one slot for replays): nothing more until only 0 are out.
      limit = 2;
      finish.get('r1')!();
      finish.get('r3')!();
      expect(admitted).to.deep.equal(['r1', 'r2', 'r3', 'r4']);
      finish.get('r4')!();
      expect(admitted).to.deep.equal(['r1', 'r2', 'r3', 'r4', 'r5']);

      expect(lane.drain().map((j) => j.delivery.id)).to.deep.equal(['r6']);
      expect(lane.waiting).to.equal(0);
    });
  });
});
