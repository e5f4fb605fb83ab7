/**
 * Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` for a `whsec_`
 * secret, `v1a,<base64 ed25519 signature of "id.timestamp.body">` for a `whsk_` key, one per
 * active key, space-separated, so a consumer in the middle of a rotation accepts the request with
 * either its old or its new secret (or public key), whatever the scheme of each.
 */
import { createHmac } from 'node:crypto';
import { ValidationError } from '../errors.ts';
import { ed25519Sign, Ed25519SigningKey } from './ed25519-key.ts';

/** A key that signs: HMAC key bytes (a decoded `whsec_`, `v1,`) or an opened `whsk_` (`v1a,`). */
export type SigningKey = Uint8Array | Ed25519SigningKey;

/**
 * The three headers of a signed webhook request. A type alias rather than an
 * interface, so it is assignable to `Record<string, string>` header maps.
 */
export type WebhookHeaders = {
  readonly 'webhook-id': string;
  /** Seconds since the Unix epoch, as decimal digits. */
  readonly 'webhook-timestamp': string;
  /** `v1,<signature>` or `v1a,<signature>` for each active key, space-separated. */
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
 * The `webhook-signature` header value: `v1,<sig>` for each HMAC key, `v1a,<sig>` for each
 * ed25519 key, in order, space-separated.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) when `keys` is empty or
 *   `timestampSec` is not a whole non-negative number of seconds.
 */
export function signatureHeader(
  keys: readonly SigningKey[],
  id: string,
  timestampSec: number,
  body: string | Uint8Array,
): string {
  assertSignable(keys, timestampSec);
  let header = '';
  for (const key of keys) {
    if (header !== '') header += ' ';
    header += key instanceof Ed25519SigningKey
      ? `v1a,${ed25519Sign(key.privateKey, `${id}.${timestampSec}.`, body)}`
      : `v1,${computeSignature(key, id, timestampSec, body)}`;
  }
  return header;
}

/**
 * Checks what `signatureHeader()` checks, without signing.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) when `keys` is empty or
 *   `timestampSec` is not a whole non-negative number of seconds.
 */
export function assertSignable(keys: readonly SigningKey[], timestampSec: number): void {
  if (keys.length === 0) throw new ValidationError('keys', 'must hold at least one signing key');
  if (!Number.isSafeInteger(timestampSec) || timestampSec < 0) {
    throw new ValidationError('timestampSec', `must be whole seconds since the epoch (got ${timestampSec})`);
  }
}

/**
 * The key a `webhook-sequence-signature` is made with: HMAC-SHA256 of the text `webhook-sequence`
 * under the endpoint's key (the decoded `whsec_` secret, as for the body signature).
 *
 * A key of its own, rather than the body's key, because the signed text `id.timestamp.sequence` has
 * the very shape of a body signature's `id.timestamp.body`: signed with the body's key, a captured
 * request's sequence signature would be a valid `webhook-signature` for a forged request whose body
 * is the sequence number (`42` is valid JSON). Under a derived key the two can never stand in for
 * each other.
 */
export function sequenceKey(key: Uint8Array): Buffer {
  return createHmac('sha256', key).update(SEQUENCE_KEY_LABEL).digest();
}

/** What {@link sequenceKey} signs to derive the sequence key. */
export const SEQUENCE_KEY_LABEL = 'webhook-sequence';

/** Derived keys of the keys seen, so a key used for many requests is derived once. */
const sequenceKeys = new WeakMap<Uint8Array, Buffer>();

function cachedSequenceKey(key: Uint8Array): Buffer {
  let derived = sequenceKeys.get(key);
  if (derived === undefined) {
    derived = sequenceKey(key);
    sequenceKeys.set(key, derived);
  }
  return derived;
}

/** The base64 HMAC-SHA256 of `${id}.${timestampSec}.${sequence}` under {@link sequenceKey}(`key`). */
export function computeSequenceSignature(key: Uint8Array, id: string, timestampSec: number, sequence: number): string {
  return createHmac('sha256', cachedSequenceKey(key)).update(`${id}.${timestampSec}.${sequence}`).digest('base64');
}

/**
 * What an ed25519 key signs for a sequence: `webhook-sequence`, a NUL byte, then
 * `${id}.${timestampSec}.${sequence}`.
 *
 * A key pair cannot be derived into a second key the consumer would also need, so the text is
 * separated instead. A printable prefix would not do: a body signature covers `${id}.${ts}.${body}`
 * with `webhook-id` chosen by whoever sends the request, so the signed text
 * `webhook-sequence:evt_1.1767225600.42` is also the body signature of a forged request with
 * `webhook-id: webhook-sequence:evt_1` and body `42`. Every way of reading the text as
 * `id.timestamp.body` puts the NUL in the id, and no HTTP header can carry a NUL byte: the forged
 * request cannot be sent. The other way round, a body signature's text starts with an event id,
 * which holds no NUL either (ids are letters, digits and `_ . : -`).
 */
export function ed25519SequenceText(id: string, timestampSec: number, sequence: number): string {
  return `${SEQUENCE_KEY_LABEL}\0${id}.${timestampSec}.${sequence}`;
}

/**
 * The `webhook-sequence-signature` header value: `v1,<sig>` for each HMAC key (see
 * {@link computeSequenceSignature}), `v1a,<sig>` of {@link ed25519SequenceText} for each ed25519
 * key, in order, space-separated.
 * @throws ValidationError (`HERALD_INVALID_INPUT`) as {@link signatureHeader}, or naming `sequence`
 *   when it is not a whole number ≥ 1.
 */
export function sequenceSignatureHeader(keys: readonly SigningKey[], id: string, timestampSec: number, sequence: number): string {
  assertSignable(keys, timestampSec);
  assertSequence(sequence);
  let header = '';
  for (const key of keys) {
    if (header !== '') header += ' ';
    header += key instanceof Ed25519SigningKey
      ? `v1a,${ed25519Sign(key.privateKey, ed25519SequenceText(id, timestampSec, sequence))}`
      : `v1,${computeSequenceSignature(key, id, timestampSec, sequence)}`;
  }
  return header;
}

/** @throws ValidationError (`HERALD_INVALID_INPUT`) naming `sequence` when it is not a whole number ≥ 1. */
export function assertSequence(sequence: number): void {
  if (!Number.isSafeInteger(sequence) || sequence < 1) {
    throw new ValidationError('sequence', `must be a whole number ≥ 1 (got ${sequence})`);
  }
}

/** The two headers that carry a delivery's signed sequence number. */
export type SequenceHeaders = {
  /** The endpoint's number for the delivery, decimal digits. */
  readonly 'webhook-sequence': string;
  /** `v1,<signature>` (HMAC) or `v1a,<signature>` (ed25519) of the sequence for each active key, space-separated. */
  readonly 'webhook-sequence-signature': string;
};

/** The three `webhook-*` headers for one request. */
export function webhookHeaders(id: string, timestampSec: number, signatureHeader: string): WebhookHeaders {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSec),
    'webhook-signature': signatureHeader,
  };
}
