/**
 * Standard Webhooks signing secrets: `whsec_` followed by the base64 of the
 * key bytes. The prefix makes a leaked secret recognisable to secret scanners
 * and keeps it from being mistaken for any other token.
 */
import { randomBytes } from 'node:crypto';
import { ValidationError } from '../errors.ts';

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

function malformed(): ValidationError {
  return new ValidationError('secret', 'must be whsec_ followed by base64');
}
