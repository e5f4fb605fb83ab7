/**
 * Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`,
 * one per active secret, space-separated, so a consumer in the middle of a
 * secret rotation accepts the request with either its old or its new secret.
 */
import { createHmac } from 'node:crypto';
import { ValidationError } from '../errors.ts';

/**
 * The three headers of a signed webhook request. A type alias rather than an
 * interface, so it is assignable to `Record<string, string>` header maps.
 */
export type WebhookHeaders = {
  readonly 'webhook-id': string;
  /** Seconds since the Unix epoch, as decimal digits. */
  readonly 'webhook-timestamp': string;
  /** `v1,<signature>` for each active secret, space-separated. */
  readonly 'webhook-signature': string;
};

/**
 * The base64 HMAC-SHA256 of `${id}.${timestampSec}.${body}`.
 *
 * The body is fed to the HMAC separately rather than concatenated, so a large
 * payload is not copied into a second string first. A `Uint8Array` body is
 * signed byte for byte (what `verify()` receives from a raw request body).
 */
export function computeSignature(key: Uint8Array, id: string, timestampSec: number, body: string | Uint8Array): string {
  return createHmac('sha256', key).update(`${id}.${timestampSec}.`).update(body).digest('base64');
}

/**
 * The `webhook-signature` header value: `v1,<sig>` for each key, in order,
 * space-separated.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) when `keys` is empty or
 *   `timestampSec` is not a whole non-negative number of seconds.
 */
export function signatureHeader(
  keys: readonly Uint8Array[],
  id: string,
  timestampSec: number,
  body: string | Uint8Array,
): string {
  assertSignable(keys, timestampSec);
  let header = '';
  for (const key of keys) {
    if (header !== '') header += ' ';
    header += `v1,${computeSignature(key, id, timestampSec, body)}`;
  }
  return header;
}

/**
 * Checks what `signatureHeader()` checks, without signing.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) when `keys` is empty or
 *   `timestampSec` is not a whole non-negative number of seconds.
 */
export function assertSignable(keys: readonly Uint8Array[], timestampSec: number): void {
  if (keys.length === 0) throw new ValidationError('keys', 'must hold at least one signing key');
  if (!Number.isSafeInteger(timestampSec) || timestampSec < 0) {
    throw new ValidationError('timestampSec', `must be whole seconds since the epoch (got ${timestampSec})`);
  }
}

/** The three `webhook-*` headers for one request. */
export function webhookHeaders(id: string, timestampSec: number, signatureHeader: string): WebhookHeaders {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSec),
    'webhook-signature': signatureHeader,
  };
}
