import { expect } from 'chai';
import { growthWaitMs, parseRetryFormula } from '../../lib/policy/retry-formula.ts';
import { validationErrorOf } from '../support/validation-error.ts';

const SECOND = 1_000;
const HOUR = 3_600 * SECOND;
const DAY = 24 * HOUR;

describe('parseRetryFormula', () => {
  context('when the formula is valid', () => {
    it('returns it as stored, keys in order and absent ones left out, with its terms in milliseconds', () => {
      const { formula, terms } = parseRetryFormula({ attempts: 9, max: 'PT6H', multiplier: 2, initial: 'PT30S' });
      expect(formula).to.deep.equal({ initial: 'PT30S', multiplier: 2, max: 'PT6H', attempts: 9 });
      expect(Object.keys(formula)).to.deep.equal(['initial', 'multiplier', 'max', 'attempts']);
      expect(terms).to.deep.equal({ initialMs: 30 * SECOND, maxMs: 6 * HOUR, maxAttempts: 9, windowMs: undefined, jitter: '±20%', multiplier: 2 });
    });

    it('takes a window instead of attempts, bounded then by the 50 attempts a formula allows', () => {
      const { formula, terms } = parseRetryFormula({ initial: 'PT30S', multiplier: 2, max: 'PT6H', window: 'P2D', jitter: 'full' });
      expect(formula).to.deep.equal({ initial: 'PT30S', multiplier: 2, max: 'PT6H', window: 'P2D', jitter: 'full' });
      expect(terms).to.include({ maxAttempts: 50, windowMs: 2 * DAY, jitter: 'full' });
    });

    it('takes a window beside attempts', () => {
      expect(parseRetryFormula({ initial: 'PT1M', multiplier: 1.5, max: 'PT1H', attempts: 12, window: 'PT12H' }).terms).to.include({
        maxAttempts: 12,
        windowMs: 12 * HOUR,
        multiplier: 1.5,
      });
    });

    it('takes decorrelated jitter without a multiplier', () => {
      const { formula, terms } = parseRetryFormula({ initial: 'PT1S', max: 'PT1H', attempts: 5, jitter: 'decorrelated' });
      expect(formula).to.deep.equal({ initial: 'PT1S', max: 'PT1H', attempts: 5, jitter: 'decorrelated' });
      expect(terms).to.deep.equal({ initialMs: SECOND, maxMs: HOUR, maxAttempts: 5, windowMs: undefined, jitter: 'decorrelated' });
    });
  });

  context('when the formula breaks a rule', () => {
    const base = { initial: 'PT30S', multiplier: 2, max: 'PT6H', attempts: 9 };
    const cases: Array<[string, Record<string, unknown>, string, RegExp]> = [
      ['an unknown key', { ...base, factor: 3 }, 'retry', /unknown key "factor"; a formula takes "initial", "multiplier", "max", "attempts", "window", "jitter"/],
      ['initial not a duration', { ...base, initial: '30s' }, 'retry.initial', /must be an ISO-8601 duration such as PT30S \(got "30s"\)/],
      ['initial zero', { ...base, initial: 'PT0S' }, 'retry.initial', /must be longer than zero/],
      ['max missing', { initial: 'PT30S', multiplier: 2, attempts: 9 }, 'retry.max', /is required in a formula/],
      ['max over 7 days', { ...base, max: 'P8D' }, 'retry.max', /must be at most 7 days, P7D \(got "P8D"\)/],
      ['max below initial', { ...base, max: 'PT10S' }, 'retry.max', /must be at least initial, "PT30S" \(got "PT10S"\)/],
      ['multiplier missing', { initial: 'PT30S', max: 'PT6H', attempts: 9 }, 'retry.multiplier', /is required in a formula \(unless jitter is "decorrelated"\)/],
      ['multiplier below 1', { ...base, multiplier: 0.5 }, 'retry.multiplier', /must be a number from 1 to 10 \(got 0.5\)/],
      ['multiplier not a number', { ...base, multiplier: '2' }, 'retry.multiplier', /must be a number from 1 to 10 \(got "2"\)/],
      ['multiplier with decorrelated jitter', { ...base, jitter: 'decorrelated' }, 'retry.multiplier', /is not used with jitter "decorrelated"/],
      ['attempts of 1', { ...base, attempts: 1 }, 'retry.attempts', /must be an integer from 2 to 50/],
      ['attempts over 50', { ...base, attempts: 51 }, 'retry.attempts', /must be an integer from 2 to 50.*\(got 51\)/],
      ['attempts not whole', { ...base, attempts: 2.5 }, 'retry.attempts', /must be an integer from 2 to 50/],
      ['neither attempts nor window', { initial: 'PT30S', multiplier: 2, max: 'PT6H' }, 'retry', /must have "attempts", "window" or both/],
      ['a window over 30 days', { ...base, window: 'P31D' }, 'retry.window', /must be at most 30 days, P30D \(got "P31D"\)/],
      ['a window shorter than initial', { ...base, window: 'PT10S' }, 'retry.window', /must be at least initial, "PT30S", or no retry would fit/],
      ['an unknown jitter', { ...base, jitter: 'random' }, 'retry.jitter', /must be one of "±20%", "full", "equal", "decorrelated" \(got "random"\)/],
    ];
    for (const [what, input, field, rule] of cases) {
      it(`names the field and the rule for ${what}`, () => {
        const error = validationErrorOf(() => parseRetryFormula(input));
        expect(error.field).to.equal(field);
        expect(error.rule).to.match(rule);
        expect(error.code).to.equal('HERALD_INVALID_INPUT');
      });
    }

    it('names fields under the field it is given', () => {
      expect(validationErrorOf(() => parseRetryFormula({ ...base, attempts: 0 }, 'body.retry')).field).to.equal('body.retry.attempts');
    });
  });
});

describe('growthWaitMs', () => {
  it('is initial × multiplier^(n−1), capped at max', () => {
    const waits = [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => growthWaitMs(30 * SECOND, 2, 6 * HOUR, n));
    expect(waits).to.deep.equal([30, 60, 120, 240, 480, 960, 1_920, 3_840, 7_680].map((s) => Math.min(s * SECOND, 6 * HOUR)));
    expect(growthWaitMs(30 * SECOND, 2, 6 * HOUR, 50)).to.equal(6 * HOUR);
  });
});
