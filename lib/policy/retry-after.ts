/**
 * The `Retry-After` response header (RFC 9110 §10.2.3): either delta-seconds
 * or an HTTP date. Herald treats it as a floor for the next attempt.
 */
import { parseHttpDate } from '../clock.ts';

const HOUR = 60 * 60 * 1_000;

/** A server cannot push an attempt further out than this, whatever it asks. */
export const MAX_RETRY_AFTER_MS = 24 * HOUR;

const DAY_NAME = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY_NAME = '(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTH = '(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const TIME = '\\d{2}:\\d{2}:\\d{2}';

/**
 * The three date forms HTTP allows. `Date.parse` alone is far too lenient
 * (it reads `foo 1` as a date), so the shape is checked first.
 */
const HTTP_DATE_FORMS = {
  /** `Sun, 06 Nov 1994 08:49:37 GMT`, the one servers should send. */
  imfFixdate: new RegExp(`^${DAY_NAME}, \\d{2} ${MONTH} \\d{4} ${TIME} GMT$`),
  /** `Sunday, 06-Nov-94 08:49:37 GMT` (obsolete). */
  rfc850: new RegExp(`^${LONG_DAY_NAME}, \\d{2}-${MONTH}-\\d{2} ${TIME} GMT$`),
  /** `Sun Nov  6 08:49:37 1994` (obsolete; always UTC, though it does not say so). */
  asctime: new RegExp(`^${DAY_NAME} ${MONTH} [ \\d]\\d ${TIME} \\d{4}$`),
} as const;

function httpDateMs(text: string): number | undefined {
  if (HTTP_DATE_FORMS.imfFixdate.test(text) || HTTP_DATE_FORMS.rfc850.test(text)) return parseHttpDate(text);
  if (HTTP_DATE_FORMS.asctime.test(text)) return parseHttpDate(`${text} GMT`);
  return undefined;
}

/**
 * The delay in milliseconds from `now` that a `Retry-After` header asks for:
 * `0` for a date already past, at most {@link MAX_RETRY_AFTER_MS}, and
 * `undefined` when the header is absent or not understood.
 */
export function parseRetryAfter(header: string | null, now: number): number | undefined {
  if (header === null) return undefined;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Math.min(Number(text) * 1_000, MAX_RETRY_AFTER_MS);
  const at = httpDateMs(text);
  if (at === undefined) return undefined;
  return Math.min(Math.max(0, at - now), MAX_RETRY_AFTER_MS);
}
