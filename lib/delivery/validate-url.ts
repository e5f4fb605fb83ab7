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
 * Checks an endpoint URL and returns it unchanged.
 *
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming `field` and the rule:
 *   not a string, too long, not a URL, not http(s), or carrying credentials.
 */
export function validateEndpointUrl(value: unknown, field = 'url'): string {
  if (typeof value !== 'string') {
    throw new ValidationError(field, `must be a string (got ${value === null ? 'null' : typeof value})`);
  }
  if (value.length > MAX_URL_LENGTH) {
    throw new ValidationError(field, `must be at most ${MAX_URL_LENGTH} characters (got ${value.length})`);
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
  return value;
}
