import { expect } from 'chai';
import { seededRandom, type Random } from '../../lib/clock.ts';
import { resolveRetrySpec, retryPolicyOf, retryWaitMs } from '../../lib/policy/retry-policy.ts';
import { RETRY_PRESETS } from '../../lib/policy/retry-schedule.ts';
import { validationErrorOf } from '../support/validation-error.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** A random source that returns `r` every time. */
const fixed = (r: number): Random => () => r;
const LAST = 0.999_999_999;

describe('resolveRetrySpec', () => {
  it('accepts a known preset', () => {
    expect(resolveRetrySpec({ preset: 'relaxed' })).to.deep.equal({ preset: 'relaxed' });
  });

  it('accepts a valid schedule and keeps its text', () => {
    expect(resolveRetrySpec({ schedule: ['PT10S', 'PT1M'] })).to.deep.equal({ schedule: ['PT10S', 'PT1M'] });
  });

  it('accepts a formula, as stored', () => {
    expect(resolveRetrySpec({ initial: 'PT30S', multiplier: 2, max: 'PT6H', attempts: 9, window: 'P2D', jitter: 'equal' })).to.deep.equal({
      initial: 'PT30S',
      multiplier: 2,
      max: 'PT6H',
      attempts: 9,
      window: 'P2D',
      jitter: 'equal',
    });
  });

  it('accepts ±20 %, full and equal jitter on a preset or a schedule', () => {
    expect(resolveRetrySpec({ preset: 'default', jitter: 'full' })).to.deep.equal({ preset: 'default', jitter: 'full' });
    expect(resolveRetrySpec({ schedule: ['PT1M'], jitter: 'equal' })).to.deep.equal({ schedule: ['PT1M'], jitter: 'equal' });
    expect(resolveRetrySpec({ preset: 'aggressive', jitter: '±20%' })).to.deep.equal({ preset: 'aggressive', jitter: '±20%' });
  });

  context('when the spec is invalid', () => {
    it('names the allowed presets for an unknown one', () => {
      const error = validationErrorOf(() => resolveRetrySpec({ preset: 'eager' }));
      expect(error.field).to.equal('retry.preset');
      expect(error.rule).to.equal('must be one of aggressive, default, relaxed (got "eager")');
    });

    it('requires exactly one of preset, schedule and a formula', () => {
      const rule = /must have exactly one of "preset", "schedule" or "initial" \(a formula\)/;
      expect(validationErrorOf(() => resolveRetrySpec({})).rule).to.match(rule);
      expect(validationErrorOf(() => resolveRetrySpec({ preset: 'default', schedule: ['PT1M'] })).rule).to.match(rule);
      expect(validationErrorOf(() => resolveRetrySpec({ preset: 'default', initial: 'PT1M' })).rule).to.match(rule);
    });

    it('names initial when a formula lacks it', () => {
      const error = validationErrorOf(() => resolveRetrySpec({ multiplier: 2, max: 'PT1H', attempts: 3 }));
      expect(error.field).to.equal('retry.initial');
      expect(error.rule).to.match(/is required in a formula/);
    });

    it('refuses non-objects and unknown keys', () => {
      expect(validationErrorOf(() => resolveRetrySpec('default')).field).to.equal('retry');
      expect(validationErrorOf(() => resolveRetrySpec(null)).field).to.equal('retry');
      expect(validationErrorOf(() => resolveRetrySpec({ preset: 'default', extra: 1 })).rule).to.match(/unknown key "extra"/);
      expect(validationErrorOf(() => resolveRetrySpec({ schedule: ['PT1M'], attempts: 3 })).rule).to.equal(
        'unknown key "attempts"; a schedule takes only "schedule" and "jitter"',
      );
    });

    it('refuses decorrelated jitter on a preset or a schedule, which have no initial and max', () => {
      const error = validationErrorOf(() => resolveRetrySpec({ preset: 'default', jitter: 'decorrelated' }));
      expect(error.field).to.equal('retry.jitter');
      expect(error.rule).to.match(/"decorrelated" needs a formula/);
      expect(validationErrorOf(() => resolveRetrySpec({ schedule: ['PT1M'], jitter: 'none' })).rule).to.match(/must be one of "±20%"/);
    });

    it('names the schedule entry and the formula field under the given field', () => {
      expect(validationErrorOf(() => resolveRetrySpec({ schedule: ['PT1M', 'soon'] }, 'body.retry')).field).to.equal('body.retry.schedule[1]');
      expect(validationErrorOf(() => resolveRetrySpec({ initial: 'PT1M', multiplier: 2, max: 'PT1H' }, 'body.retry')).field).to.equal('body.retry');
    });
  });
});

describe('retryPolicyOf', () => {
  it('gives a preset its delays, one attempt more than delays, no window, ±20 % jitter by default', () => {
    expect(retryPolicyOf({ preset: 'default' })).to.deep.equal({
      maxAttempts: 9,
      windowMs: undefined,
      waits: { kind: 'list', delaysMs: [...RETRY_PRESETS.default], jitter: '±20%' },
    });
  });

  it('parses a schedule once: the same policy for the same text', () => {
    const spec = { schedule: ['PT5S', 'PT10M'], jitter: 'full' } as const;
    expect(retryPolicyOf(spec).waits).to.deep.equal({ kind: 'list', delaysMs: [5 * SECOND, 10 * MINUTE], jitter: 'full' });
    expect(retryPolicyOf({ schedule: ['PT5S', 'PT10M'], jitter: 'full' })).to.equal(retryPolicyOf(spec));
  });

  it('gives a formula its growth, attempts and window', () => {
    expect(retryPolicyOf({ initial: 'PT30S', multiplier: 2, max: 'PT6H', window: 'P2D' })).to.deep.equal({
      maxAttempts: 50,
      windowMs: 2 * DAY,
      waits: { kind: 'growth', initialMs: 30 * SECOND, multiplier: 2, maxMs: 6 * HOUR, jitter: '±20%' },
    });
    expect(retryPolicyOf({ initial: 'PT1S', max: 'PT1M', attempts: 4, jitter: 'decorrelated' })).to.deep.equal({
      maxAttempts: 4,
      windowMs: undefined,
      waits: { kind: 'decorrelated', initialMs: SECOND, maxMs: MINUTE },
    });
  });
});

describe('retryWaitMs', () => {
  const formula = { initial: 'PT30S', multiplier: 2, max: 'PT6H', attempts: 9 } as const;

  it('is undefined after the last attempt', () => {
    expect(retryWaitMs(retryPolicyOf(formula), 8, fixed(0.5)), '30 s × 2⁷').to.equal(64 * MINUTE);
    expect(retryWaitMs(retryPolicyOf(formula), 9, fixed(0.5))).to.equal(undefined);
    expect(retryWaitMs(retryPolicyOf({ preset: 'aggressive' }), 7, fixed(0.5))).to.equal(undefined);
  });

  context('with each jitter kind, the wait after attempt 3 (2 min before jitter in all three forms) at the ends and middle of the random range', () => {
    const cases: Array<[string, readonly [number, number, number]]> = [
      ['±20%', [96 * SECOND, 120 * SECOND, 144 * SECOND]],
      ['full', [0, 60 * SECOND, 120 * SECOND]],
      ['equal', [60 * SECOND, 90 * SECOND, 120 * SECOND]],
    ];
    for (const [jitter, [low, middle, high]] of cases) {
      it(`applies ${jitter} to a formula, a preset and a schedule alike`, () => {
        for (const spec of [
          { ...formula, jitter },
          { preset: 'default', jitter },
          { schedule: ['PT30S', 'PT1M', 'PT2M'], jitter },
        ]) {
          const policy = retryPolicyOf(resolveRetrySpec(spec));
          const waits = [0, 0.5, LAST].map((r) => retryWaitMs(policy, 3, fixed(r)));
          expect(waits, JSON.stringify(spec)).to.deep.equal([low, middle, high]);
        }
      });
    }
  });

  context('with decorrelated jitter, over 10 000 draws of the injected random source', () => {
    const policy = retryPolicyOf({ initial: 'PT1S', max: 'P7D', attempts: 10, jitter: 'decorrelated' });

    it('draws the first wait within [initial, 3 × initial], mean 2 × initial', () => {
      const random = seededRandom(201);
      const waits = Array.from({ length: 10_000 }, () => retryWaitMs(policy, 1, random) ?? NaN);
      expect(Math.min(...waits)).to.be.within(SECOND, SECOND + 20);
      expect(Math.max(...waits)).to.be.within(3 * SECOND - 20, 3 * SECOND);
      // σ = 2 000 / √12 ≈ 577 ms: 4 standard errors ≈ 23 ms.
      expect(waits.reduce((a, b) => a + b, 0) / waits.length).to.be.closeTo(2 * SECOND, 25);
    });

    it('draws the second from a first one drawn again: within [initial, 9 × initial], mean 3.5 × initial', () => {
      // E = (initial + 3 × E[first]) / 2 = 3.5 s. Taking previous = initial instead would give 2 s.
      const random = seededRandom(202);
      const waits = Array.from({ length: 10_000 }, () => retryWaitMs(policy, 2, random) ?? NaN);
      expect(Math.min(...waits)).to.be.at.least(SECOND);
      expect(Math.max(...waits)).to.be.within(8 * SECOND, 9 * SECOND);
      // σ ≈ 1 755 ms: 4 standard errors ≈ 70 ms.
      expect(waits.reduce((a, b) => a + b, 0) / waits.length).to.be.closeTo(3.5 * SECOND, 70);
    });

    it('never waits beyond max', () => {
      const capped = retryPolicyOf({ initial: 'PT1S', max: 'PT10S', attempts: 20, jitter: 'decorrelated' });
      const random = seededRandom(203);
      const waits = Array.from({ length: 10_000 }, () => retryWaitMs(capped, 19, random) ?? NaN);
      expect(Math.max(...waits)).to.equal(10 * SECOND);
      expect(Math.min(...waits)).to.be.at.least(SECOND);
    });
  });
});
