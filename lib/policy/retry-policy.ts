/**
 * An endpoint's retry policy: its `retry` spec (a preset, an explicit schedule or a formula)
 * validated on input, and compiled once into what a decision needs — how many attempts, within
 * what window, and the wait after each attempt with its jitter. Pure.
 */
import { ValidationError } from '../errors.ts';
import { JitterKind, type RetryPresetName, type RetrySpec, type ScheduleJitterKind } from '../model.ts';
import type { Random } from '../clock.ts';
import { show } from './iso-duration.ts';
import { decorrelatedJitter, equalJitter, fullJitter, jitter } from './jitter.ts';
import { FORMULA_KEYS, growthWaitMs, parseJitterKind, parseRetryFormula } from './retry-formula.ts';
import { parseSchedule, RETRY_PRESETS } from './retry-schedule.ts';

/** How the wait after each attempt is found, before its jitter. */
export type RetryWaits =
  /** Entry `i` follows attempt `i + 1` (a preset or an explicit schedule). */
  | { readonly kind: 'list'; readonly delaysMs: readonly number[]; readonly jitter: ScheduleJitterKind }
  /** `min(max, initial × multiplier^(n−1))` after attempt n. */
  | { readonly kind: 'growth'; readonly initialMs: number; readonly multiplier: number; readonly maxMs: number; readonly jitter: ScheduleJitterKind }
  /** Decorrelated jitter between `initial` and `max`: the wait is drawn from the previous one. */
  | { readonly kind: 'decorrelated'; readonly initialMs: number; readonly maxMs: number };

export interface RetryPolicy {
  /** Attempts in all, the first included: none follows the last. */
  readonly maxAttempts: number;
  /** No retry is scheduled later than this after the round's first attempt started; `undefined`: no window. */
  readonly windowMs: number | undefined;
  readonly waits: RetryWaits;
}

/**
 * Validates an endpoint's retry setting: exactly one of `{ preset }`, `{ schedule }` or a formula
 * (`{ initial, … }`, lib/policy/retry-formula.ts), each with an optional `jitter`. Returns it as
 * it is stored.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming the field and the rule.
 */
export function resolveRetrySpec(spec: unknown, field = 'retry'): RetrySpec {
  if (!isRecord(spec)) {
    throw new ValidationError(field, `must be an object: { "preset": "default" }, { "schedule": ["PT30S", …] } or a formula { "initial": "PT30S", "multiplier": 2, "max": "PT6H", "attempts": 9 } (got ${show(spec)})`);
  }
  const forms = (['preset', 'schedule', 'initial'] as const).filter((key) => spec[key] !== undefined);
  if (forms.length === 0) {
    const formulaKey = Object.keys(spec).find((key) => key !== 'jitter' && (FORMULA_KEYS as readonly string[]).includes(key));
    if (formulaKey !== undefined) throw new ValidationError(`${field}.initial`, `is required in a formula (with ${show(formulaKey)}): the first wait, such as PT30S`);
  }
  if (forms.length !== 1) {
    throw new ValidationError(field, 'must have exactly one of "preset", "schedule" or "initial" (a formula)');
  }
  const [form] = forms;
  if (form === 'initial') return parseRetryFormula(spec, field).formula;

  const unknownKey = Object.keys(spec).find((key) => key !== form && key !== 'jitter');
  if (unknownKey !== undefined) {
    throw new ValidationError(field, `unknown key ${show(unknownKey)}; a ${form} takes only "${form}" and "jitter"`);
  }
  const jitter = spec['jitter'] === undefined ? {} : { jitter: scheduleJitter(spec['jitter'], `${field}.jitter`) };
  if (form === 'preset') {
    const preset = spec['preset'];
    if (typeof preset !== 'string' || !Object.hasOwn(RETRY_PRESETS, preset)) {
      throw new ValidationError(`${field}.preset`, `must be one of ${Object.keys(RETRY_PRESETS).join(', ')} (got ${show(preset)})`);
    }
    return { preset: preset as RetryPresetName, ...jitter };
  }
  const schedule = spec['schedule'];
  parseSchedule(schedule, `${field}.schedule`);
  return { schedule: [...(schedule as string[])], ...jitter };
}

/**
 * Compiled policies by their spec's JSON. The policy is needed once per attempt and endpoints
 * share few distinct specs, so the cache stays small; it is cleared if it ever grows past the
 * bound rather than tracking recency. An actor keeps its endpoint's spec object between
 * attempts, so a lookup by identity comes first and saves serialising it each time.
 */
const compiled = new Map<string, RetryPolicy>();
const compiledBySpec = new WeakMap<RetrySpec, RetryPolicy>();
const COMPILED_MAX = 1_000;

/**
 * The policy of a validated retry spec.
 *
 * @throws ValidationError when the spec is invalid (stored specs were validated by
 *   {@link resolveRetrySpec}, so this means a corrupt store).
 */
export function retryPolicyOf(spec: RetrySpec): RetryPolicy {
  const known = compiledBySpec.get(spec);
  if (known !== undefined) return known;
  const key = JSON.stringify(spec);
  let policy = compiled.get(key);
  if (policy === undefined) {
    policy = Object.freeze(compile(spec));
    if (compiled.size >= COMPILED_MAX) compiled.clear();
    compiled.set(key, policy);
  }
  compiledBySpec.set(spec, policy);
  return policy;
}

/**
 * The wait after attempt `attemptNumber` (1-based), jittered, in milliseconds; `undefined` when
 * that attempt was the policy's last.
 *
 * A decorrelated wait depends on the previous one, which Herald does not keep between attempts:
 * it draws the chain again from the first wait, so each wait has exactly the spread of AWS's n-th
 * decorrelated wait (only its tie to the delivery's own earlier waits is lost). That costs n
 * draws of `random`, n ≤ 50.
 */
export function retryWaitMs(policy: RetryPolicy, attemptNumber: number, random: Random): number | undefined {
  if (attemptNumber >= policy.maxAttempts) return undefined;
  const { waits } = policy;
  switch (waits.kind) {
    case 'list': {
      const delayMs = waits.delaysMs[attemptNumber - 1];
      return delayMs === undefined ? undefined : jitterOf(waits.jitter, delayMs, random);
    }
    case 'growth':
      return jitterOf(waits.jitter, growthWaitMs(waits.initialMs, waits.multiplier, waits.maxMs, attemptNumber), random);
    case 'decorrelated': {
      let waitMs = waits.initialMs;
      for (let n = 1; n <= attemptNumber; n++) waitMs = decorrelatedJitter(waitMs, waits.initialMs, waits.maxMs, random);
      return waitMs;
    }
  }
}

function jitterOf(kind: ScheduleJitterKind, delayMs: number, random: Random): number {
  switch (kind) {
    case JitterKind.PLUS_MINUS_20_PERCENT:
      return jitter(delayMs, random);
    case JitterKind.FULL:
      return fullJitter(delayMs, random);
    case JitterKind.EQUAL:
      return equalJitter(delayMs, random);
  }
}

function compile(spec: RetrySpec): RetryPolicy {
  if ('preset' in spec) return listPolicy(RETRY_PRESETS[spec.preset], spec.jitter);
  if ('schedule' in spec) return listPolicy(parseSchedule(spec.schedule), spec.jitter);
  const { terms } = parseRetryFormula(spec);
  const { initialMs, maxMs, maxAttempts, windowMs } = terms;
  const waits: RetryWaits =
    terms.jitter === JitterKind.DECORRELATED
      ? { kind: 'decorrelated', initialMs, maxMs }
      : { kind: 'growth', initialMs, multiplier: terms.multiplier, maxMs, jitter: terms.jitter };
  return { maxAttempts, windowMs, waits };
}

function listPolicy(delaysMs: readonly number[], kind: ScheduleJitterKind | undefined): RetryPolicy {
  return {
    maxAttempts: delaysMs.length + 1,
    windowMs: undefined,
    waits: { kind: 'list', delaysMs: Object.freeze([...delaysMs]), jitter: kind ?? JitterKind.PLUS_MINUS_20_PERCENT },
  };
}

/** A preset or a schedule takes every jitter kind but `decorrelated`, which needs a formula's `initial` and `max`. */
function scheduleJitter(value: unknown, field: string): ScheduleJitterKind {
  const kind = parseJitterKind(value, field);
  if (kind === JitterKind.DECORRELATED) {
    throw new ValidationError(field, `"decorrelated" needs a formula ("initial", "max"); a preset or a schedule takes "±20%", "full" or "equal"`);
  }
  return kind;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
