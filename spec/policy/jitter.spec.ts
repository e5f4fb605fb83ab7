import { expect } from 'chai';
import { seededRandom, systemRandom } from '../../lib/clock.ts';
import { decorrelatedJitter, equalJitter, fullJitter, jitter, JITTER_RATIO } from '../../lib/policy/jitter.ts';

const DRAWS = 10_000;

/** The smallest, largest and mean of 10 000 draws; every draw must be a whole number of ms. */
function spread(draw: () => number): { min: number; max: number; mean: number } {
  let min = Infinity;
  let max = -Infinity;
  let sum = 0;
  for (let i = 0; i < DRAWS; i++) {
    const ms = draw();
    if (!Number.isInteger(ms)) throw new Error(`draw ${i} is not whole milliseconds: ${ms}`);
    min = Math.min(min, ms);
    max = Math.max(max, ms);
    sum += ms;
  }
  return { min, max, mean: sum / DRAWS };
}

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

/*
 * Each kind over 10 000 draws of the injected (seeded) random source. The bounds are the
 * formula's; "reaches" checks that draws come within 1 % of the band's ends, so a narrower band
 * fails; the mean's tolerance is 4 standard errors of a 10 000-draw mean (σ/100), so a formula
 * with another centre (full's d/2 against equal's 3d/4, a decorrelated upper end of 2× instead
 * of 3×) fails by far.
 */
describe('jitter kinds over 10 000 draws', () => {
  const d = 60_000;

  it('±20 %: within [0.8 d, 1.2 d], reaching both ends, mean d', () => {
    const random = seededRandom(101);
    const { min, max, mean } = spread(() => jitter(d, random));
    expect(min).to.be.within(0.8 * d, 0.8 * d + 0.01 * 0.4 * d);
    expect(max).to.be.within(1.2 * d - 0.01 * 0.4 * d, 1.2 * d);
    // σ = 0.4 d / √12 ≈ 6 928 ms: 4 standard errors ≈ 277 ms.
    expect(mean).to.be.closeTo(d, 280);
  });

  it('full: within [0, d], reaching both ends, mean d / 2', () => {
    const random = seededRandom(102);
    const { min, max, mean } = spread(() => fullJitter(d, random));
    expect(min).to.be.within(0, 0.01 * d);
    expect(max).to.be.within(0.99 * d, d);
    // σ = d / √12 ≈ 17 321 ms: 4 standard errors ≈ 693 ms.
    expect(mean).to.be.closeTo(d / 2, 700);
  });

  it('equal: within [d / 2, d], reaching both ends, mean 3 d / 4', () => {
    const random = seededRandom(103);
    const { min, max, mean } = spread(() => equalJitter(d, random));
    expect(min).to.be.within(d / 2, d / 2 + 0.01 * (d / 2));
    expect(max).to.be.within(d - 0.01 * (d / 2), d);
    // σ = (d / 2) / √12 ≈ 8 660 ms: 4 standard errors ≈ 346 ms.
    expect(mean).to.be.closeTo((3 * d) / 4, 350);
  });

  context('decorrelated', () => {
    const initial = 1_000;
    const cap = 60_000;

    it('below the cap: within [initial, 3 × previous], reaching both ends, mean (initial + 3 × previous) / 2', () => {
      const random = seededRandom(104);
      const previous = 10_000;
      const { min, max, mean } = spread(() => decorrelatedJitter(previous, initial, cap, random));
      const width = 3 * previous - initial;
      expect(min).to.be.within(initial, initial + 0.01 * width);
      expect(max).to.be.within(3 * previous - 0.01 * width, 3 * previous);
      // σ = 29 000 / √12 ≈ 8 372 ms: 4 standard errors ≈ 335 ms.
      expect(mean).to.be.closeTo((initial + 3 * previous) / 2, 340);
    });

    it('at the cap: never above max, which takes the share of the band beyond it', () => {
      const random = seededRandom(105);
      const previous = 30_000;
      let atCap = 0;
      const { min, max, mean } = spread(() => {
        const ms = decorrelatedJitter(previous, initial, cap, random);
        if (ms === cap) atCap++;
        return ms;
      });
      expect(min).to.be.within(initial, initial + 900);
      expect(max).to.equal(cap);
      // uniform(1 s, 90 s) capped at 60 s: 30 / 89 of the draws land on the cap …
      expect(atCap / DRAWS).to.be.closeTo(30 / 89, 0.02);
      // … and the mean is (∫₁⁶⁰ u du + 60 × 30) / 89 s ≈ 40 444 ms (σ ≈ 19.7 s: 4 standard errors ≈ 787 ms).
      expect(mean).to.be.closeTo(((60 ** 2 - 1) / 2 + 60 * 30) / 89 * 1_000, 800);
    });
  });
});
