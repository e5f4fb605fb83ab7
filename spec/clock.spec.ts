import { expect } from 'chai';
import { ManualClock, seededRandom } from '../lib/clock.ts';

describe('ManualClock', () => {
  context('when advanced past one-shot timers', () => {
    it('fires them in due order with now() at each due time', () => {
      const clock = new ManualClock(1_000);
      const fired: Array<[string, number]> = [];
      clock.setTimeout(() => fired.push(['b', clock.now()]), 200);
      clock.setTimeout(() => fired.push(['a', clock.now()]), 100);
      clock.advance(500);
      expect(fired).to.deep.equal([['a', 1_100], ['b', 1_200]]);
      expect(clock.now()).to.equal(1_500);
    });

    it('does not fire cancelled timers', () => {
      const clock = new ManualClock(0);
      let fired = false;
      clock.setTimeout(() => { fired = true; }, 10).cancel();
      clock.advance(20);
      expect(fired).to.equal(false);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });

  context('when an interval falls due many times in one advance', () => {
    it('fires it once, coalesced, like a busy event loop', () => {
      const clock = new ManualClock(0);
      const seen: number[] = [];
      clock.setInterval(() => seen.push(clock.now()), 100);
      clock.advance(1_000);
      expect(seen).to.deep.equal([1_000]);
      clock.advance(100);
      expect(seen).to.deep.equal([1_000, 1_100]);
    });

    it('fires it before a one-shot timer that falls due later in the same advance', () => {
      const clock = new ManualClock(0);
      const order: string[] = [];
      clock.setInterval(() => order.push(`tick@${clock.now()}`), 100);
      clock.setTimeout(() => order.push(`once@${clock.now()}`), 450);
      clock.advance(450);
      expect(order).to.deep.equal(['tick@450', 'once@450']);
    });
  });
});

describe('seededRandom', () => {
  it('is deterministic per seed and stays in [0, 1)', () => {
    const a = seededRandom(42);
    const b = seededRandom(42);
    const draws = Array.from({ length: 1_000 }, () => a());
    expect(draws).to.deep.equal(Array.from({ length: 1_000 }, () => b()));
    expect(draws.every((x) => x >= 0 && x < 1)).to.equal(true);
  });
});
