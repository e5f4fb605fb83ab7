import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { systemClock } from '../../lib/clock.ts';
import { ErrorCode } from '../../lib/errors.ts';
import { generateSecret, secretKey } from '../../lib/signing/secret.ts';
import { createHmac } from 'node:crypto';
import { computeSequenceSignature, computeSignature, sequenceKey, sequenceSignatureHeader, signatureHeader, webhookHeaders } from '../../lib/signing/signature.ts';
import { verify, WebhookVerificationError } from '../../lib/signing/verify.ts';

/** standardwebhooks checks timestamps against the real time, so requests are signed "now". */
function nowSec(): number {
  return Math.floor(systemClock.now() / 1000);
}

function signed(secrets: readonly string[], body: string, timestampSec = nowSec(), id = 'evt_2mZ8rQ4pX1') {
  return webhookHeaders(id, timestampSec, signatureHeader(secrets.map(secretKey), id, timestampSec, body));
}

function verifyError(run: () => void): WebhookVerificationError {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(WebhookVerificationError);
    expect(error).to.have.property('code', ErrorCode.INVALID_SIGNATURE);
    return error as WebhookVerificationError;
  }
  return expect.fail('verify() accepted the request');
}

const BODY = JSON.stringify({ type: 'invoice.paid', data: { id: 'in_1', amount: 4200, note: 'ünïcødé ✓' } });

describe('signing', () => {
  describe('generateSecret()', () => {
    it('makes distinct whsec_ secrets of 24 random bytes', () => {
      const secrets = Array.from({ length: 50 }, () => generateSecret());
      expect(new Set(secrets).size).to.equal(50);
      for (const secret of secrets) {
        expect(secret).to.match(/^whsec_[A-Za-z0-9+/]{32}$/);
        expect(secretKey(secret)).to.have.length(24);
      }
    });
  });

  describe('secretKey()', () => {
    it('rejects secrets that are not whsec_ followed by base64, without echoing them', () => {
      for (const bad of ['', 'whsec_', 'sk_abcd', 'whsec_not base64!', 'whsec_a', 'whsec_ab=c', 'whsec_-_8x']) {
        expect(() => secretKey(bad), bad).to.throw('secret: must be whsec_ followed by base64').with.property('code', ErrorCode.INVALID_INPUT);
      }
    });
  });

  describe('signatureHeader()', () => {
    it('is v1, then the base64 HMAC-SHA256 of "id.timestamp.body"', () => {
      const key = Buffer.alloc(32, 7);
      const header = signatureHeader([key], 'msg_1', 1_700_000_000, 'hello');
      expect(header).to.equal(`v1,${computeSignature(key, 'msg_1', 1_700_000_000, 'hello')}`);
      expect(header).to.match(/^v1,[A-Za-z0-9+/]{43}=$/);
    });

    it('signs with every key, space-separated, in order', () => {
      const keys = [Buffer.alloc(24, 1), Buffer.alloc(24, 2)];
      const header = signatureHeader(keys, 'msg_1', 1_700_000_000, 'x');
      expect(header.split(' ')).to.deep.equal(keys.map((k) => `v1,${computeSignature(k, 'msg_1', 1_700_000_000, 'x')}`));
    });

    it('rejects an empty key list and a fractional timestamp', () => {
      expect(() => signatureHeader([], 'id', 1, 'x')).to.throw().with.property('code', ErrorCode.INVALID_INPUT);
      expect(() => signatureHeader([Buffer.alloc(24)], 'id', 1.5, 'x')).to.throw().with.property('code', ErrorCode.INVALID_INPUT);
    });
  });

  context('when checked by standardwebhooks, an independent implementation', () => {
    it('verifies our headers', () => {
      const secret = generateSecret();
      const headers = signed([secret], BODY);
      expect(new Webhook(secret).verify(BODY, { ...headers })).to.deep.equal(JSON.parse(BODY));
    });

    it('verifies the headers of a rotation with either secret', () => {
      const previous = generateSecret();
      const current = generateSecret();
      const headers = signed([current, previous], BODY);
      expect(headers['webhook-signature'].split(' ')).to.have.length(2);
      expect(() => new Webhook(current).verify(BODY, { ...headers })).to.not.throw();
      expect(() => new Webhook(previous).verify(BODY, { ...headers })).to.not.throw();
      expect(() => new Webhook(generateSecret()).verify(BODY, { ...headers })).to.throw();
    });

    it('produces the same signature as standardwebhooks for the same input', () => {
      const secret = generateSecret();
      const ts = nowSec();
      const theirs = new Webhook(secret).sign('msg_42', new Date(ts * 1000), BODY);
      expect(signatureHeader([secretKey(secret)], 'msg_42', ts, BODY)).to.equal(theirs);
    });
  });

  describe('verify()', () => {
    const secret = generateSecret();

    it('accepts a valid request', () => {
      expect(() => verify({ payload: BODY, headers: signed([secret], BODY), secret })).to.not.throw();
    });

    it('accepts a Buffer payload and headers in any letter case', () => {
      const h = signed([secret], BODY);
      const headers = { 'Webhook-Id': h['webhook-id'], 'WEBHOOK-TIMESTAMP': h['webhook-timestamp'], 'webhook-Signature': h['webhook-signature'] };
      expect(() => verify({ payload: Buffer.from(BODY), headers, secret })).to.not.throw();
    });

    it('accepts a rotation with either secret, and a list of secrets', () => {
      const other = generateSecret();
      const headers = signed([other, secret], BODY);
      expect(() => verify({ payload: BODY, headers, secret })).to.not.throw();
      expect(() => verify({ payload: BODY, headers, secret: other })).to.not.throw();
      expect(() => verify({ payload: BODY, headers: signed([other], BODY), secret: [secret, other] })).to.not.throw();
    });

    it('accepts a request signed by standardwebhooks', () => {
      const ts = nowSec();
      const headers = { 'webhook-id': 'msg_x', 'webhook-timestamp': String(ts), 'webhook-signature': new Webhook(secret).sign('msg_x', new Date(ts * 1000), BODY) };
      expect(() => verify({ payload: BODY, headers, secret })).to.not.throw();
    });

    it('rejects a tampered body', () => {
      const error = verifyError(() => verify({ payload: BODY.replace('4200', '4201'), headers: signed([secret], BODY), secret }));
      expect(error.header).to.equal('webhook-signature');
    });

    it('rejects a tampered id', () => {
      const headers = { ...signed([secret], BODY), 'webhook-id': 'evt_other' };
      verifyError(() => verify({ payload: BODY, headers, secret }));
    });

    it('rejects the wrong secret', () => {
      const error = verifyError(() => verify({ payload: BODY, headers: signed([generateSecret()], BODY), secret }));
      expect(error.message).to.match(/no signature matches/);
    });

    it('rejects signatures of another version only', () => {
      const headers = { ...signed([secret], BODY) };
      headers['webhook-signature'] = headers['webhook-signature'].replace('v1,', 'v2,');
      verifyError(() => verify({ payload: BODY, headers, secret }));
    });

    for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const) {
      it(`rejects a request missing ${name}`, () => {
        const headers: Record<string, string | undefined> = { ...signed([secret], BODY) };
        delete headers[name];
        const error = verifyError(() => verify({ payload: BODY, headers, secret }));
        expect(error.header).to.equal(name);
        expect(error.message).to.equal(`${name}: missing header`);
        headers[name] = '';
        verifyError(() => verify({ payload: BODY, headers, secret }));
      });
    }

    it('rejects a timestamp outside the tolerance, either way', () => {
      const now = 1_800_000_000;
      const old = verifyError(() => verify({ payload: BODY, headers: signed([secret], BODY, now - 301), secret, nowSec: now }));
      expect(old.header).to.equal('webhook-timestamp');
      expect(old.message).to.match(/too old/);
      const future = verifyError(() => verify({ payload: BODY, headers: signed([secret], BODY, now + 301), secret, nowSec: now }));
      expect(future.message).to.match(/too new/);
      expect(() => verify({ payload: BODY, headers: signed([secret], BODY, now - 300), secret, nowSec: now })).to.not.throw();
      expect(() => verify({ payload: BODY, headers: signed([secret], BODY, now - 30), secret, nowSec: now, toleranceSec: 10 })).to.throw(WebhookVerificationError);
    });

    it('rejects a timestamp that is not whole seconds', () => {
      const headers = { ...signed([secret], BODY), 'webhook-timestamp': `${nowSec()}.5` };
      const error = verifyError(() => verify({ payload: BODY, headers, secret }));
      expect(error.header).to.equal('webhook-timestamp');
    });

    it('refuses a malformed secret as the caller\'s mistake, not a bad request', () => {
      expect(() => verify({ payload: BODY, headers: signed([secret], BODY), secret: 'nope' })).to.throw().with.property('code', ErrorCode.INVALID_INPUT);
    });
  });

  describe('webhook-sequence-signature', () => {
    const secret = generateSecret();
    const other = generateSecret();

    function sequenced(secrets: readonly string[], sequence: number, timestampSec = nowSec(), id = 'evt_2mZ8rQ4pX1') {
      return {
        ...signed(secrets, BODY, timestampSec, id),
        'webhook-sequence': String(sequence),
        'webhook-sequence-signature': sequenceSignatureHeader(secrets.map(secretKey), id, timestampSec, sequence),
      };
    }

    it('is v1, then the base64 HMAC-SHA256 of "id.timestamp.sequence" under HMAC-SHA256(key, "webhook-sequence"), one per key', () => {
      const key = secretKey(secret);
      const byHand = createHmac('sha256', createHmac('sha256', key).update('webhook-sequence').digest()).update('msg_1.1700000000.42').digest('base64');
      expect(sequenceKey(key)).to.deep.equal(createHmac('sha256', key).update('webhook-sequence').digest());
      expect(sequenceSignatureHeader([key], 'msg_1', 1_700_000_000, 42)).to.equal(`v1,${byHand}`);
      expect(sequenceSignatureHeader([key, secretKey(other)], 'msg_1', 1_700_000_000, 42).split(' ')).to.deep.equal([
        `v1,${byHand}`,
        `v1,${computeSequenceSignature(secretKey(other), 'msg_1', 1_700_000_000, 42)}`,
      ]);
    });

    it('can never pass for a body signature: the body "42" signed with the same id and time has another signature', () => {
      const key = secretKey(secret);
      expect(computeSequenceSignature(key, 'msg_1', 1_700_000_000, 42)).to.not.equal(computeSignature(key, 'msg_1', 1_700_000_000, '42'));
    });

    it('rejects a sequence that is not a whole number ≥ 1, naming sequence', () => {
      for (const bad of [0, -1, 1.5, Number.NaN]) {
        expect(() => sequenceSignatureHeader([secretKey(secret)], 'msg_1', 1, bad)).to.throw(/sequence: must be a whole number/);
      }
    });

    it('leaves a Standard Webhooks verifier (standardwebhooks) accepting the request unchanged', () => {
      expect(() => new Webhook(secret).verify(BODY, sequenced([secret], 7))).to.not.throw();
    });

    it('verify() returns the verified sequence, with either secret of a rotation', () => {
      expect(verify({ payload: BODY, headers: sequenced([other, secret], 7), secret })).to.deep.include({ sequence: 7, id: 'evt_2mZ8rQ4pX1' });
      expect(verify({ payload: BODY, headers: sequenced([other, secret], 7), secret: other }).sequence).to.equal(7);
    });

    it('verify() returns sequence null for a request without one, unless a sequence is required', () => {
      expect(verify({ payload: BODY, headers: signed([secret], BODY), secret }).sequence).to.equal(null);
      const error = verifyError(() => verify({ payload: BODY, headers: signed([secret], BODY), secret, sequence: 'required' }));
      expect(error.header).to.equal('webhook-sequence');
      expect(verify({ payload: BODY, headers: sequenced([secret], 3), secret, sequence: 'required' }).sequence).to.equal(3);
    });

    it('verify() rejects a tampered sequence (HERALD_INVALID_SIGNATURE, webhook-sequence-signature)', () => {
      const headers = { ...sequenced([secret], 7), 'webhook-sequence': '8' };
      const error = verifyError(() => verify({ payload: BODY, headers, secret }));
      expect(error.header).to.equal('webhook-sequence-signature');
      expect(error.message).to.equal('webhook-sequence-signature: no signature matches the secret');
    });

    it('verify() rejects a sequence signature moved to another request (other id or time)', () => {
      const ts = nowSec();
      const moved = { ...signed([secret], BODY, ts, 'evt_other'), 'webhook-sequence': '7', 'webhook-sequence-signature': sequenced([secret], 7, ts)['webhook-sequence-signature'] };
      expect(verifyError(() => verify({ payload: BODY, headers: moved, secret })).header).to.equal('webhook-sequence-signature');
    });

    it('verify() rejects a missing sequence signature, a signature without its sequence, and a malformed number', () => {
      const { 'webhook-sequence-signature': _signature, ...noSignature } = sequenced([secret], 7);
      expect(verifyError(() => verify({ payload: BODY, headers: noSignature, secret })).header).to.equal('webhook-sequence-signature');
      const { 'webhook-sequence': _sequence, ...noSequence } = sequenced([secret], 7);
      expect(verifyError(() => verify({ payload: BODY, headers: noSequence, secret })).header).to.equal('webhook-sequence');
      for (const bad of ['07', '-7', '7.0', '0', 'seven', '1'.repeat(16)]) {
        const headers = { ...sequenced([secret], 7), 'webhook-sequence': bad };
        expect(verifyError(() => verify({ payload: BODY, headers, secret })).header, bad).to.equal('webhook-sequence');
      }
    });
  });
});
