/**
 * The rule of an endpoint's `clientTls`, `{cert, key, passphrase?}`: a PEM
 * certificate, the PEM private key that matches it (with its passphrase when
 * it is encrypted), not expired. Each error names the field and never shows
 * the key or the passphrase. Then the key and passphrase are sealed with the
 * endpoint's SecretBox, as signing secrets are.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { ValidationError } from '../errors.ts';
import type { ClientTls } from '../model.ts';
import type { SecretBox } from '../signing/secret-box.ts';

/** A validated client certificate, its key and passphrase still in clear: sealed before it is stored. */
export type ClientTlsInput = ClientTls & { readonly sealed: false };

/** What the API shows of a client certificate: never the key. */
export type ClientTlsView = Pick<ClientTls, 'subject' | 'issuer' | 'fingerprint' | 'notAfter'>;

const FIELDS = ['cert', 'key', 'passphrase'] as const;
const CERT_MAX_CHARS = 64 * 1_024;
const KEY_MAX_CHARS = 16 * 1_024;
const PASSPHRASE_MAX_CHARS = 1_024;

function pemText(value: unknown, field: string, what: string, maxChars: number): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > maxChars || !value.includes('-----BEGIN ')) {
    throw new ValidationError(field, `must be ${what} in PEM ("-----BEGIN …"), at most ${maxChars} characters`);
  }
  return value;
}

function certificateOf(cert: string, field: string): X509Certificate {
  try {
    return new X509Certificate(cert);
  } catch {
    throw new ValidationError(field, 'must be a PEM X.509 certificate (it does not parse)');
  }
}

function privateKeyOf(key: string, passphrase: string | undefined, field: string): KeyObject {
  try {
    return createPrivateKey(passphrase === undefined ? { key, format: 'pem' } : { key, format: 'pem', passphrase });
  } catch (error) {
    // Node reports a missing passphrase under several codes by version; the PEM says it is encrypted.
    const encrypted = key.includes('-----BEGIN ENCRYPTED PRIVATE KEY-----') || key.includes('Proc-Type: 4,ENCRYPTED');
    if (passphrase === undefined && (encrypted || (error as { code?: unknown }).code === 'ERR_MISSING_PASSPHRASE')) throw new ValidationError(field, 'is encrypted: give its clientTls.passphrase');
    throw new ValidationError(field, `must be a PEM private key${passphrase === undefined ? '' : ' that clientTls.passphrase opens'} (it does not load)`);
  }
}

/**
 * Checks `{cert, key, passphrase?}`: the certificate parses, the key loads and matches it. Expiry is
 * checked by {@link assertCurrent}, which needs the time.
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field`, `field.cert`, `field.key`,
 *   `field.passphrase` or an unknown `field.<key>`.
 */
export function validateClientTls(value: unknown, field = 'clientTls'): ClientTlsInput {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError(field, 'must be an object {"cert", "key", "passphrase"?} of PEM texts, or null for none');
  }
  const body = value as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    if (!(FIELDS as readonly string[]).includes(key)) throw new ValidationError(`${field}.${key}`, `is not a known field (allowed: ${FIELDS.join(', ')})`);
  }
  const cert = pemText(body.cert, `${field}.cert`, 'a certificate', CERT_MAX_CHARS);
  const key = pemText(body.key, `${field}.key`, 'a private key', KEY_MAX_CHARS);
  if (body.passphrase !== undefined && (typeof body.passphrase !== 'string' || body.passphrase === '' || body.passphrase.length > PASSPHRASE_MAX_CHARS)) {
    throw new ValidationError(`${field}.passphrase`, `must be a non-empty string of at most ${PASSPHRASE_MAX_CHARS} characters`);
  }
  const passphrase = body.passphrase as string | undefined;
  const x509 = certificateOf(cert, `${field}.cert`);
  const privateKey = privateKeyOf(key, passphrase, `${field}.key`);
  if (!x509.checkPrivateKey(privateKey)) throw new ValidationError(`${field}.key`, `does not match the certificate in ${field}.cert`);
  return {
    cert,
    key,
    passphrase: passphrase ?? null,
    subject: x509.subject,
    issuer: x509.issuer,
    fingerprint: x509.fingerprint256,
    notAfter: Date.parse(x509.validTo),
    sealed: false,
  };
}

/** @throws ValidationError (`field.cert`) when the certificate has expired by `now`. */
export function assertCurrent(tls: ClientTlsInput, now: number, field = 'clientTls'): void {
  if (tls.notAfter <= now) {
    throw new ValidationError(`${field}.cert`, `has expired (not after ${new Date(tls.notAfter).toISOString()}): give a current certificate`);
  }
}

/** The client certificate as stored: its key and passphrase sealed for `endpointId`. */
export function sealClientTls(tls: ClientTlsInput, box: SecretBox, endpointId: string): ClientTls {
  return {
    cert: tls.cert,
    key: box.seal(tls.key, endpointId),
    passphrase: tls.passphrase === null ? null : box.seal(tls.passphrase, endpointId),
    subject: tls.subject,
    issuer: tls.issuer,
    fingerprint: tls.fingerprint,
    notAfter: tls.notAfter,
  };
}

/** The stored client certificate with its key and passphrase under the box's current key (`herald secrets reencrypt`). */
export function resealClientTls(tls: ClientTls, box: SecretBox, endpointId: string): ClientTls {
  const reseal = (stored: string): string => (box.needsSealing(stored) ? box.seal(box.open(stored, endpointId), endpointId) : stored);
  return { ...tls, key: reseal(tls.key), passphrase: tls.passphrase === null ? null : reseal(tls.passphrase) };
}

/** Whether any sealed part of `tls` should be rewritten under the box's current key. */
export function clientTlsNeedsSealing(tls: ClientTls, box: SecretBox): boolean {
  return box.needsSealing(tls.key) || (tls.passphrase !== null && box.needsSealing(tls.passphrase));
}

export function clientTlsView(tls: ClientTls): ClientTlsView {
  return { subject: tls.subject, issuer: tls.issuer, fingerprint: tls.fingerprint, notAfter: tls.notAfter };
}
