import { expect } from 'chai';
import type { Outcome } from '../../lib/model.ts';
import { classify, countsAgainstBreaker, describeOutcome } from '../../lib/policy/classify.ts';
import type { Verdict } from '../../lib/policy/classify.ts';

const now = Date.UTC(2026, 0, 1, 12, 0, 0);

function response(status: number, extra: Partial<{ location: string; retryAfter: string }> = {}): Outcome {
  return { kind: 'response', status, location: extra.location ?? null, retryAfter: extra.retryAfter ?? null, body: '' };
}

const retry = (reason: string, retryAfterMs?: number, pauseMailbox = false): Verdict => ({
  kind: 'retry',
  reason,
  retryAfterMs,
  pauseMailbox,
});
const permanent = (reason: string): Verdict => ({ kind: 'permanent', reason });

describe('classify', () => {
  const table: Array<[string, Outcome, Verdict]> = [
    ['200', response(200), { kind: 'delivered' }],
    ['204', response(204), { kind: 'delivered' }],
    ['301 with its Location', response(301, { location: 'https://new.example/hook' }), permanent('HTTP 301 → https://new.example/hook')],
    ['100', response(100), permanent('HTTP 100')],
    ['400', response(400), permanent('HTTP 400')],
    ['408', response(408), retry('HTTP 408')],
    ['410', response(410), permanent('HTTP 410')],
    ['422', response(422), permanent('HTTP 422')],
    ['429 without Retry-After', response(429), retry('HTTP 429', undefined, true)],
    ['429 with Retry-After seconds', response(429, { retryAfter: '120' }), retry('HTTP 429', 120_000, true)],
    ['429 with a Retry-After date', response(429, { retryAfter: 'Thu, 01 Jan 2026 12:10:00 GMT' }), retry('HTTP 429', 600_000, true)],
    ['500', response(500), retry('HTTP 500')],
    ['502', response(502), retry('HTTP 502')],
    ['503 with Retry-After', response(503, { retryAfter: '30' }), retry('HTTP 503', 30_000)],
    ['timeout', { kind: 'timeout', timeoutMs: 10_000 }, retry('timeout after 10 s')],
    ['ECONNREFUSED', { kind: 'network', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 203.0.113.5:443' }, retry('ECONNREFUSED: connect ECONNREFUSED 203.0.113.5:443')],
    ['ECONNRESET', { kind: 'network', code: 'ECONNRESET', message: 'read ECONNRESET' }, retry('ECONNRESET: read ECONNRESET')],
    ['ENOTFOUND', { kind: 'network', code: 'ENOTFOUND', message: 'getaddrinfo ENOTFOUND hooks.example' }, retry('ENOTFOUND: getaddrinfo ENOTFOUND hooks.example')],
    ['a TLS failure', { kind: 'network', code: 'CERT_HAS_EXPIRED', message: 'certificate has expired' }, retry('CERT_HAS_EXPIRED: certificate has expired')],
    ['an invalid URL', { kind: 'network', code: 'ERR_INVALID_URL', message: '"x": not an absolute URL' }, permanent('ERR_INVALID_URL: "x": not an absolute URL')],
    ['blocked', { kind: 'blocked', address: '10.0.0.1', message: 'refused to connect to 10.0.0.1' }, permanent('blocked: refused to connect to 10.0.0.1')],
  ];

  for (const [what, outcome, verdict] of table) {
    it(`classifies ${what}`, () => {
      expect(classify(outcome, now)).to.deep.equal(verdict);
    });
  }
});

describe('describeOutcome', () => {
  it('summarises each kind on one line', () => {
    expect(describeOutcome(response(503))).to.equal('HTTP 503');
    expect(describeOutcome(response(301, { location: 'https://x.example/' }))).to.equal('HTTP 301 → https://x.example/');
    expect(describeOutcome(response(302))).to.equal('HTTP 302');
    expect(describeOutcome({ kind: 'timeout', timeoutMs: 10_000 })).to.equal('timeout after 10 s');
    expect(describeOutcome({ kind: 'network', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 1.2.3.4:80' }))
      .to.equal('ECONNREFUSED: connect ECONNREFUSED 1.2.3.4:80');
    expect(describeOutcome({ kind: 'blocked', address: '127.0.0.1', message: 'refused' })).to.equal('blocked: refused');
  });
});

describe('countsAgainstBreaker', () => {
  const table: Array<[string, Outcome, boolean]> = [
    ['a timeout', { kind: 'timeout', timeoutMs: 5_000 }, true],
    ['a refused connection', { kind: 'network', code: 'ECONNREFUSED', message: '' }, true],
    ['a DNS failure', { kind: 'network', code: 'ENOTFOUND', message: '' }, true],
    ['500', response(500), true],
    ['503', response(503), true],
    ['408', response(408), true],
    ['200', response(200), false],
    ['301', response(301), false],
    ['400', response(400), false],
    ['410', response(410), false],
    ['429', response(429), false],
    ['blocked', { kind: 'blocked', address: '10.0.0.1', message: '' }, false],
    ['an invalid URL', { kind: 'network', code: 'ERR_INVALID_URL', message: '' }, false],
  ];
  for (const [what, outcome, counts] of table) {
    it(`${counts ? 'counts' : 'does not count'} ${what}`, () => {
      expect(countsAgainstBreaker(outcome)).to.equal(counts);
    });
  }
});
