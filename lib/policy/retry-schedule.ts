/**
 * Retry schedules: explicit delays between attempts of one delivery.
 *
 * A schedule of N delays allows N retries after the first attempt, so N + 1
 * attempts in all. An endpoint names a preset or gives its own ISO-8601
 * durations (or a formula, lib/policy/retry-formula.ts); every form is
 * compiled to a `RetryPolicy` by lib/policy/retry-policy.ts.
 */
import { ValidationError } from '../errors.ts';
import type { RetryPresetName } from '../model.ts';
import { parseDurationMs, show, type DurationLimit } from './iso-duration.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * The named schedules. `default` is the documented one (docs/DELIVERY.md): 8 retries
 * after the first attempt (9 attempts) spread over about 31 hours, long enough
 * to ride out a consumer's bad night without paging anyone.
 */
export const RETRY_PRESETS = {
  /** For consumers that recover fast and want events soon: 6 retries over about 1 h 43 min. */
  aggressive: [5 * SECOND, 30 * SECOND, 2 * MINUTE, 10 * MINUTE, 30 * MINUTE, 1 * HOUR],
  /** 8 retries over about 31 h. */
  default: [30 * SECOND, 1 * MINUTE, 2 * MINUTE, 5 * MINUTE, 15 * MINUTE, 1 * HOUR, 6 * HOUR, 24 * HOUR],
  /** For consumers with long maintenance windows: 9 retries over about 6 days 20 h. */
  relaxed: [1 * MINUTE, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 6 * HOUR, 12 * HOUR, 24 * HOUR, 48 * HOUR, 72 * HOUR],
} as const satisfies Record<RetryPresetName, readonly number[]>;

/** Limits on a custom schedule, so one endpoint cannot keep a delivery alive for months. */
export const SCHEDULE_LIMITS = Object.freeze({
  maxEntries: 20,
  maxDelayMs: 7 * DAY,
});

/** The longest single wait, for schedules and formulas alike. */
export const RETRY_DELAY_LIMIT: DurationLimit = Object.freeze({ maxMs: SCHEDULE_LIMITS.maxDelayMs, text: '7 days, P7D' });

/**
 * Parses a custom schedule of ISO-8601 durations (`["PT30S", "PT5M", "P1D"]`)
 * into delays in milliseconds.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field` (and the index
 *   of a bad entry) when it is not an array of 1 to 20 durations, each above
 *   zero and at most 7 days.
 */
export function parseSchedule(durations: unknown, field = 'retry.schedule'): number[] {
  if (!Array.isArray(durations)) {
    throw new ValidationError(field, `must be an array of ISO-8601 durations such as ["PT30S", "PT5M"] (got ${show(durations)})`);
  }
  if (durations.length === 0) {
    // No retries is what `mode: at-most-once` is for; an empty schedule is more likely a mistake.
    throw new ValidationError(field, 'must hold at least one duration (use mode "at-most-once" for no retries)');
  }
  if (durations.length > SCHEDULE_LIMITS.maxEntries) {
    throw new ValidationError(field, `must hold at most ${SCHEDULE_LIMITS.maxEntries} durations (got ${durations.length})`);
  }
  return durations.map((entry: unknown, index) => parseDurationMs(entry, `${field}[${index}]`, RETRY_DELAY_LIMIT));
}
