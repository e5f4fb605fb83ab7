import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { ErrorCode, SecretUnreadableError } from '../../lib/errors.ts';
import { generateSecret } from '../../lib/signing/secret.ts';
import { isSealed, keyIdOf, SecretBox, SEALED_PREFIX } from '../../lib/signing/secret-box.ts';
import { decodeSecretKey } from '../../lib/signing/secret-key-text.ts';

function unreadableError(run: () => unknown): SecretUnreadableError {
  try {
    run();
  } catch (error) {
    expect(error).to.be.instanceOf(SecretUnreadableError);
    return error as SecretUnreadableError;
  }
  return expect.fail('the value opened');
}

describe('SecretBox', () => {
  const key = randomBytes(32);
  const box = new SecretBox(key);
  const secret = generateSecret();

  context('when sealing and opening with the same key', () => {
    it('round-trips, and the sealed form holds neither the secret nor its key bytes', () => {
      const sealed = box.seal(secret, 'ep_1');
      expect(box.open(sealed, 'ep_1')).to.equal(secret);
      expect(sealed).to.match(/^enc:v1:[0-9a-f]{8}:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
      expect(sealed).to.not.include(secret.slice('whsec_'.length));
      expect(sealed).to.not.include('whsec_');
    });

    it('names the key by the first 8 hex digits of its SHA-256', () => {
      expect(box.currentKeyId).to.equal(keyIdOf(key)).and.match(/^[0-9a-f]{8}$/);
      expect(box.seal(secret, 'ep_1').startsWith(`${SEALED_PREFIX}${keyIdOf(key)}:`)).to.equal(true);
    });

    it('uses a fresh nonce for every value: the same secret seals differently each time', () => {
      const sealed = new Set(Array.from({ length: 20 }, () => box.seal(secret, 'ep_1')));
      expect(sealed.size).to.equal(20);
    });
  });

  context('when the value was sealed under another key', () => {
    it('opens it when that key is a previous key, and says it needs sealing under the current one', () => {
      const old = randomBytes(32);
      const sealedUnderOld = new SecretBox(old).seal(secret, 'ep_1');
      const rotated = new SecretBox(randomBytes(32), [old]);
      expect(rotated.open(sealedUnderOld, 'ep_1')).to.equal(secret);
      expect(rotated.needsSealing(sealedUnderOld)).to.equal(true);
      expect(rotated.needsSealing(rotated.seal(secret, 'ep_1'))).to.equal(false);
      expect(rotated.keyIds).to.deep.equal([rotated.currentKeyId, keyIdOf(old)]);
    });

    it('refuses it with HERALD_SECRET_KEY_UNKNOWN naming the key id and the endpoint, never the secret', () => {
      const other = randomBytes(32);
      const sealed = new SecretBox(other).seal(secret, 'ep_42');
      const error = unreadableError(() => box.open(sealed, 'ep_42'));
      expect(error.code).to.equal(ErrorCode.SECRET_KEY_UNKNOWN);
      expect(error.keyId).to.equal(keyIdOf(other));
      expect(error.endpointId).to.equal('ep_42');
      expect(error.message).to.include(keyIdOf(other)).and.include('ep_42').and.not.include(secret);
    });
  });

  context('when the value was tampered with', () => {
    for (const [part, index] of [['nonce', 3], ['ciphertext', 4]] as const) {
      it(`refuses a changed ${part} with HERALD_SECRET_UNREADABLE`, () => {
        const parts = box.seal(secret, 'ep_1').split(':');
        const bytes = Buffer.from(parts[index] as string, 'base64');
        bytes[0] = (bytes[0] as number) ^ 1;
        parts[index] = bytes.toString('base64');
        expect(unreadableError(() => box.open(parts.join(':'), 'ep_1')).code).to.equal(ErrorCode.SECRET_UNREADABLE);
      });
    }

    it('refuses a changed authentication tag (the last 16 bytes)', () => {
      const parts = box.seal(secret, 'ep_1').split(':');
      const bytes = Buffer.from(parts[4] as string, 'base64');
      bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 0x80;
      parts[4] = bytes.toString('base64');
      expect(unreadableError(() => box.open(parts.join(':'), 'ep_1')).code).to.equal(ErrorCode.SECRET_UNREADABLE);
    });

    it('refuses a value copied into another endpoint: the endpoint id is associated data', () => {
      const sealed = box.seal(secret, 'ep_1');
      const error = unreadableError(() => box.open(sealed, 'ep_2'));
      expect(error.code).to.equal(ErrorCode.SECRET_UNREADABLE);
      expect(error.endpointId).to.equal('ep_2');
    });

    it('refuses a value relabelled with another key id of the box', () => {
      const previous = randomBytes(32);
      const both = new SecretBox(key, [previous]);
      const relabelled = both.seal(secret, 'ep_1').replace(keyIdOf(key), keyIdOf(previous));
      expect(unreadableError(() => both.open(relabelled, 'ep_1')).code).to.equal(ErrorCode.SECRET_UNREADABLE);
    });
  });

  context('when the value is in another form', () => {
    it('opens a plain legacy whsec_ secret as it is, and says it needs sealing', () => {
      expect(box.open(secret, 'ep_1')).to.equal(secret);
      expect(isSealed(secret)).to.equal(false);
      expect(box.needsSealing(secret)).to.equal(true);
    });

    it('refuses an unknown version and a malformed v1 value with HERALD_SECRET_UNREADABLE', () => {
      const v2 = box.seal(secret, 'ep_1').replace('enc:v1:', 'enc:v2:');
      expect(unreadableError(() => box.open(v2, 'ep_1')).message).to.include('enc:v2');
      for (const malformed of ['enc:v1:', 'enc:v1:zzzzzzzz:AAAA:AAAA', `enc:v1:${box.currentKeyId}:AAAA:AAAA`, `${box.seal(secret, 'ep_1')}:extra`]) {
        expect(unreadableError(() => box.open(malformed, 'ep_1')).code, malformed).to.equal(ErrorCode.SECRET_UNREADABLE);
      }
    });
  });

  context('without a key (SecretBox.plain())', () => {
    it('stores secrets as they are and opens plain ones, but not sealed ones', () => {
      const plain = SecretBox.plain();
      expect(plain.seal(secret, 'ep_1')).to.equal(secret);
      expect(plain.open(secret, 'ep_1')).to.equal(secret);
      expect(plain.needsSealing(secret)).to.equal(false);
      expect(plain.currentKeyId).to.equal(null);
      expect(unreadableError(() => plain.open(box.seal(secret, 'ep_1'), 'ep_1')).code).to.equal(ErrorCode.SECRET_KEY_UNKNOWN);
    });
  });

  it('refuses keys that are not 32 bytes, a key given twice, and previous keys without a current one', () => {
    expect(() => new SecretBox(randomBytes(16))).to.throw(RangeError, /32 bytes/);
    expect(() => new SecretBox(key, [Buffer.from(key)])).to.throw(RangeError, /twice/);
    expect(() => new SecretBox(null, [key])).to.throw(RangeError, /current/);
  });
});

describe('decodeSecretKey()', () => {
  const key = randomBytes(32);

  it('reads 32 bytes as base64 (with or without padding) or hex, ignoring surrounding whitespace', () => {
    expect(decodeSecretKey(key.toString('base64'))?.equals(key)).to.equal(true);
    expect(decodeSecretKey(key.toString('base64').replace('=', ''))?.equals(key)).to.equal(true);
    expect(decodeSecretKey(`${key.toString('hex')}\n`)?.equals(key)).to.equal(true);
    expect(decodeSecretKey(key.toString('hex').toUpperCase())?.equals(key)).to.equal(true);
  });

  it('refuses other lengths, other alphabets and non-canonical base64', () => {
    const short = randomBytes(16);
    for (const text of [short.toString('base64'), short.toString('hex'), randomBytes(33).toString('base64'), key.toString('base64url').replace(/.$/, '_'), '', 'x'.repeat(64)]) {
      expect(decodeSecretKey(text), text).to.equal(undefined);
    }
    // The 43rd character's last two bits fall outside 32 bytes: a key's encoding leaves them zero.
    const zeros = Buffer.alloc(32).toString('base64');
    expect(decodeSecretKey(zeros)?.equals(Buffer.alloc(32))).to.equal(true);
    expect(decodeSecretKey(`${zeros.slice(0, 42)}B=`)).to.equal(undefined);
  });
});
