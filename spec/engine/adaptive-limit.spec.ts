import { expect } from 'chai';
import { AdaptiveLimit, adaptiveLimitFor } from '../../lib/engine/adaptive-limit.ts';
import type { Outcome } from '../../lib/model.ts';

const response = (status: number): Outcome => ({ kind: 'response', status, location: null, retryAfter: null, body: '' });
const OK = response(200);
const TARGET_MS = 500;

/** A limit past its slow start (one congestion signal taken at `limit * 2`, its ceiling), at `limit`. */
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

/** Feeds `n` rounds: each, as many fast 2xx as the limit allowed when it began, the limit fully used. */
function rounds(adaptive: AdaptiveLimit, n: number): void {
  for (let i = 0; i < n; i++) fast(adaptive, adaptive.limit);
}

/**
 * One round trip to a consumer that takes `capacity` requests at once: the limit's worth are sent;
 * those beyond the capacity are answered 503 at once (first), the others 2xx. Returns the refused.
 */
function roundAgainst(adaptive: AdaptiveLimit, capacity: number): number {
  const sent = adaptive.limit;
  const generation = adaptive.generation;
  const refused = Math.max(0, sent - capacity);
  for (let i = 0; i < refused; i++) adaptive.record({ outcome: response(503), durationMs: 1, generation, inFlight: sent });
  for (let i = 0; i < sent - refused; i++) adaptive.record({ outcome: OK, durationMs: 10, generation, inFlight: sent });
  return refused;
}

/** Rounds against `capacity` until one is refused (at most `limit` rounds): how many, and the limit that was refused. */
function roundsUntilRefused(adaptive: AdaptiveLimit, capacity: number, limit = 1_000): { rounds: number; refusedAt: number } {
  for (let round = 1; round <= limit; round++) {
    const sent = adaptive.limit;
    if (roundAgainst(adaptive, capacity) > 0) return { rounds: round, refusedAt: sent };
  }
  throw new Error(`no round refused within ${limit}`);
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

  context('in avoidance (after a congestion signal, below the limit it came at: the ceiling)', () => {
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

  context('in probe (a clean round at the ceiling: the consumer now takes more than when it last struggled)', () => {
    it('adds 1, 2, 4, 8… per round from the ceiling, up to the maximum', () => {
      const adaptive = inAvoidance(10);
      rounds(adaptive, 10);
      expect(adaptive.limit, 'one per round up to the ceiling').to.equal(20);
      const seen: number[] = [];
      for (let i = 0; i < 7; i++) {
        rounds(adaptive, 1);
        seen.push(adaptive.limit);
      }
      expect(seen).to.deep.equal([21, 23, 27, 35, 51, 64, 64]);
    });

    it('reaches the maximum from below the ceiling C in (C - limit) + ⌈log2(max - C + 1)⌉ rounds', () => {
      // From 5 with a ceiling of 10 to 64: 5 + ⌈log2(55)⌉ = 5 + 6 = 11 rounds (one per round: 59).
      const adaptive = inAvoidance(5);
      rounds(adaptive, 10);
      expect(adaptive.limit).to.equal(41);
      rounds(adaptive, 1);
      expect(adaptive.limit).to.equal(64);
    });

    it('passes a capacity T that rose past the ceiling C after ⌊log2(T - C + 1)⌋ + 1 clean rounds, by at most T - C + 1', () => {
      for (let capacity = 11; capacity <= 63; capacity++) {
        const adaptive = inAvoidance(10);
        rounds(adaptive, 10);
        const { rounds: taken, refusedAt } = roundsUntilRefused(adaptive, capacity);
        const ceiling = 20;
        if (capacity < ceiling) {
          // Still below the ceiling: the round at the ceiling is refused, no probe starts.
          expect([taken, refusedAt], `capacity ${capacity}`).to.deep.equal([1, 20]);
          continue;
        }
        expect(taken - 1, `clean rounds before passing capacity ${capacity}`).to.equal(Math.floor(Math.log2(capacity - ceiling + 1)) + 1);
        expect(refusedAt - capacity, `overshoot at capacity ${capacity}`).to.be.at.most(capacity - ceiling + 1);
      }
    });

    it('does not grow, nor double its step, while fewer than half the limit are in flight', () => {
      const adaptive = inAvoidance(10);
      rounds(adaptive, 12);
      expect(adaptive.limit).to.equal(23);
      for (let i = 0; i < 100; i++) adaptive.record({ outcome: OK, durationMs: 10, generation: adaptive.generation, inFlight: 11 });
      expect(adaptive.limit).to.equal(23);
      rounds(adaptive, 1);
      expect(adaptive.limit, 'the step it had reached').to.equal(27);
    });

    it('ends on a sign of congestion: the limit halves, that limit is the new ceiling and the next probe starts again at +1', () => {
      const adaptive = inAvoidance(10);
      rounds(adaptive, 14);
      expect(adaptive.limit).to.equal(35);
      adaptive.record({ outcome: response(503), durationMs: 1, generation: adaptive.generation, inFlight: 35 });
      expect(adaptive.limit).to.equal(17);
      rounds(adaptive, 18);
      expect(adaptive.limit, 'one per round up to the new ceiling').to.equal(35);
      const seen: number[] = [];
      for (let i = 0; i < 3; i++) {
        rounds(adaptive, 1);
        seen.push(adaptive.limit);
      }
      expect(seen).to.deep.equal([36, 38, 42]);
    });
  });

  context('when the consumer’s capacity changes: 50, then 10, then 200 (the maximum 64 is the most it can use)', () => {
    it('halves down to the lower capacity, then passes it by at most one request per round', () => {
      const adaptive = new AdaptiveLimit({ initial: 1, targetLatencyMs: TARGET_MS }, 64);
      for (let i = 0; i < 100; i++) roundAgainst(adaptive, 50);
      const { rounds: toDrop } = roundsUntilRefused(adaptive, 10);
      let halvings = 0;
      while (adaptive.limit > 10) {
        roundAgainst(adaptive, 10);
        halvings += 1;
      }
      expect(toDrop + halvings, 'rounds until at or below 10').to.be.at.most(1 + Math.ceil(Math.log2(64 / 10)));
      const refusedPerRound: number[] = [];
      for (let i = 0; i < 100; i++) refusedPerRound.push(roundAgainst(adaptive, 10));
      expect(Math.max(...refusedPerRound)).to.equal(1);
      // One refused round (at 11, the ceiling) per climb from 5: every 7th round.
      expect(refusedPerRound.filter((r) => r > 0)).to.have.length.within(Math.floor(100 / 7), Math.ceil(100 / 7));
    });

    it('then reaches the maximum within 12 rounds of the jump (6 to the old ceiling of 11, 6 past it)', () => {
      const adaptive = new AdaptiveLimit({ initial: 1, targetLatencyMs: TARGET_MS }, 64);
      for (let i = 0; i < 100; i++) roundAgainst(adaptive, 50);
      for (let i = 0; i < 100; i++) roundAgainst(adaptive, 10);
      let taken = 0;
      while (adaptive.limit < 64) {
        expect(roundAgainst(adaptive, 200)).to.equal(0);
        taken += 1;
      }
      expect(taken).to.be.at.most(12);
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
