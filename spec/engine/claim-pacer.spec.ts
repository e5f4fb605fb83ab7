import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ClaimPacer } from '../../lib/engine/claim-pacer.ts';

function setup(options: { threshold?: number; maxDelayMs?: number } = {}) {
  const clock = new ManualClock(Date.UTC(2026, 0, 1));
  let pumps = 0;
  const pacer = new ClaimPacer({ clock, pump: () => void pumps++ }, options);
  return { clock, pacer, pumps: () => pumps };
}

describe('ClaimPacer', () => {
  context('when places free up one by one', () => {
    it('pumps once the threshold is reached, not before', () => {
      const { pacer, pumps } = setup({ threshold: 3, maxDelayMs: 1_000 });
      pacer.freed();
      pacer.freed();
      expect(pumps()).to.equal(0);
      pacer.freed();
      expect(pumps()).to.equal(1);
      expect(pacer.freedSinceClaim).to.equal(0);
    });

    it('pumps within maxDelayMs when the threshold is not reached', () => {
      const { clock, pacer, pumps } = setup({ threshold: 10, maxDelayMs: 5 });
      pacer.freed();
      clock.advance(4);
      pacer.freed();
      expect(pumps()).to.equal(0);
      clock.advance(1);
      expect(pumps()).to.equal(1);
      clock.advance(100);
      expect(pumps()).to.equal(1);
    });

    it('pumps at once for an actor whose queue ran dry', () => {
      const { clock, pacer, pumps } = setup({ threshold: 10, maxDelayMs: 5 });
      pacer.freed();
      pacer.freed(true);
      expect(pumps()).to.equal(1);
      clock.advance(10);
      expect(pumps()).to.equal(1);
    });

    it('cancels the timer when the threshold pumps first', () => {
      const { clock, pacer, pumps } = setup({ threshold: 2, maxDelayMs: 5 });
      pacer.freed();
      pacer.freed();
      clock.advance(10);
      expect(pumps()).to.equal(1);
    });
  });

  context('when closed', () => {
    it('pumps no more', () => {
      const { clock, pacer, pumps } = setup({ threshold: 2, maxDelayMs: 5 });
      pacer.freed();
      pacer.close();
      pacer.freed();
      pacer.freed();
      clock.advance(10);
      expect(pumps()).to.equal(0);
    });
  });

  context('when an option is invalid', () => {
    it('names it', () => {
      expect(() => setup({ threshold: 0 })).to.throw(/threshold/);
      expect(() => setup({ maxDelayMs: -1 })).to.throw(/maxDelayMs/);
    });
  });
});
