import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode } from '../../lib/errors.ts';
import { TimerWheel } from '../../lib/engine/timer-wheel.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const START = Date.UTC(2026, 0, 1);

/** A wheel on a ManualClock, advanced the way the ticker does: every tick, reading now(). */
function setup(options: { tickMs?: number; slotCount?: number } = {}) {
  const clock = new ManualClock(START);
  const fired: Array<{ item: string; at: number }> = [];
  const wheel = new TimerWheel<string>({ ...options, startAt: clock.now(), onExpire: (item) => fired.push({ item, at: clock.now() }) });
  const tickMs = options.tickMs ?? 100;
  const interval = clock.setInterval(() => wheel.advance(clock.now()), tickMs);
  return { clock, wheel, fired, stop: () => interval.cancel() };
}

describe('TimerWheel', () => {
  context('when an entry is scheduled', () => {
    it('fires it at its deadline, not before, within one tick after', () => {
      const { clock, wheel, fired } = setup();
      wheel.schedule(START + 250, 'a');
      while (fired.length === 0) clock.advance(10);
      expect(fired).to.have.length(1);
      expect(fired[0]!.at).to.be.at.least(START + 250).and.below(START + 250 + 100);
    });

    it('fires an entry whose deadline is exactly an advance', () => {
      const { wheel, fired } = setup();
      wheel.schedule(START + 1_000, 'a');
      wheel.advance(START + 999);
      expect(fired).to.have.length(0);
      wheel.advance(START + 1_000);
      expect(fired.map((f) => f.item)).to.deep.equal(['a']);
    });

    it('never fires early for fractional deadlines', () => {
      const { wheel, fired } = setup();
      wheel.schedule(START + 100.4, 'a');
      wheel.advance(START + 100);
      expect(fired).to.have.length(0);
      wheel.advance(START + 101);
      expect(fired).to.have.length(1);
    });

    it('fires a deadline already past at the next advance, not inside schedule()', () => {
      const { wheel, fired } = setup();
      wheel.advance(START + 10 * SECOND);
      wheel.schedule(START, 'late');
      expect(fired).to.have.length(0);
      wheel.advance(START + 10 * SECOND);
      expect(fired.map((f) => f.item)).to.deep.equal(['late']);
    });

    it('fires an entry scheduled later within the tick the last advance stopped in', () => {
      const { wheel, fired } = setup();
      wheel.advance(START + 1_050);
      wheel.schedule(START + 1_080, 'same-tick');
      wheel.advance(START + 1_079);
      expect(fired).to.have.length(0);
      wheel.advance(START + 1_080);
      expect(fired.map((f) => f.item)).to.deep.equal(['same-tick']);
    });
  });

  context('when entries lie many revolutions ahead', () => {
    it('fires them at the right time and not on earlier passes over their slot', () => {
      // 100 ms × 3 600 slots = 6 minutes per revolution; 24 h is 240 revolutions.
      const { clock, wheel, fired } = setup();
      wheel.schedule(START + 24 * HOUR, 'day');
      wheel.schedule(START + 6 * MINUTE + 100, 'next-revolution');
      // A minute at a time, the interval (coalesced) advancing the wheel once per minute.
      while (clock.now() < START + 24 * HOUR - MINUTE) {
        clock.advance(MINUTE);
        for (const { at } of fired) expect(at).to.be.at.least(START + 6 * MINUTE + 100);
      }
      expect(fired).to.deep.equal([{ item: 'next-revolution', at: START + 7 * MINUTE }]);
      // Then a tick at a time up to the deadline.
      while (clock.now() < START + 24 * HOUR - 100) {
        clock.advance(100);
        expect(fired).to.have.length(1);
      }
      clock.advance(100);
      expect(fired).to.deep.equal([
        { item: 'next-revolution', at: START + 7 * MINUTE },
        { item: 'day', at: START + 24 * HOUR },
      ]);
      expect(wheel.size).to.equal(0);
    });

    it('fires each within one tick of its deadline when advanced tick by tick over many revolutions', () => {
      // 8 slots × 10 ms: an 80 ms revolution, so deadlines up to 5 s lie up to 60 revolutions ahead.
      const { clock, wheel, fired } = setup({ tickMs: 10, slotCount: 8 });
      const deadlines = new Map<string, number>();
      for (let i = 0; i < 300; i++) {
        const at = START + ((i * 7_919) % 5_003);
        deadlines.set(`${i}`, at);
        wheel.schedule(at, `${i}`);
      }
      while (clock.now() < START + 5_100) clock.advance(10);
      expect(fired).to.have.length(300);
      for (const { item, at } of fired) {
        const deadline = deadlines.get(item)!;
        expect(at, item).to.be.at.least(deadline).and.at.most(deadline + 10);
      }
    });

    it('fires them within one tick when advanced every tick', () => {
      const { clock, wheel, fired } = setup();
      wheel.schedule(START + 2 * HOUR + 1_234, 'x');
      clock.advance(2 * HOUR + 1_233);
      expect(fired).to.have.length(0);
      clock.advance(100);
      expect(fired).to.deep.equal([{ item: 'x', at: START + 2 * HOUR + 1_333 }]);
    });
  });

  context('when time jumps by hours in one advance', () => {
    it('fires everything due, in deadline order, and keeps what is not', () => {
      const { wheel, fired } = setup();
      const deadlines = [5 * HOUR, 30 * SECOND, 90 * MINUTE, 1 * HOUR, 6 * MINUTE, 6 * MINUTE + 1, 3 * HOUR + 5, 7 * HOUR];
      for (const d of deadlines) wheel.schedule(START + d, `t+${d}`);
      wheel.advance(START + 5 * HOUR);
      const expected = deadlines.filter((d) => d <= 5 * HOUR).sort((a, b) => a - b).map((d) => `t+${d}`);
      expect(fired.map((f) => f.item)).to.deep.equal(expected);
      expect(wheel.size).to.equal(1);
      wheel.advance(START + 7 * HOUR);
      expect(fired.map((f) => f.item).at(-1)).to.equal(`t+${7 * HOUR}`);
    });

    it('orders across slots and revolutions with a small wheel', () => {
      const { wheel, fired } = setup({ tickMs: 10, slotCount: 4 });
      const deadlines = Array.from({ length: 200 }, (_, i) => ((i * 7919) % 997) * 13);
      deadlines.forEach((d, i) => wheel.schedule(START + d, `${i}`));
      wheel.advance(START + 6_500);
      const firedDeadlines = fired.map((f) => deadlines[Number(f.item)]!);
      expect(firedDeadlines).to.deep.equal([...firedDeadlines].sort((a, b) => a - b));
      expect(firedDeadlines).to.have.length(deadlines.filter((d) => d <= 6_500).length);
      wheel.advance(START + 20_000);
      expect(fired).to.have.length(200);
    });
  });

  context('when an entry is cancelled', () => {
    it('does not fire it and no longer counts it', () => {
      const { clock, wheel, fired } = setup();
      const a = wheel.schedule(START + SECOND, 'a');
      wheel.schedule(START + SECOND, 'b');
      wheel.schedule(START + SECOND, 'c');
      expect(wheel.size).to.equal(3);
      a.cancel();
      a.cancel();
      expect(wheel.size).to.equal(2);
      clock.advance(2 * SECOND);
      expect(fired.map((f) => f.item).sort()).to.deep.equal(['b', 'c']);
      expect(wheel.size).to.equal(0);
    });

    it('ignores cancel() after the entry fired', () => {
      const { wheel } = setup();
      const a = wheel.schedule(START + 100, 'a');
      wheel.schedule(START + 10 * SECOND, 'b');
      wheel.advance(START + 200);
      a.cancel();
      expect(wheel.size).to.equal(1);
    });

    it('skips an entry that an earlier callback in the same advance cancelled', () => {
      const clock = new ManualClock(START);
      const fired: string[] = [];
      const timers: Record<string, { cancel(): void }> = {};
      const wheel = new TimerWheel<string>({
        startAt: START,
        onExpire: (item) => {
          fired.push(item);
          if (item === 'first') timers.second!.cancel();
        },
      });
      timers.first = wheel.schedule(START + 100, 'first');
      timers.second = wheel.schedule(START + 200, 'second');
      wheel.schedule(START + 300, 'third');
      wheel.advance(clock.now() + HOUR);
      expect(fired).to.deep.equal(['first', 'third']);
      expect(wheel.size).to.equal(0);
    });
  });

  context('when callbacks schedule or throw', () => {
    it('fires entries scheduled by a callback at a later advance', () => {
      const fired: number[] = [];
      const wheel: TimerWheel<number> = new TimerWheel<number>({
        startAt: START,
        onExpire: (n) => {
          fired.push(n);
          if (n < 3) wheel.schedule(START, n + 1);
        },
      });
      wheel.schedule(START, 0);
      wheel.advance(START);
      expect(fired).to.deep.equal([0]);
      wheel.advance(START);
      wheel.advance(START);
      wheel.advance(START);
      expect(fired).to.deep.equal([0, 1, 2, 3]);
    });

    it('fires every due entry before rethrowing what a callback threw', () => {
      const fired: string[] = [];
      const wheel = new TimerWheel<string>({
        startAt: START,
        onExpire: (item) => {
          fired.push(item);
          if (item === 'bad') throw new Error('boom');
        },
      });
      wheel.schedule(START + 1, 'bad');
      wheel.schedule(START + 2, 'good');
      expect(() => wheel.advance(START + 10)).to.throw('boom');
      expect(fired).to.deep.equal(['bad', 'good']);
      expect(wheel.size).to.equal(0);
    });
  });

  describe('size and nextDeadline()', () => {
    it('counts live entries and reports the earliest deadline', () => {
      const { wheel } = setup();
      expect(wheel.size).to.equal(0);
      expect(wheel.nextDeadline()).to.equal(undefined);
      wheel.schedule(START + 2 * HOUR, 'b');
      const a = wheel.schedule(START + 5 * MINUTE, 'a');
      expect(wheel.size).to.equal(2);
      expect(wheel.nextDeadline()).to.equal(START + 5 * MINUTE);
      a.cancel();
      expect(wheel.nextDeadline()).to.equal(START + 2 * HOUR);
    });
  });

  describe('close()', () => {
    it('cancels every entry and refuses new ones', () => {
      const { clock, wheel, fired } = setup();
      wheel.schedule(START + 100, 'a');
      wheel.close();
      expect(wheel.size).to.equal(0);
      clock.advance(HOUR);
      expect(fired).to.have.length(0);
      expect(() => wheel.schedule(START + HOUR * 2, 'b')).to.throw().with.property('code', ErrorCode.CLOSED);
    });
  });

  context('when options are invalid', () => {
    it('names the option and the value', () => {
      expect(() => new TimerWheel({ startAt: START, tickMs: 0, onExpire: () => {} }))
        .to.throw(/tickMs=0/).with.property('code', ErrorCode.INVALID_CONFIG);
      expect(() => new TimerWheel({ startAt: START, slotCount: 1.5, onExpire: () => {} }))
        .to.throw(/slotCount=1.5/).with.property('code', ErrorCode.INVALID_CONFIG);
    });

    it('rejects a deadline that is not a number', () => {
      const { wheel } = setup();
      expect(() => wheel.schedule(Number.NaN, 'x')).to.throw().with.property('code', ErrorCode.INVALID_INPUT);
    });
  });
});
