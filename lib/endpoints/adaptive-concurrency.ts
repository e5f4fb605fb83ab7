/**
 * The rule of an endpoint's `adaptiveConcurrency`, `{initial?, targetLatencyMs?}`:
 * each error names the field and shows the value. Pure: input in, a resolved
 * {@link AdaptiveConcurrency} out (fields left out take the defaults).
 */
import { ValidationError } from '../errors.ts';
import { ADAPTIVE_CONCURRENCY_DEFAULTS, type AdaptiveConcurrency } from '../model.ts';

export const ADAPTIVE_INITIAL_MAX = 256;
export const ADAPTIVE_TARGET_LATENCY_MAX_MS = 30_000;

const FIELDS = ['initial', 'targetLatencyMs'] as const;

/**
 * Checks `{initial?, targetLatencyMs?}` and fills in what is left out.
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field`, `field.initial`,
 *   `field.targetLatencyMs` or an unknown `field.<key>`.
 */
export function validateAdaptiveConcurrency(value: unknown, field = 'adaptiveConcurrency'): AdaptiveConcurrency {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError(
      field,
      `must be an object {"initial"?, "targetLatencyMs"?} ({} for the defaults), or null for a fixed concurrency (got ${JSON.stringify(value)})`,
    );
  }
  const body = value as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    if (!(FIELDS as readonly string[]).includes(key)) {
      throw new ValidationError(`${field}.${key}`, `is not a known field (allowed: ${FIELDS.join(', ')})`);
    }
  }
  return {
    initial: integerIn(body.initial ?? ADAPTIVE_CONCURRENCY_DEFAULTS.initial, `${field}.initial`, 1, ADAPTIVE_INITIAL_MAX),
    targetLatencyMs: integerIn(
      body.targetLatencyMs ?? ADAPTIVE_CONCURRENCY_DEFAULTS.targetLatencyMs,
      `${field}.targetLatencyMs`,
      1,
      ADAPTIVE_TARGET_LATENCY_MAX_MS,
    ),
  };
}

function integerIn(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(field, `must be an integer from ${min} to ${max} (got ${JSON.stringify(value)})`);
  }
  return value;
}
