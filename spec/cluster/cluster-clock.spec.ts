import { expect } from 'chai';
import { ManualClock, type Clock } from '../../lib/clock.ts';
import { ClusterClock, type ClockSkewChange } from '../../lib/cluster/cluster-clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';

const SECOND = 1_000;
/** How long each fake read of the store's time takes, by the node's clock. */
const READ_MS = 40;

describe('ClusterClock (a node\'s clock corrected by its offset to the store\'s)', () => {
  let base: ManualClock;
  let skews: ClockSkewChange[];
  /** What the next read answers: the store's time at the read's midpoint, or a failure. */
  let answer: () => number | undefined;
  /** How long the next read takes. */
  let readMsNow = READ_MS;

  /** A store whose clock is `aheadMs` ahead of the node's (it reads it half-way through the read). */
  function storeAhead(aheadMs: number): () => number {
    return () => base.now() + aheadMs;
  }

  function clusterClock(): ClusterClock {
    return new ClusterClock({
      base,
      serverTime: async () => {
        // The request travels for half the read, the store reads its clock, the answer travels back.
        base.advance(readMsNow / 2);
        const time = answer();
        base.advance(readMsNow / 2);
        return time;
      },
      onSkewChange: (change) => skews.push(change),
    });
  }

  beforeEach(() => {
    base = new ManualClock(Date.UTC(2026, 0, 1));
    skews = [];
    readMsNow = READ_MS;
  });

  context('before any measurement', () => {
    it('is the node\'s clock (offset 0), and passes timers through to it', () => {
      const clock = clusterClock();
      expect(clock.offsetMs).to.equal(0);
      expect(clock.now()).to.equal(base.now());
      let fired = 0;
      clock.setTimeout(() => fired++, 100);
      const interval = clock.setInterval(() => fired++, 30);
      base.advance(100);
      expect(fired).to.equal(2);
      interval.cancel();
    });
  });

  context('when the store\'s clock is 30 s ahead', () => {
    it('takes the store\'s answer as read at the midpoint of the round trip (offset = server − (t0 + t1) / 2)', async () => {
      const clock = clusterClock();
      answer = storeAhead(30 * SECOND);
      await clock.measure();
      // Taken as read at t1 it would be 30 000 − 20; at t0, 30 000 + 20.
      expect(clock.offsetMs).to.equal(30 * SECOND);
      expect(clock.now()).to.equal(base.now() + 30 * SECOND);
    });

    it('keeps whole milliseconds, as the stores keep times (a read of an odd number of ms, a server time with µs)', async () => {
      const clock = clusterClock();
      readMsNow = 41;
      answer = () => base.now() + 30_000.737;
      await clock.measure();
      expect(clock.offsetMs).to.equal(30_001);
      expect(Number.isInteger(clock.now())).to.equal(true);
    });

    it('absorbs a jump of the node\'s clock: the corrected time moves only by the time that passed', async () => {
      const clock = clusterClock();
      answer = storeAhead(30 * SECOND);
      await clock.measure();
      const before = clock.now();
      // The node's clock is set 10 s forward (NTP, an operator): the store's did not move.
      base.advance(10 * SECOND);
      answer = storeAhead(20 * SECOND);
      await clock.measure();
      expect(clock.offsetMs).to.equal(20 * SECOND);
      expect(clock.now() - before, 'the second read').to.equal(READ_MS);
    });
  });

  context('when the store has no clock of its own (SQLite)', () => {
    it('keeps offset 0: the node\'s clock is the cluster\'s', async () => {
      const clock = clusterClock();
      answer = () => undefined;
      await clock.measure();
      expect(clock.offsetMs).to.equal(0);
      expect(clock.now()).to.equal(base.now());
    });
  });

  context('when a read fails', () => {
    it('throws the store\'s error and keeps the last offset', async () => {
      const clock = clusterClock();
      answer = storeAhead(-30 * SECOND);
      await clock.measure();
      answer = () => {
        throw new Error('connection lost');
      };
      const error = await clock.measure().catch((e: unknown) => e);
      expect((error as Error).message).to.equal('connection lost');
      expect(clock.offsetMs).to.equal(-30 * SECOND);
      expect(clock.now()).to.equal(base.now() - 30 * SECOND);
    });

    it('refuses an answer that is not a time with HERALD_STORE, keeping the last offset', async () => {
      const clock = clusterClock();
      answer = storeAhead(5 * SECOND);
      await clock.measure();
      answer = () => Number.NaN;
      const error = await clock.measure().catch((e: unknown) => e);
      expect(isHeraldError(error) && error.code).to.equal(ErrorCode.STORE);
      expect(clock.offsetMs).to.equal(5 * SECOND);
    });
  });

  context('when a read is slow (its round trip over a second)', () => {
    it('keeps the last offset when the new one is within the read\'s uncertainty, and takes one beyond it', async () => {
      const clock = clusterClock();
      answer = storeAhead(200);
      await clock.measure();
      readMsNow = 3 * SECOND;
      answer = storeAhead(200 + 1_400);
      await clock.measure();
      expect(clock.offsetMs, 'within ±1.5 s of the last: kept').to.equal(200);
      answer = storeAhead(30 * SECOND);
      await clock.measure();
      expect(clock.offsetMs, 'beyond it: a real change').to.equal(30 * SECOND);
    });
  });

  context('when the node\'s clock is set back during a read', () => {
    it('ignores that read (a negative round trip measures nothing)', async () => {
      let now = Date.UTC(2026, 0, 1);
      const jumping: Clock = { now: () => now, setTimeout: base.setTimeout.bind(base), setInterval: base.setInterval.bind(base) };
      const clock = new ClusterClock({
        base: jumping,
        serverTime: async () => {
          now -= 5 * SECOND;
          return now + 5 * SECOND + 700;
        },
        onSkewChange: (change) => skews.push(change),
      });
      await clock.measure();
      expect(clock.offsetMs).to.equal(0);
    });
  });

  context('when the offset crosses a second, either way', () => {
    it('reports each crossing once, going over and coming back, never each measurement', async () => {
      const clock = clusterClock();
      for (const aheadMs of [200, 1_500, 1_600, 30_000, 900, 300, -1_200, -1_300, 0]) {
        answer = storeAhead(aheadMs);
        await clock.measure();
      }
      expect(skews).to.deep.equal([
        { offsetMs: 1_500, skewed: true, thresholdMs: 1_000 },
        { offsetMs: 900, skewed: false, thresholdMs: 1_000 },
        { offsetMs: -1_200, skewed: true, thresholdMs: 1_000 },
        { offsetMs: 0, skewed: false, thresholdMs: 1_000 },
      ]);
    });
  });

  context('when given a bad option', () => {
    it('throws HERALD_INVALID_CONFIG naming it', () => {
      let thrown: unknown;
      try {
        new ClusterClock({ base, serverTime: async () => undefined, onSkewChange: () => undefined }, { skewWarnMs: 0 });
      } catch (error) {
        thrown = error;
      }
      expect(isHeraldError(thrown) && thrown.code).to.equal(ErrorCode.INVALID_CONFIG);
      expect((thrown as Error).message).to.include('skewWarnMs');
    });
  });
});
