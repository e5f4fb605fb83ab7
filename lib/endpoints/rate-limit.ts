/**
 * The rule of an endpoint's `rateLimit`, `{perSecond, burst?}`: each error
 * names the field and shows the value. Pure: input in, a resolved
 * {@link RateLimit} out (its `burst` filled in).
 */
import { ValidationError } from '../errors.ts';
import type { RateLimit } from '../model.ts';

/** The slowest limit: one attempt every 100 s. */
export const RATE_LIMIT_MIN_PER_SECOND = 0.01;
export const RATE_LIMIT_MAX_PER_SECOND = 10_000;
export const RATE_LIMIT_MAX_BURST = 10_000;

const FIELDS = ['perSecond', 'burst'] as const;

/** The burst when none is given: a second's worth of tokens, at least one. */
export function defaultBurst(perSecond: number): number {
  return Math.max(1, Math.ceil(perSecond));
}

/**
 * Checks `{perSecond, burst?}` and fills in `burst`.
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field`, `field.perSecond`, `field.burst`
 *   or an unknown `field.<key>`.
 */
export function validateRateLimit(value: unknown, field = 'rateLimit'): RateLimit {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError(field, `must be an object {"perSecond", "burst"?}, or null for no limit (got ${JSON.stringify(value)})`);
  }
  const body = value as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    if (!(FIELDS as readonly string[]).includes(key)) {
      throw new ValidationError(`${field}.${key}`, `is not a known field (allowed: ${FIELDS.join(', ')})`);
    }
  }
  const { perSecond, burst } = body;
  if (typeof perSecond !== 'number' || !Number.isFinite(perSecond) || perSecond < RATE_LIMIT_MIN_PER_SECOND || perSecond > RATE_LIMIT_MAX_PER_SECOND) {
    throw new ValidationError(
      `${field}.perSecond`,
      `must be a number from ${RATE_LIMIT_MIN_PER_SECOND} to ${RATE_LIMIT_MAX_PER_SECOND} (got ${JSON.stringify(perSecond ?? null)})`,
    );
  }
  if (burst === undefined) return { perSecond, burst: defaultBurst(perSecond) };
  if (typeof burst !== 'number' || !Number.isInteger(burst) || burst < 1 || burst > RATE_LIMIT_MAX_BURST) {
    throw new ValidationError(`${field}.burst`, `must be an integer from 1 to ${RATE_LIMIT_MAX_BURST} (got ${JSON.stringify(burst)})`);
  }
  return { perSecond, burst };
}
