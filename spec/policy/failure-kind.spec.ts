import { expect } from 'chai';
import type { Outcome } from '../../lib/model.ts';
import { failureKind, isFailureKind } from '../../lib/policy/failure-kind.ts';

function response(status: number): Outcome {
  return { kind: 'response', status, location: status >= 300 && status < 400 ? 'https://elsewhere.example/' : null, retryAfter: null, body: '' };
}

const network = (code: string): Outcome => ({ kind: 'network', code, message: `${code}: …` });

describe('failureKind', () => {
  const table: Array<[string, Outcome, string]> = [
    ['503', response(503), 'http-503'],
    ['429', response(429), 'http-429'],
    ['410', response(410), 'http-410'],
    ['301', response(301), 'redirect'],
    ['308', response(308), 'redirect'],
    ['a timeout', { kind: 'timeout', timeoutMs: 10_000 }, 'timeout'],
    ['ENOTFOUND', network('ENOTFOUND'), 'dns'],
    ['EAI_AGAIN', network('EAI_AGAIN'), 'dns'],
    ['CERT_HAS_EXPIRED', network('CERT_HAS_EXPIRED'), 'tls'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', network('DEPTH_ZERO_SELF_SIGNED_CERT'), 'tls'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', network('ERR_TLS_CERT_ALTNAME_INVALID'), 'tls'],
    ['ERR_SSL_WRONG_VERSION_NUMBER', network('ERR_SSL_WRONG_VERSION_NUMBER'), 'tls'],
    ['ECONNREFUSED', network('ECONNREFUSED'), 'refused'],
    ['ECONNRESET', network('ECONNRESET'), 'reset'],
    ['EPIPE', network('EPIPE'), 'reset'],
    ['UND_ERR_SOCKET', network('UND_ERR_SOCKET'), 'reset'],
    ['EHOSTUNREACH', network('EHOSTUNREACH'), 'network'],
    ['PROTOCOL', network('PROTOCOL'), 'network'],
    ['ERR_INVALID_URL', network('ERR_INVALID_URL'), 'network'],
    ['a blocked address', { kind: 'blocked', address: '10.0.0.1', message: 'private network' }, 'blocked'],
  ];
  for (const [name, outcome, kind] of table) {
    context(`when the outcome is ${name}`, () => {
      it(`is ${kind}`, () => {
        expect(failureKind(outcome)).to.equal(kind);
      });
    });
  }
});

describe('isFailureKind', () => {
  it('accepts every kind failureKind gives, and unknown', () => {
    for (const kind of ['http-503', 'http-404', 'timeout', 'dns', 'tls', 'refused', 'reset', 'network', 'blocked', 'redirect', 'unknown']) {
      expect(isFailureKind(kind), kind).to.equal(true);
    }
  });

  it('refuses anything else', () => {
    for (const value of ['http-', 'http-5031', 'http-abc', 'http-999', 'TIMEOUT', '', 42, undefined, null]) {
      expect(isFailureKind(value), String(value)).to.equal(false);
    }
  });
});
