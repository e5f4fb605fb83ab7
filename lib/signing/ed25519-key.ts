/**
 * Standard Webhooks asymmetric keys: ed25519, serialised as `whsk_` (secret, Herald's alone) and
 * `whpk_` (public, the consumer's).
 *
 * The bytes after each prefix are what the reference implementation (Svix, whose format the
 * specification's `whsk_`/`whpk_` row describes) writes: `whpk_` + base64 of the 32-byte public
 * key, and `whsk_` + base64 of the 64-byte secret key in the libsodium layout, the 32-byte seed
 * followed by the 32-byte public key. The public half of a `whsk_` is checked against its seed
 * when the key is read, so a key whose halves disagree is refused rather than signing with a
 * public key the consumer does not hold.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { ValidationError } from '../errors.ts';

export const ED25519_SECRET_PREFIX = 'whsk_';
export const ED25519_PUBLIC_PREFIX = 'whpk_';

const SEED_BYTES = 32;
const PUBLIC_BYTES = 32;
/** An ed25519 signature is 64 bytes: 88 characters of base64. */
const SIGNATURE_BYTES = 64;

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

const MISMATCHED_HALVES = 'is a whsk_ key whose public half does not match its seed';

/** A new key pair from the system CSPRNG: the `whsk_` Herald keeps (sealed) and the `whpk_` the consumer gets. */
export function generateEd25519Key(): { readonly secret: string; readonly publicKey: string } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const jwk = privateKey.export({ format: 'jwk' });
  const seed = Buffer.from(jwk.d ?? '', 'base64url');
  const publicBytes = Buffer.from(jwk.x ?? '', 'base64url');
  return {
    secret: ED25519_SECRET_PREFIX + Buffer.concat([seed, publicBytes]).toString('base64'),
    publicKey: ED25519_PUBLIC_PREFIX + publicBytes.toString('base64'),
  };
}

/**
 * An opened `whsk_` key, ready to sign. `text` is the `whsk_` itself: what crosses to a signing
 * worker (a `KeyObject` would be cloned per task, and could not be cached there by identity).
 */
export class Ed25519SigningKey {
  readonly privateKey: KeyObject;
  /** The consumer's `whpk_`. */
  readonly publicKey: string;
  readonly text: string;

  /** @throws ValidationError (field `secret`) as {@link ed25519SigningKey}. */
  constructor(secret: string) {
    const bytes = decode(secret, ED25519_SECRET_PREFIX, SEED_BYTES + PUBLIC_BYTES);
    const seed = bytes.subarray(0, SEED_BYTES);
    const publicBytes = bytes.subarray(SEED_BYTES);
    // A JWK (a tenth of what a PKCS #8 import costs): Node 24 refuses one whose halves differ
    // (ERR_CRYPTO_INVALID_JWK), Node 20 takes it, and the comparison below refuses it there.
    try {
      this.privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d: seed.toString('base64url'), x: publicBytes.toString('base64url') }, format: 'jwk' });
    } catch {
      throw new ValidationError('secret', MISMATCHED_HALVES);
    }
    const derived = createPublicKey(this.privateKey).export({ format: 'jwk' }).x;
    if (derived !== publicBytes.toString('base64url')) throw new ValidationError('secret', MISMATCHED_HALVES);
    this.publicKey = ED25519_PUBLIC_PREFIX + publicBytes.toString('base64');
    this.text = secret;
  }
}

/**
 * The signing key of a `whsk_` secret.
 * @throws ValidationError (`HERALD_INVALID_INPUT`, field `secret`) when it lacks the prefix, is not
 *   base64 of 64 bytes, or its public half is not its seed's. The message never holds the key.
 */
export function ed25519SigningKey(secret: string): Ed25519SigningKey {
  return new Ed25519SigningKey(secret);
}

/**
 * The verifying key of a `whpk_` public key.
 * @throws ValidationError (`HERALD_INVALID_INPUT`, field `secret`) when it lacks the prefix or is
 *   not base64 of 32 bytes.
 */
export function ed25519PublicKey(publicKey: string): KeyObject {
  const bytes = decode(publicKey, ED25519_PUBLIC_PREFIX, PUBLIC_BYTES);
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: bytes.toString('base64url') }, format: 'jwk' });
}

/**
 * The base64 ed25519 signature of `text` followed by `body`. ed25519 signs one message whole
 * (it hashes it twice), so the two are joined into one buffer first: a copy of the body that an
 * HMAC, fed in pieces, does not need.
 */
export function ed25519Sign(key: KeyObject, text: string, body: string | Uint8Array = ''): string {
  return sign(null, joined(text, body), key).toString('base64');
}

/** Whether `signature` (base64) is `key`'s signature of `text` followed by `body`. Never throws on a malformed signature. */
export function ed25519Verify(key: KeyObject, text: string, body: string | Uint8Array, signature: string): boolean {
  if (signature.length !== 88 || !BASE64.test(signature)) return false;
  const bytes = Buffer.from(signature, 'base64');
  return bytes.length === SIGNATURE_BYTES && verify(null, joined(text, body), key, bytes);
}

function joined(text: string, body: string | Uint8Array): Buffer {
  if (typeof body === 'string') return Buffer.from(text + body, 'utf8');
  return Buffer.concat([Buffer.from(text, 'utf8'), body]);
}

function decode(text: string, prefix: string, length: number): Buffer {
  const rule = `must be ${prefix} followed by base64 of ${length} bytes`;
  if (typeof text !== 'string' || !text.startsWith(prefix)) throw new ValidationError('secret', rule);
  const encoded = text.slice(prefix.length);
  if (!BASE64.test(encoded)) throw new ValidationError('secret', rule);
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length !== length) throw new ValidationError('secret', rule);
  return bytes;
}
