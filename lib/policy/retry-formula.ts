/**
 * Retry waits by formula: `{"initial": "PT30S", "multiplier": 2, "max": "PT6H", "attempts": 9}`.
 *
 * The wait after attempt n is `initial × multiplier^(n−1)`, at most `max`, then jittered
 * (lib/policy/jitter.ts). Retrying stops after `attempts` attempts in all, or once the next
 * attempt would fall beyond `window` since the round's first attempt, whichever comes first; a
 * formula names at least one of the two. With `decorrelated` jitter the waits grow by their own
 * factor (up to 3× the previous one), so such a formula takes no `multiplier`.
 */
import { ValidationError } from '../errors.ts';
import { JitterKind, type RetryFormula, type ScheduleJitterKind } from '../model.ts';
import { parseDurationMs, show } from './iso-duration.ts';
import { RETRY_DELAY_LIMIT } from './retry-schedule.ts';

const DAY = 24 * 60 * 60 * 1_000;

/** Limits on a formula, so one endpoint cannot keep a delivery alive for months. */
export const FORMULA_LIMITS = Object.freeze({
  /** Attempts in all, the first included; also the bound of a formula given only a window. */
  maxAttempts: 50,
  minMultiplier: 1,
  maxMultiplier: 10,
  maxWindowMs: 30 * DAY,
});

const WINDOW_LIMIT = Object.freeze({ maxMs: FORMULA_LIMITS.maxWindowMs, text: '30 days, P30D' });

/** The keys a formula may have. */
export const FORMULA_KEYS = ['initial', 'multiplier', 'max', 'attempts', 'window', 'jitter'] as const;

/** A validated formula in milliseconds: what a decision needs. */
export type FormulaTerms = {
  readonly initialMs: number;
  readonly maxMs: number;
  /** `attempts`, or {@link FORMULA_LIMITS}.maxAttempts when only a window bounds the formula. */
  readonly maxAttempts: number;
  readonly windowMs: number | undefined;
} & (
  | { readonly jitter: ScheduleJitterKind; readonly multiplier: number }
  | { readonly jitter: typeof JitterKind.DECORRELATED }
);

/**
 * Validates a formula (an object with `initial`) and returns it as stored — its keys in a fixed
 * order, absent ones left out — with its terms in milliseconds.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming the field (`retry.initial`,
 *   `retry.window`, …) and the rule: an unknown key; `initial` or `max` not an ISO-8601 duration
 *   above zero and at most 7 days, or `max` below `initial`; `multiplier` not a number from 1 to
 *   10, or given with `decorrelated` jitter; `attempts` not an integer from 2 to 50; `window` not
 *   a duration of at least `initial` and at most 30 days; neither `attempts` nor `window`; an
 *   unknown `jitter`.
 */
export function parseRetryFormula(raw: Readonly<Record<string, unknown>>, field = 'retry'): { formula: RetryFormula; terms: FormulaTerms } {
  const unknownKey = Object.keys(raw).find((key) => !(FORMULA_KEYS as readonly string[]).includes(key));
  if (unknownKey !== undefined) {
    throw new ValidationError(field, `unknown key ${show(unknownKey)}; a formula takes ${FORMULA_KEYS.map((k) => `"${k}"`).join(', ')}`);
  }
  const jitter = raw['jitter'] === undefined ? JitterKind.PLUS_MINUS_20_PERCENT : parseJitterKind(raw['jitter'], `${field}.jitter`);
  const initialMs = parseDurationMs(raw['initial'], `${field}.initial`, RETRY_DELAY_LIMIT);
  if (raw['max'] === undefined) {
    throw new ValidationError(`${field}.max`, 'is required in a formula: the longest wait, an ISO-8601 duration such as PT6H');
  }
  const maxMs = parseDurationMs(raw['max'], `${field}.max`, RETRY_DELAY_LIMIT);
  if (maxMs < initialMs) {
    throw new ValidationError(`${field}.max`, `must be at least initial, ${show(raw['initial'])} (got ${show(raw['max'])})`);
  }
  const attempts = raw['attempts'] === undefined ? undefined : parseAttempts(raw['attempts'], `${field}.attempts`);
  const windowMs = raw['window'] === undefined ? undefined : parseDurationMs(raw['window'], `${field}.window`, WINDOW_LIMIT);
  if (windowMs !== undefined && windowMs < initialMs) {
    throw new ValidationError(`${field}.window`, `must be at least initial, ${show(raw['initial'])}, or no retry would fit (got ${show(raw['window'])})`);
  }
  if (attempts === undefined && windowMs === undefined) {
    throw new ValidationError(field, 'a formula must have "attempts", "window" or both, to say when retrying stops');
  }
  const initial = raw['initial'] as string;
  const max = raw['max'] as string;
  const limits = {
    ...(attempts === undefined ? {} : { attempts }),
    ...(windowMs === undefined ? {} : { window: raw['window'] as string }),
  } as { attempts: number; window?: string } | { window: string };
  const common = { initialMs, maxMs, maxAttempts: attempts ?? FORMULA_LIMITS.maxAttempts, windowMs };

  if (jitter === JitterKind.DECORRELATED) {
    if (raw['multiplier'] !== undefined) {
      throw new ValidationError(
        `${field}.multiplier`,
        `is not used with jitter "decorrelated", whose waits grow by up to 3× the previous one; remove it (got ${show(raw['multiplier'])})`,
      );
    }
    return { formula: { initial, max, ...limits, jitter }, terms: { ...common, jitter } };
  }
  const multiplier = parseMultiplier(raw['multiplier'], `${field}.multiplier`);
  const formula: RetryFormula = { initial, multiplier, max, ...limits, ...(raw['jitter'] === undefined ? {} : { jitter }) };
  return { formula, terms: { ...common, jitter, multiplier } };
}

/**
 * A jitter kind.
 *
 * @throws ValidationError naming `field` when `value` is not one of {@link JitterKind}.
 */
export function parseJitterKind(value: unknown, field: string): JitterKind {
  const kinds: readonly unknown[] = Object.values(JitterKind);
  if (!kinds.includes(value)) {
    throw new ValidationError(field, `must be one of ${Object.values(JitterKind).map((k) => `"${k}"`).join(', ')} (got ${show(value)})`);
  }
  return value as JitterKind;
}

/** The nominal wait after attempt `attemptNumber` (1-based), before jitter: `min(max, initial × multiplier^(n−1))`. */
export function growthWaitMs(initialMs: number, multiplier: number, maxMs: number, attemptNumber: number): number {
  return Math.min(maxMs, Math.round(initialMs * multiplier ** (attemptNumber - 1)));
}

function parseAttempts(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 2 || value > FORMULA_LIMITS.maxAttempts) {
    throw new ValidationError(
      field,
      `must be an integer from 2 to ${FORMULA_LIMITS.maxAttempts}, the attempts in all, the first included (use mode "at-most-once" for no retries) (got ${show(value)})`,
    );
  }
  return value;
}

function parseMultiplier(value: unknown, field: string): number {
  if (value === undefined) {
    throw new ValidationError(field, 'is required in a formula (unless jitter is "decorrelated"): how much each wait grows, such as 2');
  }
  const { minMultiplier, maxMultiplier } = FORMULA_LIMITS;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < minMultiplier || value > maxMultiplier) {
    throw new ValidationError(field, `must be a number from ${minMultiplier} to ${maxMultiplier} (got ${show(value)})`);
  }
  return value;
}
