import { expect } from 'chai';
import { seededRandom } from '../../lib/clock.ts';
import {
  LATENCY_BOUNDS_MS,
  LATENCY_BUCKETS,
  latencyBucketOf,
  latencyPercentile,
  minuteOf,
  isInScope,
} from '../../lib/store/delivery-minutes.ts';

/** The nearest-rank percentile of exact durations. */
function exactPercentile(durations: readonly number[], q: number): number {
  const sorted = [...durations].sort((a, b) => a - b);
  return sorted[Math.max(1, Math.ceil(q * sorted.length)) - 1] ?? Number.NaN;
}

function histogramOf(durations: readonly number[]): number[] {
  const latency = new Array<number>(LATENCY_BUCKETS).fill(0);
  for (const d of durations) latency[latencyBucketOf(d)] = (latency[latencyBucketOf(d)] ?? 0) + 1;
  return latency;
}

describe('Delivery minutes', () => {
  describe('latencyBucketOf', () => {
    it('counts a duration in the first bucket whose bound is at least it, longer ones in the last', () => {
      expect(latencyBucketOf(0)).to.equal(0);
      expect(latencyBucketOf(1)).to.equal(0);
      expect(latencyBucketOf(2)).to.equal(1);
      expect(latencyBucketOf(51)).to.equal(LATENCY_BOUNDS_MS.indexOf(80));
      expect(latencyBucketOf(50_000)).to.equal(LATENCY_BOUNDS_MS.length - 1);
      expect(latencyBucketOf(50_001)).to.equal(LATENCY_BUCKETS - 1);
      for (let d = 0; d <= 60_000; d += 7) {
        const bucket = latencyBucketOf(d);
        const bound = LATENCY_BOUNDS_MS[bucket] ?? Infinity;
        const below = bucket === 0 ? -Infinity : (LATENCY_BOUNDS_MS[bucket - 1] ?? 0);
        expect(d <= bound && d > below, `${d} ms in bucket ${bucket}`).to.equal(true);
      }
    });
  });

  describe('latencyPercentile', () => {
    it('is null without attempts', () => {
      expect(latencyPercentile(new Array<number>(LATENCY_BUCKETS).fill(0), 0.5)).to.equal(null);
    });

    it('is never below the exact percentile and at most 5/3 of it (as documented), for durations of 1 ms to 50 s', () => {
      const random = seededRandom(11);
      for (let trial = 0; trial < 200; trial++) {
        // Log-uniform durations around a random scale, as real endpoints spread.
        const scale = Math.exp(random() * Math.log(20_000));
        const durations = Array.from({ length: 1 + Math.floor(random() * 300) }, () => Math.min(50_000, Math.max(1, Math.round(scale * Math.exp((random() - 0.5) * 3)))));
        for (const q of [0.5, 0.95]) {
          const exact = exactPercentile(durations, q);
          const reported = latencyPercentile(histogramOf(durations), q) ?? Number.NaN;
          expect(reported, `q=${q} of ${durations.length}`).to.be.at.least(exact).and.at.most((exact * 5) / 3);
        }
      }
    });

    it('reports attempts beyond the last bound as the last bound', () => {
      expect(latencyPercentile(histogramOf([90_000, 120_000]), 0.95)).to.equal(LATENCY_BOUNDS_MS.at(-1));
    });
  });

  describe('minuteOf', () => {
    it('is the start of the minute a time falls in', () => {
      const t = Date.UTC(2026, 0, 1, 12, 34);
      expect(minuteOf(t)).to.equal(t);
      expect(minuteOf(t + 59_999)).to.equal(t);
      expect(minuteOf(t - 1)).to.equal(t - 60_000);
    });
  });

  describe('isInScope', () => {
    it('covers every endpoint, a tenant\'s, or the named ones', () => {
      const endpoint = { id: 'ep_1', tenantId: 'acme' };
      expect(isInScope(endpoint, { kind: 'all' })).to.equal(true);
      expect(isInScope(endpoint, { kind: 'tenant', tenantId: 'acme' })).to.equal(true);
      expect(isInScope(endpoint, { kind: 'tenant', tenantId: 'globex' })).to.equal(false);
      expect(isInScope(endpoint, { kind: 'endpoints', endpointIds: ['ep_2'] })).to.equal(false);
      expect(isInScope(endpoint, { kind: 'endpoints', endpointIds: ['ep_2', 'ep_1'] })).to.equal(true);
    });
  });
});
