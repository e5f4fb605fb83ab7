import { expect } from 'chai';
import { MAX_RETRY_AFTER_MS, parseRetryAfter } from '../../lib/policy/retry-after.ts';

describe('parseRetryAfter', () => {
  const now = Date.UTC(2026, 0, 1, 12, 0, 0);

  it('is undefined without a header', () => {
    expect(parseRetryAfter(null, now)).to.equal(undefined);
  });

  context('when given delta-seconds', () => {
    it('returns them in milliseconds', () => {
      expect(parseRetryAfter('120', now)).to.equal(120_000);
      expect(parseRetryAfter(' 0 ', now)).to.equal(0);
    });

    it('caps them at 24 hours', () => {
      expect(MAX_RETRY_AFTER_MS).to.equal(24 * 60 * 60 * 1_000);
      expect(parseRetryAfter('999999999', now)).to.equal(MAX_RETRY_AFTER_MS);
    });
  });

  context('when given an HTTP date', () => {
    it('returns the time until a future date', () => {
      expect(parseRetryAfter('Thu, 01 Jan 2026 12:05:00 GMT', now)).to.equal(5 * 60_000);
    });

    it('accepts the obsolete RFC 850 and asctime forms', () => {
      expect(parseRetryAfter('Thursday, 01-Jan-26 12:00:30 GMT', now)).to.equal(30_000);
      expect(parseRetryAfter('Thu Jan  1 12:00:30 2026', now)).to.equal(30_000);
    });

    it('returns 0 for a date in the past', () => {
      expect(parseRetryAfter('Wed, 31 Dec 2025 12:00:00 GMT', now)).to.equal(0);
    });

    it('caps a far date at 24 hours', () => {
      expect(parseRetryAfter('Fri, 01 Jan 2027 00:00:00 GMT', now)).to.equal(MAX_RETRY_AFTER_MS);
    });
  });

  context('when the header is garbage', () => {
    for (const header of ['', 'soon', '-5', '1.5', '10s', 'foo 1', '2026-01-01T12:05:00Z', 'Thu, 01 Jan 2026']) {
      it(`is undefined for ${JSON.stringify(header)}`, () => {
        expect(parseRetryAfter(header, now)).to.equal(undefined);
      });
    }
  });
});
