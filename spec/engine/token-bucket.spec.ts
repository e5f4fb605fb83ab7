import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { TokenBucket } from '../../lib/engine/token-bucket.ts';

describe('TokenBucket', () => {
  let clock: ManualClock;

  beforeEach(() => {
    clock = new ManualClock(0);
  });

  context('when it is new', () => {
    it('holds its burst: that many are taken at once, the next waits 1000 / perSecond ms', () => {
      const bucket = new TokenBucket({ perSecond: 4, burst: 3 }, clock);
      expect([1, 2, 3, 4].map(() => bucket.tryTake(clock.now()))).to.deep.equal([true, true, true, false]);
      expect(bucket.waitMs(clock.now())).to.equal(250);
    });
  });

  context('when time passes', () => {
    it('refills at perSecond, never beyond the burst', () => {
      const bucket = new TokenBucket({ perSecond: 4, burst: 2 }, clock);
      bucket.tryTake(0);
      bucket.tryTake(0);
      expect(bucket.tokens(125)).to.equal(0.5);
      expect(bucket.tryTake(125)).to.equal(false);
      expect(bucket.tryTake(250)).to.equal(true);
      expect(bucket.tokens(10_000)).to.equal(2);
    });
  });

  context('when attempts wait', () => {
    it('hands out tokens in arrival order, each when it is due, on one clock timer', async () => {
      const bucket = new TokenBucket({ perSecond: 4, burst: 1 }, clock);
      expect(bucket.tryTake(0)).to.equal(true);
      const taken: Array<[number, number]> = [];
      const waits = [1, 2, 3].map((n) => bucket.wait().then((ok) => taken.push([n, clock.now()]) && ok));
      expect(bucket.waiting).to.equal(3);
      expect(clock.pendingTimerCount).to.equal(1);
      expect(bucket.tryTake(clock.now()), 'no one jumps the queue').to.equal(false);
      for (let i = 0; i < 3; i++) {
        clock.advance(250);
        await Promise.resolve();
      }
      expect(await Promise.all(waits)).to.deep.equal([true, true, true]);
      expect(taken).to.deep.equal([[1, 250], [2, 500], [3, 750]]);
      expect(clock.pendingTimerCount, 'no timer once nobody waits').to.equal(0);
    });

    it('says how long one more would wait, behind those already waiting', () => {
      const bucket = new TokenBucket({ perSecond: 2, burst: 1 }, clock);
      bucket.tryTake(0);
      void bucket.wait();
      void bucket.wait();
      expect(bucket.waitMs(0)).to.equal(1_500);
      expect(bucket.waitMs(400)).to.equal(1_100);
      bucket.open();
    });

    it('keeps an inexact rate exact over time: 3/s gives 30 tokens in 10 s', async () => {
      const bucket = new TokenBucket({ perSecond: 3, burst: 1 }, clock);
      bucket.tryTake(0);
      let granted = 0;
      let stop = false;
      const loop = (async () => {
        while (!stop && (await bucket.wait())) granted += 1;
      })();
      for (let ms = 0; ms < 10_000; ms += 10) {
        clock.advance(10);
        await Promise.resolve();
        await Promise.resolve();
      }
      stop = true;
      bucket.open();
      await loop;
      expect(granted).to.equal(30);
    });
  });

  context('when asked for its room within a horizon', () => {
    it('counts the tokens held and those refilled meanwhile, less those waiting', () => {
      const bucket = new TokenBucket({ perSecond: 4, burst: 2 }, clock);
      expect(bucket.room(0, 1_000)).to.equal(6);
      bucket.tryTake(0);
      bucket.tryTake(0);
      expect(bucket.room(0, 1_000)).to.equal(4);
      void bucket.wait();
      expect(bucket.room(0, 1_000)).to.equal(3);
      const slow = new TokenBucket({ perSecond: 0.5, burst: 1 }, clock);
      slow.tryTake(0);
      expect(slow.room(0, 1_000), 'no token within a second').to.equal(0);
      expect(slow.room(1_000, 1_000), 'one within a second').to.equal(1);
      bucket.open();
    });
  });

  context('when the limit changes', () => {
    it('keeps the tokens up to the new burst, refills at the new rate, and wakes those waiting to look again', async () => {
      const bucket = new TokenBucket({ perSecond: 10, burst: 10 }, clock);
      for (let i = 0; i < 10; i++) bucket.tryTake(0);
      const waiting = bucket.wait();
      clock.advance(50);
      bucket.reconfigure({ perSecond: 1, burst: 1 }, clock.now());
      expect(await waiting).to.equal(false);
      expect(clock.pendingTimerCount).to.equal(0);
      expect(bucket.limit).to.deep.equal({ perSecond: 1, burst: 1 });
      expect(bucket.tokens(clock.now())).to.equal(0.5);
      expect(bucket.waitMs(clock.now())).to.equal(500);
    });
  });

  context('when opened', () => {
    it('wakes every waiter without a token and leaves no timer', async () => {
      const bucket = new TokenBucket({ perSecond: 1, burst: 1 }, clock);
      bucket.tryTake(0);
      const waits = [bucket.wait(), bucket.wait()];
      bucket.open();
      expect(await Promise.all(waits)).to.deep.equal([false, false]);
      expect(bucket.waiting).to.equal(0);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });
});
