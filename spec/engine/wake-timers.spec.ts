import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { TickerWakeTimers } from '../../lib/engine/wake-timers.ts';
import { Ticker } from '../../lib/engine/ticker.ts';
import { ErrorCode } from '../../lib/errors.ts';

function setup() {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  const ticker = new Ticker({ clock, tickMs: 100 });
  let woken = 0;
  const timers = new TickerWakeTimers(ticker, { onWake: () => woken++ });
  return { clock, ticker, timers, woken: () => woken };
}

describe('TickerWakeTimers', () => {
  context('when nothing has been scheduled', () => {
    it('has no wheel, nothing pending, and the ticker runs no interval', () => {
      const { ticker, timers, clock } = setup();
      expect(timers.hasWheel).to.equal(false);
      expect(timers.size).to.equal(0);
      expect(ticker.running).to.equal(false);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });

  context('when a wake-up is scheduled', () => {
    it('makes the wheel then, and calls onDue within a tick after the time', () => {
      const { ticker, timers, clock, woken } = setup();
      timers.schedule(clock.now() + 1_000);
      expect(timers.hasWheel).to.equal(true);
      expect(timers.size).to.equal(1);
      clock.advance(999);
      expect(woken()).to.equal(0);
      clock.advance(101);
      expect(woken()).to.equal(1);
      expect(timers.size).to.equal(0);
      ticker.close();
    });
  });

  context('when closed', () => {
    it('drops what was scheduled and refuses more, whether or not it had a wheel', () => {
      for (const used of [false, true]) {
        const { ticker, timers, clock, woken } = setup();
        if (used) timers.schedule(clock.now() + 1_000);
        timers.close();
        expect(timers.size).to.equal(0);
        clock.advance(2_000);
        expect(woken()).to.equal(0);
        expect(() => timers.schedule(clock.now() + 1_000)).to.throw().with.property('code', ErrorCode.CLOSED);
        ticker.close();
      }
    });
  });
});
