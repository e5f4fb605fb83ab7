/**
 * ISO-8601 durations in retry policies (`PT30S`, `PT6H`, `P2D`): parsed to
 * milliseconds with errors that name the field, the rule and the value.
 *
 * luxon parses them; it is loaded at the first duration parsed, not with this
 * module, since a node whose endpoints use the retry presets never parses one
 * and luxon's module holds about a megabyte of heap.
 */
import { createRequire } from 'node:module';
import type { Duration as LuxonDuration } from 'luxon';
import { ValidationError } from '../errors.ts';

const load = createRequire(import.meta.url);
let Duration: typeof LuxonDuration | undefined;

/** The longest duration a field takes, in milliseconds and as the error message says it. */
export interface DurationLimit {
  readonly maxMs: number;
  /** e.g. `7 days, P7D` */
  readonly text: string;
}

/** A value as an error message shows it: JSON where it can be. */
export function show(value: unknown): string {
  if (value === undefined) return 'undefined';
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/**
 * The milliseconds of an ISO-8601 duration string, rounded.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field` when the value is not an
 *   ISO-8601 duration string, not above zero, or longer than `limit`.
 */
export function parseDurationMs(value: unknown, field: string, limit: DurationLimit): number {
  if (typeof value !== 'string') {
    throw new ValidationError(field, `must be an ISO-8601 duration string such as PT30S (got ${show(value)})`);
  }
  Duration ??= (load('luxon') as typeof import('luxon')).Duration;
  const duration = Duration.fromISO(value);
  if (!duration.isValid) {
    throw new ValidationError(field, `must be an ISO-8601 duration such as PT30S (got ${show(value)})`);
  }
  const ms = Math.round(duration.toMillis());
  if (!(ms > 0)) {
    throw new ValidationError(field, `must be longer than zero (got ${show(value)})`);
  }
  if (ms > limit.maxMs) {
    throw new ValidationError(field, `must be at most ${limit.text} (got ${show(value)})`);
  }
  return ms;
}
