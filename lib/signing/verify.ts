/**
 * `verify()`: what a consumer of Herald's webhooks calls on each request.
 *
 * The checks, in order: the three `webhook-*` headers are present; the
 * timestamp is within `toleranceSec` of now (a captured request cannot be
 * replayed later); one of the signatures matches one of the keys: a `v1,`
 * HMAC signature a `whsec_` secret, a `v1a,` ed25519 signature a `whpk_`
 * public key. Then, when the request carries a sequence number (or
 * `sequence: 'required'`), `webhook-sequence` is a whole number ≥ 1 and one of
 * the signatures of `webhook-sequence-signature` matches it
 * (`lib/signing/signature.ts`), so a consumer that tracks the numbers to find
 * gaps reads a number Herald sent. HMAC signatures are compared in constant
 * time, so response timing does not leak how much of a forged signature was
 * right (an ed25519 signature is checked, not compared, and needs no secret).
 */
import { timingSafeEqual, type KeyObject } from 'node:crypto';
import { systemClock } from '../clock.ts';
import { ConfigError, ErrorCode, HeraldError } from '../errors.ts';
import { ED25519_PUBLIC_PREFIX, ed25519PublicKey, ed25519Verify } from './ed25519-key.ts';
import { secretKey } from './secret.ts';
import { computeSequenceSignature, computeSignature, ed25519SequenceText } from './signature.ts';

/** The header a verification failure is about. */
export const WebhookHeader = {
  ID: 'webhook-id',
  TIMESTAMP: 'webhook-timestamp',
  SIGNATURE: 'webhook-signature',
  SEQUENCE: 'webhook-sequence',
  SEQUENCE_SIGNATURE: 'webhook-sequence-signature',
} as const;
export type WebhookHeader = (typeof WebhookHeader)[keyof typeof WebhookHeader];

/** A webhook request did not verify. Code `HERALD_INVALID_SIGNATURE`; `header` names the header at fault. */
export class WebhookVerificationError extends HeraldError {
  readonly header: WebhookHeader;

  constructor(header: WebhookHeader, rule: string) {
    super(ErrorCode.INVALID_SIGNATURE, `${header}: ${rule}`);
    this.header = header;
  }
}

export interface VerifyOptions {
  /** The raw request body, exactly as received (do not re-serialise parsed JSON). */
  readonly payload: string | Buffer;
  /** Request headers; names are matched case-insensitively (node:http gives them lower-cased). */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /**
   * The endpoint's `whsec_` secret or `whpk_` public key, or several (of either kind) during a
   * rotation: any may match. A `whsec_` checks the `v1,` signatures, a `whpk_` the `v1a,` ones.
   */
  readonly secret: string | readonly string[];
  /** How far the timestamp may be from now, either way. @default 300 (5 minutes, as Standard Webhooks) */
  readonly toleranceSec?: number;
  /** The current time in seconds. @default the system clock */
  readonly nowSec?: number;
  /**
   * `if-present`: a request with `webhook-sequence` must carry a matching `webhook-sequence-signature`;
   * one without either verifies, with `sequence: null`. `required`: a request without a sequence is
   * refused too (every delivery Herald creates has one; only deliveries created before the numbering
   * existed, and test requests of other senders, have none).
   * @default 'if-present'
   */
  readonly sequence?: 'if-present' | 'required';
}

/** What a verified request says, authenticated. */
export interface VerifiedWebhook {
  /** `webhook-id`: the event id, the same on every attempt and replay. */
  readonly id: string;
  readonly timestampSec: number;
  /** `webhook-sequence`, verified: the endpoint's number for this delivery; `null` when the request has none. */
  readonly sequence: number | null;
}

const DEFAULT_TOLERANCE_SEC = 5 * 60;

/** Whole seconds: a timestamp header carries nothing else (no sign, fraction or exponent). */
const TIMESTAMP = /^\d{1,15}$/;

/** A sequence number: decimal digits, no sign, no leading zero, at most 15 digits (a safe integer). */
const SEQUENCE = /^[1-9]\d{0,14}$/;

/**
 * Verifies a signed webhook request; returns what it authenticated when it is authentic.
 *
 * @throws WebhookVerificationError (`HERALD_INVALID_SIGNATURE`) when a header
 *   is missing, the timestamp is malformed or outside the tolerance, or no
 *   signature matches any secret or public key; `header` says which. For the sequence:
 *   `webhook-sequence` when it is malformed, or missing while its signature is
 *   there (or `sequence: 'required'`); `webhook-sequence-signature` when it is
 *   missing or matches neither the number nor any secret (a tampered number).
 * @throws ValidationError (`HERALD_INVALID_INPUT`) when a secret is neither
 *   `whsec_` + base64 nor `whpk_` + base64 of 32 bytes — a configuration
 *   mistake, not a bad request.
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) when `toleranceSec` or
 *   `nowSec` is not a finite non-negative number.
 */
export function verify(options: VerifyOptions): VerifiedWebhook {
  const toleranceSec = options.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  if (!Number.isFinite(toleranceSec) || toleranceSec < 0) {
    throw new ConfigError('toleranceSec', toleranceSec, 'must be a finite number of seconds ≥ 0');
  }
  const nowSec = options.nowSec ?? Math.floor(systemClock.now() / 1000);
  if (!Number.isFinite(nowSec) || nowSec < 0) {
    throw new ConfigError('nowSec', nowSec, 'must be a finite number of seconds since the epoch');
  }
  const sequenceRule = options.sequence ?? 'if-present';
  if (sequenceRule !== 'if-present' && sequenceRule !== 'required') {
    throw new ConfigError('sequence', sequenceRule, "must be 'if-present' or 'required'");
  }
  // Decode the secrets first: a malformed secret is the caller's mistake and
  // must surface as such, whatever the request looks like.
  const secrets = typeof options.secret === 'string' ? [options.secret] : options.secret;
  const keys = secrets.map(verifyingKey);

  const id = singleHeader(options.headers, WebhookHeader.ID);
  const timestamp = singleHeader(options.headers, WebhookHeader.TIMESTAMP);
  const signatures = header(options.headers, WebhookHeader.SIGNATURE);
  if (signatures === undefined) throw new WebhookVerificationError(WebhookHeader.SIGNATURE, 'missing header');

  if (!TIMESTAMP.test(timestamp)) {
    throw new WebhookVerificationError(WebhookHeader.TIMESTAMP, 'must be whole seconds since the epoch');
  }
  const timestampSec = Number(timestamp);
  if (timestampSec < nowSec - toleranceSec) {
    throw new WebhookVerificationError(WebhookHeader.TIMESTAMP, `too old: more than ${toleranceSec} s before now`);
  }
  if (timestampSec > nowSec + toleranceSec) {
    throw new WebhookVerificationError(WebhookHeader.TIMESTAMP, `too new: more than ${toleranceSec} s after now`);
  }

  const signedPrefix = `${id}.${timestampSec}.`;
  matchOne(WebhookHeader.SIGNATURE, signatures, keys, (key) =>
    key.scheme === 'v1'
      ? equalTo(computeSignature(key.key, id, timestampSec, options.payload))
      : (signature) => ed25519Verify(key.key, signedPrefix, options.payload, signature),
  );

  const sequenceText = optionalSingleHeader(options.headers, WebhookHeader.SEQUENCE);
  const sequenceSignatures = header(options.headers, WebhookHeader.SEQUENCE_SIGNATURE);
  if (sequenceText === undefined) {
    if (sequenceSignatures !== undefined) {
      throw new WebhookVerificationError(WebhookHeader.SEQUENCE, `missing header, though ${WebhookHeader.SEQUENCE_SIGNATURE} is present`);
    }
    if (sequenceRule === 'required') throw new WebhookVerificationError(WebhookHeader.SEQUENCE, 'missing header');
    return { id, timestampSec, sequence: null };
  }
  if (!SEQUENCE.test(sequenceText)) {
    throw new WebhookVerificationError(WebhookHeader.SEQUENCE, 'must be a whole number ≥ 1 in decimal digits');
  }
  const sequence = Number(sequenceText);
  if (sequenceSignatures === undefined) throw new WebhookVerificationError(WebhookHeader.SEQUENCE_SIGNATURE, 'missing header');
  const signedSequence = ed25519SequenceText(id, timestampSec, sequence);
  matchOne(WebhookHeader.SEQUENCE_SIGNATURE, sequenceSignatures, keys, (key) =>
    key.scheme === 'v1'
      ? equalTo(computeSequenceSignature(key.key, id, timestampSec, sequence))
      : (signature) => ed25519Verify(key.key, signedSequence, '', signature),
  );
  return { id, timestampSec, sequence };
}

/** A secret as it verifies: HMAC key bytes for `v1,` signatures, or an ed25519 public key for `v1a,` ones. */
type VerifyingKey = { readonly scheme: 'v1'; readonly key: Buffer } | { readonly scheme: 'v1a'; readonly key: KeyObject };

function verifyingKey(secret: string): VerifyingKey {
  if (typeof secret === 'string' && secret.startsWith(ED25519_PUBLIC_PREFIX)) return { scheme: 'v1a', key: ed25519PublicKey(secret) };
  return { scheme: 'v1', key: secretKey(secret) };
}

/** A check that a received signature is `expected`, in constant time. */
function equalTo(expected: string): (signature: string) => boolean {
  const wanted = Buffer.from(expected);
  return (signature) => {
    const candidate = Buffer.from(signature);
    // timingSafeEqual needs equal lengths; a length mismatch reveals nothing
    // secret, since every valid signature has the same length.
    return candidate.length === wanted.length && timingSafeEqual(candidate, wanted);
  };
}

/**
 * Returns when one of the signatures in `received` of a key's version (`v1,` or `v1a,`) passes
 * that key's check; else throws naming `name`. Other versions are skipped, as the spec asks.
 */
function matchOne(name: WebhookHeader, received: string, keys: readonly VerifyingKey[], checkOf: (key: VerifyingKey) => (signature: string) => boolean): void {
  const parts = received.split(' ');
  let candidates = 0;
  for (const key of keys) {
    const prefix = `${key.scheme},`;
    let check: ((signature: string) => boolean) | undefined;
    for (const part of parts) {
      if (!part.startsWith(prefix)) continue;
      candidates++;
      check ??= checkOf(key);
      if (check(part.slice(prefix.length))) return;
    }
  }
  if (candidates === 0) {
    const versions = [...new Set(keys.map((k) => k.scheme))].join(' or ');
    throw new WebhookVerificationError(name, `holds no ${versions === '' ? 'v1' : versions} signature`);
  }
  throw new WebhookVerificationError(name, 'no signature matches the secret');
}

type Headers = VerifyOptions['headers'];

/** A header's raw value by case-insensitive name. */
function rawHeader(headers: Headers, name: WebhookHeader): string | readonly string[] | undefined {
  const exact = headers[name];
  if (exact !== undefined) return exact;
  for (const key of Object.keys(headers)) {
    if (key.toLowerCase() === name) return headers[key];
  }
  return undefined;
}

/** A header's value; repeated headers (an array, when not joined by node:http) are joined by spaces. */
function header(headers: Headers, name: WebhookHeader): string | undefined {
  const value = rawHeader(headers, name);
  if (value === undefined) return undefined;
  const text = typeof value === 'string' ? value : value.join(' ');
  return text === '' ? undefined : text;
}

/** A header that may be absent (or empty), but appears at most once. */
function optionalSingleHeader(headers: Headers, name: WebhookHeader): string | undefined {
  const value = rawHeader(headers, name);
  if (value === undefined || value.length === 0) return undefined;
  if (typeof value === 'string') return value;
  if (value.length > 1) throw new WebhookVerificationError(name, 'must appear once');
  return value[0] === '' ? undefined : value[0];
}

/** A header that must appear exactly once and not be empty. */
function singleHeader(headers: Headers, name: WebhookHeader): string {
  const value = rawHeader(headers, name);
  if (value === undefined || value.length === 0) throw new WebhookVerificationError(name, 'missing header');
  if (typeof value === 'string') return value;
  if (value.length > 1) throw new WebhookVerificationError(name, 'must appear once');
  const only = value[0] ?? '';
  if (only === '') throw new WebhookVerificationError(name, 'missing header');
  return only;
}
