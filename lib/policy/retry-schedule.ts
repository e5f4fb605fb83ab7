/**
 * Retry schedules: the delays between attempts of one delivery.
 *
 * A schedule of N delays allows N retries after the first attempt, so N + 1
 * attempts in all. An endpoint names a preset or gives its own ISO-8601
 * durations; both end up as milliseconds through {@link scheduleOf}.
 */
import { Duration } from 'luxon';
import { ValidationError } from '../errors.ts';
import type { RetrySpec } from '../model.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/**
 * The named schedules. `default` is the one DESIGN.md specifies: 8 retries
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
} as const;

export type RetryPresetName = keyof typeof RETRY_PRESETS;

/** Limits on a custom schedule, so one endpoint cannot keep a delivery alive for months. */
export const SCHEDULE_LIMITS = Object.freeze({
  maxEntries: 20,
  maxDelayMs: 7 * DAY,
});

function show(value: unknown): string {
  if (value === undefined) return 'undefined';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

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
  return durations.map((entry: unknown, index) => {
    const at = `${field}[${index}]`;
    if (typeof entry !== 'string') {
      throw new ValidationError(at, `must be an ISO-8601 duration string such as PT30S (got ${show(entry)})`);
    }
    const duration = Duration.fromISO(entry);
    if (!duration.isValid) {
      throw new ValidationError(at, `must be an ISO-8601 duration such as PT30S (got ${show(entry)})`);
    }
    const ms = Math.round(duration.toMillis());
    if (!(ms > 0)) {
      throw new ValidationError(at, `must be longer than zero (got ${show(entry)})`);
    }
    if (ms > SCHEDULE_LIMITS.maxDelayMs) {
      throw new ValidationError(at, `must be at most 7 days, P7D (got ${show(entry)})`);
    }
    return ms;
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Validates an endpoint's retry setting: exactly one of `{ preset }` or
 * `{ schedule }`.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming the field and rule.
 */
export function resolveRetrySpec(spec: unknown, field = 'retry'): RetrySpec {
  if (!isRecord(spec)) {
    throw new ValidationError(field, `must be an object, { "preset": "default" } or { "schedule": ["PT30S", …] } (got ${show(spec)})`);
  }
  const unknownKeys = Object.keys(spec).filter((key) => key !== 'preset' && key !== 'schedule');
  if (unknownKeys.length > 0) {
    throw new ValidationError(field, `unknown key ${show(unknownKeys[0])}; only "preset" or "schedule" is allowed`);
  }
  const hasPreset = spec['preset'] !== undefined;
  const hasSchedule = spec['schedule'] !== undefined;
  if (hasPreset === hasSchedule) {
    throw new ValidationError(field, 'must have exactly one of "preset" or "schedule"');
  }
  if (hasPreset) {
    const preset = spec['preset'];
    if (typeof preset !== 'string' || !Object.hasOwn(RETRY_PRESETS, preset)) {
      throw new ValidationError(`${field}.preset`, `must be one of ${Object.keys(RETRY_PRESETS).join(', ')} (got ${show(preset)})`);
    }
    return { preset: preset as RetryPresetName };
  }
  const schedule = spec['schedule'];
  parseSchedule(schedule, `${field}.schedule`);
  return { schedule: [...(schedule as string[])] };
}

/**
 * Parsed custom schedules by their text. `scheduleOf` runs once per attempt, and
 * endpoints share few distinct schedules, so the cache stays small; it is
 * cleared if it ever grows past the bound rather than tracking recency.
 */
const parsedSchedules = new Map<string, readonly number[]>();
const PARSED_SCHEDULES_MAX = 1_000;

/**
 * The delays, in milliseconds, of a validated retry spec. Entry `i` is the wait
 * after attempt `i + 1`.
 *
 * @throws ValidationError when a custom schedule is invalid (stored specs were
 *   validated by {@link resolveRetrySpec}, so this means a corrupt store).
 */
export function scheduleOf(spec: RetrySpec): readonly number[] {
  if ('preset' in spec) return RETRY_PRESETS[spec.preset];
  const key = spec.schedule.join(' ');
  let delays = parsedSchedules.get(key);
  if (delays === undefined) {
    delays = Object.freeze(parseSchedule(spec.schedule));
    if (parsedSchedules.size >= PARSED_SCHEDULES_MAX) parsedSchedules.clear();
    parsedSchedules.set(key, delays);
  }
  return delays;
}
