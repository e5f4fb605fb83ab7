/**
 * Jitter on retry waits.
 *
 * When an endpoint goes down, every delivery in flight to it fails within the
 * same few seconds. Without jitter they would all come due again at the same
 * instant on every step of the schedule, and the moment the endpoint recovers
 * it would meet its whole backlog at once (a thundering herd), likely failing
 * again. Each kind below spreads a wait differently:
 *
 * - `±20%` (the default) keeps the schedule's shape: a ramp around each step.
 * - `full` spreads the most (AWS's "full jitter"): the herd is cut the
 *   furthest, at the price of some retries coming almost at once.
 * - `equal` keeps at least half of each wait, so retries never come early.
 * - `decorrelated` lets each wait wander between the first wait and three
 *   times the previous one (AWS's "decorrelated jitter"), capped.
 *
 * `r` is one draw of the injected {@link Random}, uniform in [0, 1); every
 * result is rounded to the millisecond.
 */
import type { Random } from '../clock.ts';

/** How far a `±20%` wait may move either way, as a fraction of it. */
export const JITTER_RATIO = 0.2;

/** How much longer than the previous wait a decorrelated wait may be, at most (AWS's factor). */
export const DECORRELATED_GROWTH = 3;

/**
 * `delayMs` moved uniformly within ±`ratio` of itself:
 * `delayMs × (1 + ratio × (2r − 1))`, rounded to the millisecond.
 */
export function jitter(delayMs: number, random: Random, ratio = JITTER_RATIO): number {
  return Math.round(delayMs * (1 + ratio * (2 * random() - 1)));
}

/** Full jitter: uniform between 0 and `delayMs`, `delayMs × r`. */
export function fullJitter(delayMs: number, random: Random): number {
  return Math.round(delayMs * random());
}

/** Equal jitter: half of `delayMs` kept, the other half drawn: `delayMs / 2 + (delayMs / 2) × r`. */
export function equalJitter(delayMs: number, random: Random): number {
  const half = delayMs / 2;
  return Math.round(half + half * random());
}

/**
 * Decorrelated jitter: `min(maxMs, initialMs + (3 × previousMs − initialMs) × r)`, that is
 * uniform between `initialMs` and three times the previous wait, capped at `maxMs`. The first
 * wait takes `previousMs = initialMs`.
 */
export function decorrelatedJitter(previousMs: number, initialMs: number, maxMs: number, random: Random): number {
  const upper = DECORRELATED_GROWTH * previousMs;
  return Math.round(Math.min(maxMs, initialMs + (upper - initialMs) * random()));
}
