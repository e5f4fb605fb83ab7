import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode } from '../../lib/errors.ts';
import { Ticker } from '../../lib/engine/ticker.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const START = Date.UTC(2026, 0, 1);

describe('Ticker', () => {
  let clock: ManualClock;
  let ticker: Ticker;

  beforeEach(() => {
    clock = new ManualClock(START);
    ticker = new Ticker({ clock, tickMs: 100 });
  });

  afterEach(() => ticker.close());

  context('when every wheel is empty', () => {
    it('runs no interval', () => {
      ticker.createWheel<string>(() => {});
      ticker.createWheel<string>(() => {});
      expect(clock.pendingTimerCount).to.equal(0);
      expect(ticker.running).to.equal(false);
    });
  });

  context('when something is scheduled', () => {
    it('starts one interval, fires the entry within one tick of its deadline, then stops', () => {
      const fired: Array<[string, number]> = [];
      const wheel = ticker.createWheel<string>((item) => fired.push([item, clock.now()]));
      wheel.schedule(START + 30 * SECOND + 50, 'retry');
      expect(clock.pendingTimerCount).to.equal(1);
      while (clock.now() < START + 30 * SECOND) clock.advance(100);
      expect(fired).to.deep.equal([]);
      expect(clock.pendingTimerCount).to.equal(1);
      clock.advance(100);
      expect(fired).to.deep.equal([['retry', START + 30 * SECOND + 100]]);
      expect(clock.pendingTimerCount).to.equal(0);
      expect(ticker.running).to.equal(false);
    });

    it('starts again when a wheel is scheduled into after going idle', () => {
      const fired: string[] = [];
      const wheel = ticker.createWheel<string>((item) => fired.push(item));
      wheel.schedule(START + 100, 'a');
      clock.advance(100);
      expect(clock.pendingTimerCount).to.equal(0);
      clock.advance(HOUR);
      wheel.schedule(clock.now() + 200, 'b');
      expect(clock.pendingTimerCount).to.equal(1);
      clock.advance(200);
      expect(fired).to.deep.equal(['a', 'b']);
      expect(clock.pendingTimerCount).to.equal(0);
    });

    it('keeps running while a callback schedules more', () => {
      let count = 0;
      const wheel = ticker.createWheel<number>((n) => {
        count += 1;
        if (n < 2) wheel.schedule(clock.now() + SECOND, n + 1);
      });
      wheel.schedule(START + SECOND, 0);
      for (let i = 0; i < 40; i++) clock.advance(100);
      expect(count).to.equal(3);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });

  context('when two wheels are driven', () => {
    it('shares one interval and fires both', () => {
      const fired: string[] = [];
      const a = ticker.createWheel<string>((item) => fired.push(`a:${item}`));
      const b = ticker.createWheel<string>((item) => fired.push(`b:${item}`));
      a.schedule(START + 2 * SECOND, '1');
      b.schedule(START + 5 * SECOND, '2');
      expect(clock.pendingTimerCount).to.equal(1);
      while (clock.now() < START + 3 * SECOND) clock.advance(100);
      expect(fired).to.deep.equal(['a:1']);
      expect(clock.pendingTimerCount).to.equal(1);
      while (clock.now() < START + 6 * SECOND) clock.advance(100);
      expect(fired).to.deep.equal(['a:1', 'b:2']);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });

  context('when time jumps by hours (coalesced interval)', () => {
    it('fires everything due across wheels, each wheel in deadline order', () => {
      const fired: string[] = [];
      const a = ticker.createWheel<string>((item) => fired.push(`a:${item}`));
      const b = ticker.createWheel<string>((item) => fired.push(`b:${item}`));
      a.schedule(START + 3 * HOUR, '3h');
      a.schedule(START + 1 * HOUR, '1h');
      b.schedule(START + 2 * HOUR, '2h');
      b.schedule(START + 24 * HOUR, '24h');
      clock.advance(5 * HOUR);
      expect(fired).to.have.members(['a:1h', 'a:3h', 'b:2h']);
      expect(fired.filter((f) => f.startsWith('a:'))).to.deep.equal(['a:1h', 'a:3h']);
      expect(clock.pendingTimerCount).to.equal(1);
      clock.advance(19 * HOUR);
      expect(fired.at(-1)).to.equal('b:24h');
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });

  context('when a wheel is closed', () => {
    it('drops its entries, and the interval stops at the next tick', () => {
      const wheel = ticker.createWheel<string>(() => expect.fail('closed wheels do not fire'));
      wheel.schedule(START + HOUR, 'x');
      wheel.close();
      clock.advance(100);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });

  context('when a callback throws', () => {
    it('still advances the other wheels and reports the error to onError', () => {
      const errors: unknown[] = [];
      const reporting = new Ticker({ clock, onError: (error) => errors.push(error) });
      const fired: string[] = [];
      const bad = reporting.createWheel<string>(() => {
        throw new Error('boom');
      });
      const good = reporting.createWheel<string>((item) => fired.push(item));
      bad.schedule(START + 100, 'x');
      good.schedule(START + 100, 'y');
      clock.advance(100);
      expect(errors).to.have.length(1);
      expect(fired).to.deep.equal(['y']);
      expect(clock.pendingTimerCount).to.equal(0);
      reporting.close();
    });
  });

  context('when a callback throws and no onError is given', () => {
    it('rethrows after the tick, having advanced every wheel', () => {
      const fired: string[] = [];
      const bad = ticker.createWheel<string>(() => {
        throw new Error('boom');
      });
      const good = ticker.createWheel<string>((item) => fired.push(item));
      bad.schedule(START + 100, 'x');
      good.schedule(START + 100, 'y');
      expect(() => clock.advance(100)).to.throw('boom');
      expect(fired).to.deep.equal(['y']);
      expect(clock.pendingTimerCount).to.equal(0);
    });
  });

  describe('close()', () => {
    it('cancels the interval and refuses new entries', () => {
      const wheel = ticker.createWheel<string>(() => {});
      const idle = ticker.createWheel<string>(() => {});
      wheel.schedule(START + HOUR, 'x');
      expect(clock.pendingTimerCount).to.equal(1);
      ticker.close();
      expect(clock.pendingTimerCount).to.equal(0);
      expect(() => wheel.schedule(START + HOUR, 'y')).to.throw().with.property('code', ErrorCode.CLOSED);
      expect(() => idle.schedule(START + HOUR, 'y')).to.throw().with.property('code', ErrorCode.CLOSED);
      expect(idle.size).to.equal(0);
      expect(() => ticker.createWheel(() => {})).to.throw().with.property('code', ErrorCode.CLOSED);
    });
  });

  context('when options are invalid', () => {
    it('names the option and the value', () => {
      expect(() => new Ticker({ clock, tickMs: -5 })).to.throw(/tickMs=-5/).with.property('code', ErrorCode.INVALID_CONFIG);
    });
  });
});
