/**
 * The failure kind of an attempt's {@link Outcome}: the short label failures are grouped by
 * (`http-503`, `timeout`, `dns`, …), so support reads "endpoint X: 1 200 timeouts" rather than
 * 1 200 rows. Pure: the rules are the tables below; the stores record the kind of a delivery's
 * last failed attempt when they settle it, and of every dead letter.
 */
import type { Outcome } from '../model.ts';

/** The kinds that are not `http-<status>`. */
export const FailureKind = {
  /** The endpoint did not answer within the endpoint's `timeoutMs`. */
  TIMEOUT: 'timeout',
  /** The host name did not resolve (`ENOTFOUND`, `EAI_AGAIN`). */
  DNS: 'dns',
  /** The TLS handshake failed: an expired, self-signed or mismatched certificate, … */
  TLS: 'tls',
  /** Nobody listens on the port (`ECONNREFUSED`). */
  REFUSED: 'refused',
  /** The connection was cut (`ECONNRESET`, `EPIPE`, an undici socket error). */
  RESET: 'reset',
  /** Any other network error (unreachable host, `PROTOCOL`, an invalid URL, …). */
  NETWORK: 'network',
  /** The SSRF guard refused the address before any traffic. */
  BLOCKED: 'blocked',
  /** The egress proxy did not open the tunnel (refused, non-2xx to the CONNECT, no answer in time): not the endpoint's failure. */
  PROXY: 'proxy',
  /** A 3xx: redirects are never followed. */
  REDIRECT: 'redirect',
  /** Recorded before failure kinds existed (the migration that added them gives it to older failures). */
  UNKNOWN: 'unknown',
} as const;
export type FailureKind = (typeof FailureKind)[keyof typeof FailureKind] | `http-${number}`;

/** Network codes by kind; a code in none of them is `network`. */
const DNS_CODES: ReadonlySet<string> = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NODATA', 'EAI_NONAME']);
const REFUSED_CODES: ReadonlySet<string> = new Set(['ECONNREFUSED']);
const RESET_CODES: ReadonlySet<string> = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);
/** Node's TLS and certificate codes that do not start with one of {@link TLS_CODE_PREFIXES}. */
const TLS_CODES: ReadonlySet<string> = new Set([
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'HOSTNAME_MISMATCH',
  'CLIENT_CERT_EXPIRED',
]);
const TLS_CODE_PREFIXES: readonly string[] = ['ERR_TLS_', 'ERR_SSL_', 'CERT_'];

function networkKind(code: string): FailureKind {
  if (DNS_CODES.has(code)) return FailureKind.DNS;
  if (REFUSED_CODES.has(code)) return FailureKind.REFUSED;
  if (RESET_CODES.has(code)) return FailureKind.RESET;
  if (TLS_CODES.has(code) || TLS_CODE_PREFIXES.some((prefix) => code.startsWith(prefix))) return FailureKind.TLS;
  return FailureKind.NETWORK;
}

/** The failure kind of an outcome (of a failed attempt: a 2xx gives `http-2xx`, never recorded). */
export function failureKind(outcome: Outcome): FailureKind {
  switch (outcome.kind) {
    case 'response':
      return outcome.status >= 300 && outcome.status <= 399 ? FailureKind.REDIRECT : `http-${outcome.status}`;
    case 'timeout':
      return FailureKind.TIMEOUT;
    case 'network':
      return networkKind(outcome.code);
    case 'blocked':
      return FailureKind.BLOCKED;
    case 'proxy':
      return FailureKind.PROXY;
  }
}

const NAMED_KINDS: ReadonlySet<string> = new Set(Object.values(FailureKind));
const HTTP_KIND = /^http-[1-5]\d\d$/;

/** True for a kind {@link failureKind} can give (or `unknown`): what the admin API accepts. */
export function isFailureKind(value: unknown): value is FailureKind {
  return typeof value === 'string' && (NAMED_KINDS.has(value) || HTTP_KIND.test(value));
}
