/**
 * Classification of an attempt's {@link Outcome}: delivered, worth retrying, or
 * permanently failed. Pure: the rules are the tables below (docs/DELIVERY.md,
 * "What counts as success, what is retried"); the actor acts on the verdict.
 */
import { durationText } from '../clock.ts';
import type { Outcome } from '../model.ts';
import { parseRetryAfter } from './retry-after.ts';

export type Verdict =
  | { readonly kind: 'delivered' }
  | {
      readonly kind: 'retry';
      /** A one-line summary of the outcome, e.g. `HTTP 503`. */
      readonly reason: string;
      /** The server's `Retry-After`, as a delay from the attempt; a floor for the next one. */
      readonly retryAfterMs: number | undefined;
      /** A 429: hold the endpoint's whole mailbox, not just this delivery. */
      readonly pauseMailbox: boolean;
    }
  | { readonly kind: 'permanent'; readonly reason: string };

/**
 * 4xx statuses that are retried: the server timed out reading our request
 * (408) or asks us to slow down (429). Every other 4xx means the request
 * itself is refused and sending it again would not change that.
 */
const RETRYABLE_CLIENT_ERRORS: ReadonlySet<number> = new Set([408, 429]);

/** Statuses that pause the endpoint's mailbox as well as retrying the delivery. */
const PAUSING_STATUSES: ReadonlySet<number> = new Set([429]);

/**
 * `410 Gone`: the consumer says the endpoint no longer exists, for good. Standard Webhooks
 * recommends disabling such an endpoint rather than sending it anything more.
 */
const GONE_STATUS = 410;

/** 5xx statuses, and 408, say the endpoint is unwell: they count toward opening its breaker. */
const BREAKER_CLIENT_ERRORS: ReadonlySet<number> = new Set([408]);

/**
 * `network` codes produced before any traffic (by the sender's own checks):
 * sending again cannot succeed, and they say nothing about the endpoint's
 * health. Every other network error (refused, reset, DNS, TLS, `PROTOCOL`: a
 * peer that does not speak HTTP, …) is retried and counts against the breaker.
 */
const PERMANENT_NETWORK_CODES: ReadonlySet<string> = new Set(['ERR_INVALID_URL']);

function isRetryableStatus(status: number): boolean {
  return (status >= 500 && status <= 599) || RETRYABLE_CLIENT_ERRORS.has(status);
}

/** A one-line summary of an outcome for logs, attempts and dead letters. */
export function describeOutcome(outcome: Outcome): string {
  switch (outcome.kind) {
    case 'response':
      return outcome.status >= 300 && outcome.status <= 399 && outcome.location !== null
        ? `HTTP ${outcome.status} → ${outcome.location}`
        : `HTTP ${outcome.status}`;
    case 'timeout':
      return `timeout after ${durationText(outcome.timeoutMs)}`;
    case 'network':
      return `${outcome.code}: ${outcome.message}`;
    case 'blocked':
      return `blocked: ${outcome.message}`;
    case 'proxy':
      return `proxy: ${outcome.message}`;
  }
}

/**
 * Decides what an outcome means for its delivery. `now` is when the response
 * arrived; a `Retry-After` date is measured from it.
 */
export function classify(outcome: Outcome, now: number): Verdict {
  const reason = describeOutcome(outcome);
  switch (outcome.kind) {
    case 'response': {
      const { status } = outcome;
      if (status >= 200 && status <= 299) return { kind: 'delivered' };
      if (!isRetryableStatus(status)) {
        // 1xx, 3xx (redirects are never followed, the Location is in the reason) and other 4xx.
        return { kind: 'permanent', reason };
      }
      return {
        kind: 'retry',
        reason,
        retryAfterMs: parseRetryAfter(outcome.retryAfter, now),
        pauseMailbox: PAUSING_STATUSES.has(status),
      };
    }
    case 'timeout':
      return { kind: 'retry', reason, retryAfterMs: undefined, pauseMailbox: false };
    case 'network':
      if (PERMANENT_NETWORK_CODES.has(outcome.code)) return { kind: 'permanent', reason };
      return { kind: 'retry', reason, retryAfterMs: undefined, pauseMailbox: false };
    case 'blocked':
      // The SSRF guard will refuse the same address next time too.
      return { kind: 'permanent', reason };
    case 'proxy':
      // The proxy's trouble, usually brief (a restart, a full connection table): the endpoint may be fine.
      return { kind: 'retry', reason, retryAfterMs: undefined, pauseMailbox: false };
  }
}

/**
 * Whether an outcome is a failure of the endpoint itself, for its circuit
 * breaker: timeouts, network errors, 5xx and 408. A 4xx (or 429, or a 3xx)
 * proves the endpoint is up and answering; a blocked address never left us,
 * and a proxy's failure never reached the endpoint.
 */
export function countsAgainstBreaker(outcome: Outcome): boolean {
  switch (outcome.kind) {
    case 'response':
      return (outcome.status >= 500 && outcome.status <= 599) || BREAKER_CLIENT_ERRORS.has(outcome.status);
    case 'timeout':
      return true;
    case 'network':
      return !PERMANENT_NETWORK_CODES.has(outcome.code);
    case 'blocked':
    case 'proxy':
      return false;
  }
}

/**
 * Whether a failed outcome counts toward the endpoint's health (`failingSince`, the
 * `endpoint.failing` event and the auto-disable): every failure but the egress proxy's, which
 * never reached the endpoint. The stores apply the same rule by failure kind.
 */
export function countsAgainstHealth(outcome: Outcome): boolean {
  return outcome.kind !== 'proxy';
}

/**
 * Whether an outcome says the endpoint itself is gone (`410 Gone`), not just this request
 * refused: the actor then disables the endpoint (with `delivery.disableOnGone`, the default).
 */
export function isEndpointGone(outcome: Outcome): boolean {
  return outcome.kind === 'response' && outcome.status === GONE_STATUS;
}
