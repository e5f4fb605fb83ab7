import { expect } from 'chai';
import { CoalescedRounds } from '../lib/coalesced-rounds.ts';

describe('CoalescedRounds', () => {
  /** Rounds that each wait until the test lets them end. */
  function rounds(goOn = () => true): { rounds: CoalescedRounds; started: () => number; endRound: () => void; errors: unknown[] } {
    let count = 0;
    const enders: Array<() => void> = [];
    const errors: unknown[] = [];
    const coalesced = new CoalescedRounds({
      round: () => {
        count += 1;
        return new Promise<void>((resolve) => enders.push(resolve));
      },
      onError: (error) => errors.push(error),
      goOn,
    });
    return { rounds: coalesced, started: () => count, endRound: () => enders.shift()?.(), errors };
  }
  const turns = async (n = 5): Promise<void> => {
    for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
  };

  context('when requests arrive during a round', () => {
    it('runs one more round for all of them, and resolves each only after it', async () => {
      const r = rounds();
      const first = r.rounds.request();
      const second = r.rounds.request();
      const third = r.rounds.request();
      expect(r.started()).to.equal(1);
      let secondDone = false;
      void second.then(() => (secondDone = true));
      r.endRound();
      await turns();
      expect(r.started(), 'the coalesced round').to.equal(2);
      expect(secondDone, 'not before the round that began after it').to.equal(false);
      expect(r.rounds.running, 'while the coalesced round runs').to.equal(true);
      r.endRound();
      await Promise.all([first, second, third]);
      expect(r.started()).to.equal(2);
      expect(r.rounds.running).to.equal(false);
    });
  });

  context('when a request arrives just as the last round ends', () => {
    it('starts a round of its own rather than joining the one that ended', async () => {
      const r = rounds();
      const first = r.rounds.request();
      r.endRound();
      // The round's promise has resolved, the loop has looked at its flag for the last time.
      await Promise.resolve();
      const late = r.rounds.request();
      await turns();
      expect(r.started()).to.equal(2);
      r.endRound();
      await Promise.all([first, late]);
    });
  });

  context('when a round throws, or the owner stops', () => {
    it('reports the error and ends; a stopped owner gets no coalesced round', async () => {
      let open = true;
      const errors: unknown[] = [];
      let count = 0;
      const coalesced = new CoalescedRounds({
        round: async () => {
          count += 1;
          throw new Error(`round ${count}`);
        },
        onError: (error) => errors.push(error),
        goOn: () => open,
      });
      const first = coalesced.request();
      open = false;
      void coalesced.request();
      await first;
      await coalesced.idle;
      expect(count).to.equal(1);
      expect(errors.map((e) => (e as Error).message)).to.deep.equal(['round 1']);
    });
  });
});
