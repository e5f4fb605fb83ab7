import { expect } from 'chai';
import { ManualClock, seededRandom } from '../../lib/clock.ts';
import { Deadlines } from '../../lib/delivery/deadlines.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';

describe('Deadlines', () => {
  let clock: ManualClock;
  let deadlines: Deadlines;

  beforeEach(() => {
    clock = new ManualClock(1_000_000);
    deadlines = new Deadlines(clock);
  });

  afterEach(() => deadlines.close());

  context('when deadlines are added out of order', () => {
    it('expires each at its own time, in deadline order, on one timer', () => {
      const expired: string[] = [];
      const t0 = clock.now();
      deadlines.add(t0 + 5_000, () => expired.push('5 s'));
      deadlines.add(t0 + 1_000, () => expired.push('1 s'));
      deadlines.add(t0 + 3_000, () => expired.push('3 s'));
      expect(clock.pendingTimerCount).to.equal(1);
      clock.advance(999);
      expect(expired).to.deep.equal([]);
      clock.advance(1);
      expect(expired).to.deep.equal(['1 s']);
      clock.advance(4_000);
      expect(expired).to.deep.equal(['1 s', '3 s', '5 s']);
      expect(deadlines.live).to.equal(0);
      expect(clock.pendingTimerCount).to.equal(0);
    });

    it('matches a sort of 1 000 random deadlines', () => {
      const random = seededRandom(11);
      const t0 = clock.now();
      const wanted = Array.from({ length: 1_000 }, () => t0 + 1 + Math.floor(random() * 60_000));
      const seen: number[] = [];
      for (const at of wanted) deadlines.add(at, () => seen.push(clock.now() >= at ? at : -at));
      clock.advance(60_000);
      expect(seen).to.deep.equal([...wanted].sort((a, b) => a - b));
    });
  });

  context('when deadlines are cancelled', () => {
    it('never expires them, and leaves no timer once none is live', () => {
      const expired: string[] = [];
      const t0 = clock.now();
      const first = deadlines.add(t0 + 1_000, () => expired.push('first'));
      const second = deadlines.add(t0 + 2_000, () => expired.push('second'));
      deadlines.add(t0 + 3_000, () => expired.push('third'));
      first.cancel();
      first.cancel();
      clock.advance(2_000);
      expect(expired).to.deep.equal(['second']);
      second.cancel();
      expect(deadlines.live).to.equal(1);
      clock.advance(1_000);
      expect(expired).to.deep.equal(['second', 'third']);

      const last = deadlines.add(clock.now() + 1_000, () => expired.push('last'));
      last.cancel();
      expect(clock.pendingTimerCount).to.equal(0);
      clock.advance(5_000);
      expect(expired).to.have.length(2);
    });
  });

  context('when closed', () => {
    it('cancels its timer, expires nothing and refuses new deadlines', () => {
      let expired = false;
      deadlines.add(clock.now() + 1_000, () => {
        expired = true;
      });
      deadlines.close();
      expect(clock.pendingTimerCount).to.equal(0);
      clock.advance(2_000);
      expect(expired).to.equal(false);
      let error: unknown;
      try {
        deadlines.add(clock.now() + 1, () => undefined);
      } catch (e) {
        error = e;
      }
      expect(isHeraldError(error) && error.code).to.equal(ErrorCode.CLOSED);
    });
  });
});
