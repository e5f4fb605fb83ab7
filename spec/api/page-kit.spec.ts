import { expect } from 'chai';
import { DURATION_TEXT_SCRIPT } from '../../lib/api/page-kit.ts';
import { durationText } from '../../lib/clock.ts';

describe('page kit', () => {
  describe('DURATION_TEXT_SCRIPT', () => {
    context('when the pages show a duration', () => {
      it('shows it as the CLI and the logs do (lib/clock.ts durationText), at every unit boundary', () => {
        const inPage = new Function(`${DURATION_TEXT_SCRIPT}\nreturn durationText;`)() as (ms: number) => string;
        const boundaries = [0, 1_000, 10_000, 60_000, 3_600_000, 86_400_000];
        const cases = [-5, 0.5, 250, 1_500, 9_999, 90_000, 5_400_000, 99_000_000, 30 * 86_400_000, Infinity, NaN, ...boundaries.flatMap((b) => [b - 1, b, b + 1])];
        expect(cases.map(inPage)).to.deep.equal(cases.map(durationText));
      });
    });
  });
});
