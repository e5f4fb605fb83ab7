/**
 * Jitter on retry delays.
 *
 * When an endpoint goes down, every delivery in flight to it fails within the
 * same few seconds. Without jitter they would all come due again at the same
 * instant on every step of the schedule, and the moment the endpoint recovers
 * it would meet its whole backlog at once (a thundering herd), likely failing
 * again. Spreading each delay uniformly over ±20 % turns that spike into a
 * ramp while keeping the schedule's shape.
 */
import type { Random } from '../clock.ts';

/** How far a delay may move either way, as a fraction of it. */
export const JITTER_RATIO = 0.2;

/**
 * `delayMs` moved uniformly within ±`ratio` of itself:
 * `delayMs × (1 + ratio × (2r − 1))` with `r = random()`, rounded to the
 * millisecond.
 */
export function jitter(delayMs: number, random: Random, ratio = JITTER_RATIO): number {
  return Math.round(delayMs * (1 + ratio * (2 * random() - 1)));
}
