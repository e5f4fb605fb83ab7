import { expect } from 'chai';
import { seededRandom, systemRandom } from '../../lib/clock.ts';
import { jitter, JITTER_RATIO } from '../../lib/policy/jitter.ts';

describe('jitter', () => {
  const delayMs = 60_000;

  context('with the system random source', () => {
    it('keeps 1 000 draws within ±20 % and spreads them', () => {
      const draws = Array.from({ length: 1_000 }, () => jitter(delayMs, systemRandom));
      for (const ms of draws) expect(ms).to.be.within(delayMs * 0.8, delayMs * 1.2);
      expect(Number.isInteger(draws[0])).to.equal(true);
      // 1 000 draws over 24 001 possible values: nearly all distinct, and both halves used.
      expect(new Set(draws).size).to.be.above(950);
      expect(draws.some((ms) => ms < delayMs * 0.9)).to.equal(true);
      expect(draws.some((ms) => ms > delayMs * 1.1)).to.equal(true);
    });

    it('gives no two equal delays when the band is wide enough to make collisions negligible', () => {
      // Rounding to the ms makes a few collisions likely in a narrow band (birthday bound);
      // over a band of 4 × 10^11 values, 1 000 draws collide with probability ~10^-6.
      const big = 1e12;
      const draws = Array.from({ length: 1_000 }, () => jitter(big, systemRandom));
      for (const ms of draws) expect(ms).to.be.within(big * 0.8, big * 1.2);
      expect(new Set(draws).size).to.equal(1_000);
    });
  });

  context('with a seeded random source', () => {
    it('is deterministic', () => {
      const a = seededRandom(7);
      const b = seededRandom(7);
      const first = Array.from({ length: 100 }, () => jitter(delayMs, a));
      expect(Array.from({ length: 100 }, () => jitter(delayMs, b))).to.deep.equal(first);
    });
  });

  it('maps the ends of the random range to the ends of the band', () => {
    expect(JITTER_RATIO).to.equal(0.2);
    expect(jitter(1_000, () => 0)).to.equal(800);
    expect(jitter(1_000, () => 0.5)).to.equal(1_000);
    expect(jitter(1_000, () => 0.999_999)).to.equal(1_200);
    expect(jitter(1_000, () => 0, 0.5)).to.equal(500);
  });
});
