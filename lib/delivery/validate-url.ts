/**
 * Validation of an endpoint's URL when it is created or changed. The sender
 * still guards every connection; this catches mistakes early with a clear
 * message.
 */
import { ValidationError } from '../errors.ts';

/** Longer URLs are refused; browsers and proxies commonly stop around here too. */
export const MAX_URL_LENGTH = 2_048;

const ALLOWED_PROTOCOLS: ReadonlySet<string> = new Set(['http:', 'https:']);

/**
 * Where a URL holds an ASCII control character (U+0000–U+001F, U+007F) or
 * starts or ends with whitespace, or -1. `new URL()` would silently strip
 * tabs, CR and LF and the surrounding spaces, so the URL stored would not be
 * the URL requested (`/a\r\nX-Injected: 1` is sent to `/aX-Injected:%201`).
 */
function forbiddenCharacterIndex(value: string): number {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code <= 0x1f || code === 0x7f) return i;
  }
  if (/^\s/u.test(value)) return 0;
  if (/\s$/u.test(value)) return value.length - 1;
  return -1;
}

/**
 * Checks an endpoint URL and returns it normalised (`new URL(value).href`),
 * the form that is stored and requested.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field` and the rule:
 *   not a string, too long, holding control characters or surrounding
 *   whitespace, not a URL, not http(s), or carrying credentials.
 */
export function validateEndpointUrl(value: unknown, field = 'url'): string {
  if (typeof value !== 'string') {
    throw new ValidationError(field, `must be a string (got ${value === null ? 'null' : typeof value})`);
  }
  if (value.length > MAX_URL_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_URL_LENGTH} characters (got ${value.length})`);
  }
  const forbidden = forbiddenCharacterIndex(value);
  if (forbidden !== -1) {
    const found = JSON.stringify(value[forbidden]);
    throw new ValidationError(field, `must not contain control characters or surrounding spaces (found ${found} at index ${forbidden})`);
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ValidationError(field, `must be an absolute URL such as https://example.com/webhooks (got ${JSON.stringify(value)})`);
  }
  if (!ALLOWED_PROTOCOLS.has(url.protocol)) {
    throw new ValidationError(field, `must use http or https (got ${url.protocol})`);
  }
  if (url.username !== '' || url.password !== '') {
    // Credentials in a URL end up in logs and listings; secrets belong in signing.
    throw new ValidationError(field, 'must not contain a username or password');
  }
  if (url.href.length > MAX_URL_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_URL_LENGTH} characters (got ${url.href.length} once normalised)`);
  }
  return url.href;
}
