import { expect } from 'chai';
import { parseSchedule, RETRY_PRESETS } from '../../lib/policy/retry-schedule.ts';
import { validationErrorOf } from '../support/validation-error.ts';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

describe('RETRY_PRESETS', () => {
  it('default is 8 retries after the first attempt, 9 attempts over about 31 hours', () => {
    expect(RETRY_PRESETS.default).to.deep.equal([
      30 * SECOND, MINUTE, 2 * MINUTE, 5 * MINUTE, 15 * MINUTE, HOUR, 6 * HOUR, 24 * HOUR,
    ]);
    const total = RETRY_PRESETS.default.reduce((sum, ms) => sum + ms, 0);
    expect(total / HOUR).to.be.within(31, 32);
  });

  it('aggressive and relaxed grow monotonically', () => {
    expect(RETRY_PRESETS.aggressive).to.deep.equal([5 * SECOND, 30 * SECOND, 2 * MINUTE, 10 * MINUTE, 30 * MINUTE, HOUR]);
    expect(RETRY_PRESETS.relaxed).to.deep.equal([
      MINUTE, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 6 * HOUR, 12 * HOUR, 24 * HOUR, 48 * HOUR, 72 * HOUR,
    ]);
    for (const delays of Object.values(RETRY_PRESETS)) {
      expect([...delays]).to.deep.equal([...delays].sort((a, b) => a - b));
    }
  });
});

describe('parseSchedule', () => {
  context('when given ISO-8601 durations', () => {
    it('returns them in milliseconds', () => {
      expect(parseSchedule(['PT30S', 'PT5M', 'PT1H30M', 'P1D', 'P1W', 'PT0.5S'])).to.deep.equal([
        30 * SECOND, 5 * MINUTE, 90 * MINUTE, 24 * HOUR, 7 * 24 * HOUR, 500,
      ]);
    });
  });

  context('when the input breaks a rule', () => {
    const cases: Array<[string, unknown, string, RegExp]> = [
      ['not an array', 'PT30S', 'retry.schedule', /must be an array of ISO-8601 durations/],
      ['empty', [], 'retry.schedule', /at least one duration/],
      ['more than 20 entries', Array.from({ length: 21 }, () => 'PT1M'), 'retry.schedule', /at most 20 durations \(got 21\)/],
      ['an entry not a string', ['PT1M', 30], 'retry.schedule[1]', /must be an ISO-8601 duration string .*got 30/],
      ['an entry not ISO-8601', ['PT1M', 'PT2M', '30 seconds'], 'retry.schedule[2]', /must be an ISO-8601 duration such as PT30S \(got "30 seconds"\)/],
      ['a zero entry', ['PT0S'], 'retry.schedule[0]', /longer than zero/],
      ['a negative entry', ['-PT5S'], 'retry.schedule[0]', /longer than zero/],
      ['an entry over 7 days', ['P8D'], 'retry.schedule[0]', /at most 7 days/],
      ['an entry of a month', ['P1M'], 'retry.schedule[0]', /at most 7 days/],
    ];
    for (const [what, input, field, rule] of cases) {
      it(`names the field and the rule for ${what}`, () => {
        const error = validationErrorOf(() => parseSchedule(input));
        expect(error.field).to.equal(field);
        expect(error.rule).to.match(rule);
        expect(error.message).to.equal(`${field}: ${error.rule}`);
        expect(error.code).to.equal('HERALD_INVALID_INPUT');
      });
    }

    it('reports the exact message of the brief for an unparsable entry', () => {
      const error = validationErrorOf(() => parseSchedule(['PT1M', 'PT2M', '30 seconds']));
      expect(error.message).to.equal('retry.schedule[2]: must be an ISO-8601 duration such as PT30S (got "30 seconds")');
    });

    it('uses the field it is given', () => {
      expect(validationErrorOf(() => parseSchedule(['x'], 'endpoint.retry.schedule')).field).to.equal('endpoint.retry.schedule[0]');
    });
  });
});
