import { expect } from 'chai';
import { AdaptiveLimit, adaptiveLimitFor } from '../../lib/engine/adaptive-limit.ts';
import type { Outcome } from '../../lib/model.ts';

const response = (status: number): Outcome => ({ kind: 'response', status, location: null, retryAfter: null, body: '' });
const OK = response(200);
const TARGET_MS = 500;

/** A limit past its slow start (one congestion signal taken), at `limit`. */
function inAvoidance(limit: number, max = 64): AdaptiveLimit {
  const adaptive = new AdaptiveLimit({ initial: limit * 2, targetLatencyMs: TARGET_MS }, max);
  adaptive.record({ outcome: response(503), durationMs: 10, generation: 0, inFlight: limit * 2 });
  expect(adaptive.limit).to.equal(limit);
  return adaptive;
}

/** Feeds `n` fast 2xx sent in the current generation with the limit fully used. */
function fast(adaptive: AdaptiveLimit, n: number): void {
  for (let i = 0; i < n; i++) adaptive.record({ outcome: OK, durationMs: 10, generation: adaptive.generation, inFlight: adaptive.limit });
}

describe('AdaptiveLimit', () => {
  context('when it starts', () => {
    it('allows `initial` requests at once, or the maximum when `initial` is above it', () => {
      expect(new AdaptiveLimit({ initial: 3, targetLatencyMs: TARGET_MS }, 10).limit).to.equal(3);
      expect(new AdaptiveLimit({ initial: 30, targetLatencyMs: TARGET_MS }, 10).limit).to.equal(10);
    });
  });

  context('in slow start (no congestion seen yet)', () => {
    it('adds one per fast 2xx: the limit doubles each round trip', () => {
      const adaptive = new AdaptiveLimit({ initial: 2, targetLatencyMs: TARGET_MS }, 64);
      fast(adaptive, 2);
      expect(adaptive.limit).to.equal(4);
      fast(adaptive, 4);
      expect(adaptive.limit).to.equal(8);
    });

    it('never goes above the maximum (the endpoint’s concurrency)', () => {
      const adaptive = new AdaptiveLimit({ initial: 1, targetLatencyMs: TARGET_MS }, 5);
      fast(adaptive, 100);
      expect(adaptive.limit).to.equal(5);
    });
  });

  context('in avoidance (after a congestion signal)', () => {
    it('adds one per `limit` fast 2xx: one step per round trip', () => {
      const adaptive = inAvoidance(10);
      fast(adaptive, 9);
      expect(adaptive.limit).to.equal(10);
      fast(adaptive, 1);
      expect(adaptive.limit).to.equal(11);
      fast(adaptive, 10);
      expect(adaptive.limit, 'the next step needs 11').to.equal(11);
      fast(adaptive, 1);
      expect(adaptive.limit).to.equal(12);
    });

    it('stays at the maximum however many fast 2xx come', () => {
      const adaptive = inAvoidance(2, 5);
      fast(adaptive, 1_000);
      expect(adaptive.limit).to.equal(5);
    });
  });

  context('when a fast 2xx comes back with less than half the limit in flight', () => {
    it('does not grow: an endpoint sent little says nothing about how much more it takes', () => {
      const adaptive = new AdaptiveLimit({ initial: 8, targetLatencyMs: TARGET_MS }, 64);
      for (let i = 0; i < 50; i++) adaptive.record({ outcome: OK, durationMs: 10, generation: 0, inFlight: 3 });
      expect(adaptive.limit).to.equal(8);
      adaptive.record({ outcome: OK, durationMs: 10, generation: 0, inFlight: 4 });
      expect(adaptive.limit).to.equal(9);
    });
  });

  context('on a sign of congestion', () => {
    const signs: ReadonlyArray<readonly [string, Outcome, number]> = [
      ['429', response(429), 10],
      ['502', response(502), 10],
      ['503', response(503), 10],
      ['504', response(504), 10],
      ['a timeout', { kind: 'timeout', timeoutMs: 10_000 }, 10_000],
      ['a 2xx slower than the target', OK, TARGET_MS + 1],
      ['a 4xx slower than the target', response(400), TARGET_MS + 1],
    ];
    for (const [what, outcome, durationMs] of signs) {
      it(`halves the limit on ${what}`, () => {
        const adaptive = new AdaptiveLimit({ initial: 40, targetLatencyMs: TARGET_MS }, 64);
        adaptive.record({ outcome, durationMs, generation: 0, inFlight: 40 });
        expect(adaptive.limit).to.equal(20);
        expect(adaptive.generation).to.equal(1);
      });
    }

    it('does not halve on a 2xx exactly at the target latency', () => {
      const adaptive = new AdaptiveLimit({ initial: 40, targetLatencyMs: TARGET_MS }, 64);
      adaptive.record({ outcome: OK, durationMs: TARGET_MS, generation: 0, inFlight: 40 });
      expect(adaptive.limit).to.equal(41);
    });

    it('halves once per generation: the other answers to requests sent before the halving change nothing', () => {
      const adaptive = new AdaptiveLimit({ initial: 40, targetLatencyMs: TARGET_MS }, 64);
      for (let i = 0; i < 40; i++) adaptive.record({ outcome: response(503), durationMs: 10, generation: 0, inFlight: 40 - i });
      expect(adaptive.limit).to.equal(20);
      // A request sent after the halving that meets congestion again halves again.
      adaptive.record({ outcome: response(503), durationMs: 10, generation: 1, inFlight: 20 });
      expect(adaptive.limit).to.equal(10);
    });

    it('never goes below 1', () => {
      const adaptive = new AdaptiveLimit({ initial: 3, targetLatencyMs: TARGET_MS }, 64);
      for (let i = 0; i < 5; i++) adaptive.record({ outcome: response(503), durationMs: 10, generation: adaptive.generation, inFlight: 1 });
      expect(adaptive.limit).to.equal(1);
      expect(adaptive.generation).to.equal(5);
    });
  });

  context('on an outcome that says nothing about load', () => {
    const neutral: ReadonlyArray<readonly [string, Outcome]> = [
      ['a 400', response(400)],
      ['a 500', response(500)],
      ['a 3xx', response(301)],
      ['a network error', { kind: 'network', code: 'ECONNREFUSED', message: 'refused' }],
    ];
    for (const [what, outcome] of neutral) {
      it(`leaves the limit alone on ${what}`, () => {
        const adaptive = new AdaptiveLimit({ initial: 8, targetLatencyMs: TARGET_MS }, 64);
        adaptive.record({ outcome, durationMs: 10, generation: 0, inFlight: 8 });
        expect([adaptive.limit, adaptive.generation]).to.deep.equal([8, 0]);
      });
    }
  });

  describe('adaptiveLimitFor', () => {
    it('gives a fixed endpoint none, so its mailbox keeps its concurrency', () => {
      expect(adaptiveLimitFor({ concurrency: 8 }, undefined)).to.equal(undefined);
      const current = new AdaptiveLimit({ initial: 2, targetLatencyMs: TARGET_MS }, 8);
      expect(adaptiveLimitFor({ concurrency: 8 }, current), 'made fixed again').to.equal(undefined);
    });

    it('keeps what an endpoint that stays adaptive has learnt, capped by a lowered maximum', () => {
      const current = new AdaptiveLimit({ initial: 2, targetLatencyMs: TARGET_MS }, 64);
      fast(current, 2 + 4 + 8);
      expect(current.limit).to.equal(16);
      const settings = { initial: 2, targetLatencyMs: 800 };
      const kept = adaptiveLimitFor({ concurrency: 64, adaptiveConcurrency: settings }, current);
      expect(kept).to.equal(current);
      expect([kept?.limit, kept?.settings]).to.deep.equal([16, settings]);
      adaptiveLimitFor({ concurrency: 6, adaptiveConcurrency: settings }, current);
      expect(current.limit).to.equal(6);
    });
  });
});
