/**
 * Standard Webhooks signing secrets: `whsec_` followed by the base64 of the
 * key bytes (HMAC-SHA256), or an ed25519 `whsk_` key (lib/signing/ed25519-key.ts).
 * The prefix makes a leaked secret recognisable to secret scanners, keeps it
 * from being mistaken for any other token, and says which scheme it signs with.
 */
import { randomBytes } from 'node:crypto';
import { ValidationError } from '../errors.ts';
import { SignatureScheme, type SigningSecret } from '../model.ts';
import { ED25519_SECRET_PREFIX, ed25519SigningKey, generateEd25519Key } from './ed25519-key.ts';
import type { SigningKey } from './signature.ts';

const PREFIX = 'whsec_';

/**
 * 24 random bytes: the size Standard Webhooks recommends as its minimum
 * (24–64 bytes), and a multiple of 3, so the base64 has no padding.
 */
const SECRET_BYTES = 24;

/** Standard base64 with optional padding; `Buffer.from(…, 'base64')` alone would skip junk silently. */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

/** A new random secret, `whsec_` + base64 of 24 bytes from the system CSPRNG. */
export function generateSecret(): string {
  return PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/**
 * A new secret of `scheme`: a `whsec_`, or a `whsk_` with its `whpk_` public key. `secret` is to
 * be sealed; `publicKey` is stored plain beside it (see `SigningSecret.publicKey`).
 */
export function generateSigningSecret(scheme: SignatureScheme): { readonly secret: string; readonly publicKey?: string } {
  return scheme === SignatureScheme.ED25519 ? generateEd25519Key() : { secret: generateSecret() };
}

/** The scheme a stored secret signs with: ed25519 when it carries a public key, else HMAC (every older secret). */
export function schemeOf(secret: SigningSecret): SignatureScheme {
  return secret.publicKey === undefined ? SignatureScheme.HMAC_SHA256 : SignatureScheme.ED25519;
}

/**
 * The HMAC key bytes of a `whsec_` secret.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`, field `secret`) when the
 *   secret lacks the prefix, is not base64, or is empty. The message never
 *   contains the secret itself.
 */
export function secretKey(secret: string): Buffer {
  if (typeof secret !== 'string' || !secret.startsWith(PREFIX)) throw malformed();
  const encoded = secret.slice(PREFIX.length);
  if (encoded.length === 0 || !BASE64.test(encoded)) throw malformed();
  return Buffer.from(encoded, 'base64');
}

/**
 * The key an opened secret signs with, by its prefix: HMAC key bytes for a `whsec_`, an
 * `Ed25519SigningKey` for a `whsk_`.
 * @throws ValidationError (`HERALD_INVALID_INPUT`, field `secret`) when it is neither, well formed.
 */
export function signingKey(secret: string): SigningKey {
  if (typeof secret === 'string' && secret.startsWith(ED25519_SECRET_PREFIX)) return ed25519SigningKey(secret);
  return secretKey(secret);
}

function malformed(): ValidationError {
  return new ValidationError('secret', 'must be whsec_ followed by base64');
}
