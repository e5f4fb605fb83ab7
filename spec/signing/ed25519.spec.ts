/**
 * ed25519 keys (Standard Webhooks `v1a`): the key format, signing inline and in the signing pool,
 * `verify()` with `whpk_` public keys beside `whsec_` secrets, and the sequence signature's domain
 * separation. Each `v1a` signature is also checked the way a consumer would, with node:crypto
 * alone: the `whpk_` decoded by hand into an SPKI document, independently of Herald's own parsing.
 */
import { expect } from 'chai';
import { createPublicKey, verify as cryptoVerify, type KeyObject } from 'node:crypto';
import { validateHeaderValue } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { ErrorCode } from '../../lib/errors.ts';
import { SignatureScheme } from '../../lib/model.ts';
import { Ed25519SigningKey, ed25519SigningKey, generateEd25519Key } from '../../lib/signing/ed25519-key.ts';
import { SecretBox } from '../../lib/signing/secret-box.ts';
import { generateSecret, generateSigningSecret, schemeOf, secretKey, signingKey } from '../../lib/signing/secret.ts';
import { ed25519SequenceText, sequenceSignatureHeader, signatureHeader, webhookHeaders } from '../../lib/signing/signature.ts';
import { SigningKeys } from '../../lib/signing/signing-keys.ts';
import { SigningPool, type SignRequest } from '../../lib/signing/signing-pool.ts';
import { verify, WebhookVerificationError } from '../../lib/signing/verify.ts';

/** The fixed DER header of an Ed25519 SubjectPublicKeyInfo (RFC 8410); the 32 key bytes follow. */
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');

/** A consumer's key: the `whpk_` as the spec describes it (base64 of the 32 public key bytes), by hand. */
function consumerKey(whpk: string): KeyObject {
  const raw = Buffer.from(whpk.slice('whpk_'.length), 'base64');
  expect(raw).to.have.length(32);
  return createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: 'der', type: 'spki' });
}

/** The `v1a,` signatures of a header value. */
function v1a(header: string): Buffer[] {
  return header.split(' ').filter((s) => s.startsWith('v1a,')).map((s) => Buffer.from(s.slice(4), 'base64'));
}

const NOW_SEC = 1_767_225_600;
const BODY = '{"n":1}';

describe('ed25519 signatures (v1a)', () => {
  describe('keys', () => {
    it('writes whsk_ as base64 of seed and public key (64 bytes) and whpk_ as base64 of the 32-byte public key', () => {
      const { secret, publicKey } = generateEd25519Key();
      expect(secret).to.match(/^whsk_[A-Za-z0-9+/]{86}==$/);
      expect(publicKey).to.match(/^whpk_[A-Za-z0-9+/]{43}=$/);
      const bytes = Buffer.from(secret.slice(5), 'base64');
      expect(bytes.subarray(32).toString('base64')).to.equal(publicKey.slice(5));
      expect(ed25519SigningKey(secret).publicKey).to.equal(publicKey);
      expect(generateEd25519Key().secret, 'each key is new').to.not.equal(secret);
    });

    it('refuses a whsk_ whose public half is not its seed\'s, or of the wrong length, without echoing it', () => {
      const [a, b] = [generateEd25519Key(), generateEd25519Key()];
      const seedA = Buffer.from(a.secret.slice(5), 'base64').subarray(0, 32);
      const publicB = Buffer.from(b.secret.slice(5), 'base64').subarray(32);
      const mixed = `whsk_${Buffer.concat([seedA, publicB]).toString('base64')}`;
      for (const bad of [mixed, `whsk_${seedA.toString('base64')}`, 'whsk_', 'whsk_!!!', a.publicKey]) {
        const error = (() => {
          try {
            ed25519SigningKey(bad);
          } catch (e) {
            return e as Error & { code?: string };
          }
          return undefined;
        })();
        expect(error, bad).to.have.property('code', ErrorCode.INVALID_INPUT);
        expect(error?.message).to.match(/^secret: /);
        expect(error?.message).to.not.include(bad.slice(5, 20) || '\u0000');
      }
    });

    it('opens a key by its prefix: whsec_ as HMAC bytes, whsk_ as an ed25519 key; a new secret of either scheme', () => {
      const hmac = generateSigningSecret(SignatureScheme.HMAC_SHA256);
      expect(hmac).to.not.have.property('publicKey');
      expect(signingKey(hmac.secret)).to.deep.equal(secretKey(hmac.secret));
      const ed = generateSigningSecret(SignatureScheme.ED25519);
      expect(signingKey(ed.secret)).to.be.instanceOf(Ed25519SigningKey);
      expect(schemeOf({ secret: 'enc:…', createdAt: 0, expiresAt: null, publicKey: ed.publicKey ?? '' })).to.equal('ed25519');
      expect(schemeOf({ secret: 'enc:…', createdAt: 0, expiresAt: null }), 'a secret stored before ed25519 existed').to.equal('hmac-sha256');
    });
  });

  describe('signatureHeader()', () => {
    it('signs v1a,<ed25519 of "id.timestamp.body"> that node:crypto verifies with the whpk_ decoded by hand', () => {
      const { secret, publicKey } = generateEd25519Key();
      const header = signatureHeader([ed25519SigningKey(secret)], 'evt_1', NOW_SEC, BODY);
      expect(header).to.match(/^v1a,[A-Za-z0-9+/]{86}==$/);
      const [signature] = v1a(header);
      expect(cryptoVerify(null, Buffer.from(`evt_1.${NOW_SEC}.${BODY}`), consumerKey(publicKey), signature ?? Buffer.alloc(0))).to.equal(true);
      expect(cryptoVerify(null, Buffer.from(`evt_1.${NOW_SEC}.{"n":2}`), consumerKey(publicKey), signature ?? Buffer.alloc(0))).to.equal(false);
    });

    it('signs with each key in order during a rotation across schemes, current first; a Standard Webhooks library verifies the v1 among them', () => {
      const ed = generateEd25519Key();
      const whsec = generateSecret();
      // The library checks the timestamp against the system clock.
      const nowSec = Math.floor(Date.now() / 1000);
      const header = signatureHeader([ed25519SigningKey(ed.secret), secretKey(whsec)], 'evt_1', nowSec, BODY);
      expect(header.split(' ').map((p) => p.slice(0, p.indexOf(',')))).to.deep.equal(['v1a', 'v1']);
      expect(() => new Webhook(whsec).verify(BODY, { ...webhookHeaders('evt_1', nowSec, header) })).to.not.throw();
    });
  });

  describe('verify()', () => {
    const ed = generateEd25519Key();
    const other = generateEd25519Key();
    const whsec = generateSecret();
    const signed = (keys: Parameters<typeof signatureHeader>[0], body = BODY) => webhookHeaders('evt_1', NOW_SEC, signatureHeader(keys, 'evt_1', NOW_SEC, body));

    it('accepts a v1a signature given the whpk_, and a list of keys of either kind', () => {
      const headers = signed([ed25519SigningKey(ed.secret)]);
      expect(verify({ payload: BODY, headers, secret: ed.publicKey, nowSec: NOW_SEC })).to.deep.equal({ id: 'evt_1', timestampSec: NOW_SEC, sequence: null });
      expect(() => verify({ payload: Buffer.from(BODY), headers, secret: [whsec, other.publicKey, ed.publicKey], nowSec: NOW_SEC })).to.not.throw();
      const mixed = signed([secretKey(whsec), ed25519SigningKey(ed.secret)]);
      expect(() => verify({ payload: BODY, headers: mixed, secret: whsec, nowSec: NOW_SEC }), 'the v1 alone').to.not.throw();
      expect(() => verify({ payload: BODY, headers: mixed, secret: ed.publicKey, nowSec: NOW_SEC }), 'the v1a alone').to.not.throw();
    });

    it('refuses another key\'s, a tampered body\'s, or a malformed v1a signature with HERALD_INVALID_SIGNATURE, and names a missing version', () => {
      const refused = (run: () => unknown): WebhookVerificationError => {
        try {
          run();
        } catch (error) {
          expect(error).to.be.instanceOf(WebhookVerificationError);
          return error as WebhookVerificationError;
        }
        throw new Error('verified');
      };
      const headers = signed([ed25519SigningKey(ed.secret)]);
      expect(refused(() => verify({ payload: BODY, headers, secret: other.publicKey, nowSec: NOW_SEC })).message).to.equal('webhook-signature: no signature matches the secret');
      expect(refused(() => verify({ payload: '{"n":2}', headers, secret: ed.publicKey, nowSec: NOW_SEC })).code).to.equal(ErrorCode.INVALID_SIGNATURE);
      for (const junk of ['v1a,AAAA', 'v1a,', `v1a,${'A'.repeat(86)}==`, 'v1a,!!']) {
        const error = refused(() => verify({ payload: BODY, headers: { ...headers, 'webhook-signature': junk }, secret: ed.publicKey, nowSec: NOW_SEC }));
        expect(error.header).to.equal('webhook-signature');
      }
      expect(refused(() => verify({ payload: BODY, headers, secret: whsec, nowSec: NOW_SEC })).message).to.equal('webhook-signature: holds no v1 signature');
      const hmacOnly = signed([secretKey(whsec)]);
      expect(refused(() => verify({ payload: BODY, headers: hmacOnly, secret: ed.publicKey, nowSec: NOW_SEC })).message).to.equal('webhook-signature: holds no v1a signature');
    });

    it('keeps the timestamp tolerance as for v1', () => {
      const headers = signed([ed25519SigningKey(ed.secret)]);
      expect(() => verify({ payload: BODY, headers, secret: ed.publicKey, nowSec: NOW_SEC + 301 })).to.throw(WebhookVerificationError, /too old/);
    });

    it('treats a whsk_ or a malformed whpk_ as the caller\'s mistake (HERALD_INVALID_INPUT), not a bad request', () => {
      const headers = signed([ed25519SigningKey(ed.secret)]);
      for (const bad of [ed.secret, 'whpk_AAAA', 'whpk_']) {
        expect(() => verify({ payload: BODY, headers, secret: bad, nowSec: NOW_SEC }), bad).to.throw().with.property('code', ErrorCode.INVALID_INPUT);
      }
    });
  });

  describe('the sequence signature', () => {
    const ed = generateEd25519Key();
    const key = ed25519SigningKey(ed.secret);

    it('signs "webhook-sequence", a NUL byte, then "id.timestamp.sequence", and verify() checks it', () => {
      const header = sequenceSignatureHeader([key], 'evt_1', NOW_SEC, 42);
      expect(ed25519SequenceText('evt_1', NOW_SEC, 42)).to.equal(`webhook-sequence\u0000evt_1.${NOW_SEC}.42`);
      const [signature] = v1a(header);
      expect(cryptoVerify(null, Buffer.from(`webhook-sequence\u0000evt_1.${NOW_SEC}.42`), consumerKey(ed.publicKey), signature ?? Buffer.alloc(0))).to.equal(true);
      const headers = { ...webhookHeaders('evt_1', NOW_SEC, signatureHeader([key], 'evt_1', NOW_SEC, BODY)), 'webhook-sequence': '42', 'webhook-sequence-signature': header };
      expect(verify({ payload: BODY, headers, secret: ed.publicKey, nowSec: NOW_SEC }).sequence).to.equal(42);
      expect(() => verify({ payload: BODY, headers: { ...headers, 'webhook-sequence': '43' }, secret: ed.publicKey, nowSec: NOW_SEC }))
        .to.throw(WebhookVerificationError, 'webhook-sequence-signature: no signature matches the secret');
    });

    it('never passes as a body signature: not for the same id, nor for a forged id that carries the prefix', () => {
      const sequenceSignature = sequenceSignatureHeader([key], 'evt_1', NOW_SEC, 42);
      for (const id of ['evt_1', 'webhook-sequence:evt_1', 'webhook-sequenceevt_1', 'webhook-sequence.evt_1']) {
        const forged = { 'webhook-id': id, 'webhook-timestamp': String(NOW_SEC), 'webhook-signature': sequenceSignature };
        expect(() => verify({ payload: '42', headers: forged, secret: ed.publicKey, nowSec: NOW_SEC }), id).to.throw(WebhookVerificationError);
      }
      // The only id that would make the signed text read as "id.timestamp.body" holds the NUL byte,
      // which no HTTP header can carry: node:http refuses to send it.
      expect(() => validateHeaderValue('webhook-id', 'webhook-sequence\u0000evt_1')).to.throw().with.property('code', 'ERR_INVALID_CHAR');
    });

    it('is not taken for a sequence signature when it is a body signature', () => {
      const body = signatureHeader([key], 'evt_1', NOW_SEC, '42');
      const headers = { ...webhookHeaders('evt_1', NOW_SEC, signatureHeader([key], 'evt_1', NOW_SEC, BODY)), 'webhook-sequence': '42', 'webhook-sequence-signature': body };
      expect(() => verify({ payload: BODY, headers, secret: ed.publicKey, nowSec: NOW_SEC })).to.throw(WebhookVerificationError, /webhook-sequence-signature/);
    });
  });

  describe('SigningKeys', () => {
    it('opens a sealed whsk_ once per loaded secret into a ready key', () => {
      const box = new SecretBox(Buffer.alloc(32, 7));
      const ed = generateEd25519Key();
      const endpoint = { id: 'ep_1', secrets: [{ secret: box.seal(ed.secret, 'ep_1'), createdAt: 0, expiresAt: null, publicKey: ed.publicKey }] };
      const keys = new SigningKeys(box);
      const [first] = keys.active(endpoint as never, 1);
      expect(first).to.be.instanceOf(Ed25519SigningKey);
      expect((first as Ed25519SigningKey).publicKey).to.equal(ed.publicKey);
      expect(keys.active(endpoint as never, 2)[0], 'the same key object, not opened again').to.equal(first);
    });
  });

  describe('the signing pool', () => {
    let pool: SigningPool | undefined;
    afterEach(async () => {
      await pool?.close();
      pool = undefined;
    });

    it('signs ed25519 and HMAC keys in a worker exactly as inline (ed25519 signatures are deterministic)', async () => {
      const keys = [ed25519SigningKey(generateEd25519Key().secret), secretKey(generateSecret())];
      const batch: SignRequest[] = Array.from({ length: 20 }, (_, i) => ({
        keys: i % 2 === 0 ? keys : [keys[0] as Ed25519SigningKey],
        id: `evt_${i}`,
        timestampSec: NOW_SEC + i,
        body: `{"i":${i},"pad":"${'x'.repeat(100)}"}`,
        sequence: i + 1,
      }));
      pool = new SigningPool({ inlineMaxBytes: 0, batchMaxCount: 8 });
      const pooled = await Promise.all(batch.map((r) => pool?.signRequest(r)));
      expect(pool.stats).to.include({ inline: 0, pooled: 20, tasks: 3 });
      expect(pooled).to.deep.equal(
        batch.map((r) => ({
          signature: signatureHeader(r.keys, r.id, r.timestampSec, r.body),
          sequenceSignature: sequenceSignatureHeader(r.keys, r.id, r.timestampSec, r.sequence ?? 0),
        })),
      );
      expect(pooled[0]?.signature.split(' ').map((p) => p.slice(0, p.indexOf(',')))).to.deep.equal(['v1a', 'v1']);
    });

    it('sends a flush with an ed25519 signature to the worker by default, where the same small HMAC request is signed inline', async () => {
      const ed = ed25519SigningKey(generateEd25519Key().secret);
      const request = { id: 'evt_1', timestampSec: NOW_SEC, body: BODY };
      pool = new SigningPool();
      await pool.sign({ ...request, keys: [secretKey(generateSecret())] });
      expect(pool.stats).to.include({ inline: 1, pooled: 0 });
      expect(await pool.sign({ ...request, keys: [ed] })).to.equal(signatureHeader([ed], 'evt_1', NOW_SEC, BODY));
      expect(pool.stats).to.include({ inline: 1, pooled: 1, tasks: 1 });
    });
  });
});
