/**
 * An endpoint's custom headers: the rule of `headers` in the admin API, their sealing at rest and
 * how the API shows them. Pure: values come in, values go out; the SecretBox's `seal` is handed in.
 *
 * Input is a map of header name to a value, or to `{value, secret?}`:
 *
 *     { "X-Team": "payments", "X-Api-Key": { "value": "k_live_…", "secret": true } }
 *
 * and is stored as a list in that order. A secret value is sealed before the store sees it and is
 * never shown again: the API shows `{"secret": true}` in its place.
 */
import { ValidationError } from '../errors.ts';
import type { EndpointHeader } from '../model.ts';
import { isReservedHeader } from '../delivery/endpoint-auth.ts';

/** The most headers an endpoint carries. */
export const MAX_HEADERS = 20;
/** The most characters of one header name. */
export const MAX_HEADER_NAME_CHARS = 256;
/** The most characters of one header value. */
export const MAX_HEADER_VALUE_CHARS = 4_096;
/** The most characters of all names and values together. */
export const MAX_HEADERS_TOTAL_CHARS = 8_192;

/** RFC 7230 §3.2.6 `token`: the characters a header name is made of. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Printable ASCII and tab, not starting or ending with a space or tab: no CR, LF, NUL or other control character. */
const FIELD_VALUE = /^(?:[\x21-\x7e](?:[\t\x20-\x7e]*[\x21-\x7e])?)?$/;

/** A header as the API shows it: a secret's value never. */
export type HeaderView = { readonly value: string; readonly secret: false } | { readonly secret: true };

/**
 * Checks `headers` of a create or update: names RFC 7230 tokens, neither reserved nor given twice
 * (case-insensitively), values of printable ASCII, and within the limits above.
 * @returns the headers in the order given, their values as given (not yet sealed).
 * @throws ValidationError naming `headers.<name>` (or `headers`) and the rule.
 */
export function validateHeaders(value: unknown, field = 'headers'): EndpointHeader[] {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError(field, 'must be an object of header name to value, or to {value, secret}');
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_HEADERS) throw new ValidationError(field, `must hold at most ${MAX_HEADERS} headers (got ${entries.length})`);
  const seen = new Set<string>();
  let total = 0;
  const headers = entries.map(([name, given]): EndpointHeader => {
    const at = `${field}.${name}`;
    if (name.length > MAX_HEADER_NAME_CHARS || !TOKEN.test(name)) {
      throw new ValidationError(at, `must be a header name: 1-${MAX_HEADER_NAME_CHARS} of A-Z a-z 0-9 and !#$%&'*+-.^_\`|~`);
    }
    const lower = name.toLowerCase();
    if (isReservedHeader(lower)) throw new ValidationError(at, 'is set by Herald or the connection and cannot be given');
    if (seen.has(lower)) throw new ValidationError(at, 'is given twice (header names are case-insensitive)');
    seen.add(lower);
    const header = headerOf(name, given, at);
    total += name.length + header.value.length;
    return header;
  });
  if (total > MAX_HEADERS_TOTAL_CHARS) throw new ValidationError(field, `must hold at most ${MAX_HEADERS_TOTAL_CHARS} characters of names and values (got ${total})`);
  return headers;
}

function headerOf(name: string, given: unknown, at: string): EndpointHeader {
  if (typeof given === 'string') return { name, value: fieldValue(given, at), secret: false };
  if (given === null || typeof given !== 'object' || Array.isArray(given)) {
    throw new ValidationError(at, 'must be a string or {value, secret}');
  }
  const { value, secret, ...rest } = given as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw new ValidationError(`${at}.${unknown}`, 'is not a known field (allowed: value, secret)');
  if (secret !== undefined && typeof secret !== 'boolean') throw new ValidationError(`${at}.secret`, `must be true or false (got ${JSON.stringify(secret)})`);
  return { name, value: fieldValue(value, `${at}.value`), secret: secret === true };
}

/** A header value (or a credential sent in one): printable ASCII, no CR, LF, NUL or surrounding spaces. */
export function fieldValue(value: unknown, field: string, maxChars = MAX_HEADER_VALUE_CHARS): string {
  if (typeof value !== 'string') throw new ValidationError(field, `must be a string (got ${value === null ? 'null' : typeof value})`);
  if (value.length > maxChars) throw new ValidationError(field, `must be at most ${maxChars} characters (got ${value.length})`);
  if (!FIELD_VALUE.test(value)) {
    throw new ValidationError(field, 'must be printable ASCII without CR, LF, NUL or other control characters, and without surrounding spaces');
  }
  return value;
}

/**
 * `authorization` among custom headers is refused while the endpoint has `auth`: the two would
 * compete for one header (sending, `auth` wins).
 * @throws ValidationError (`headers.<name>`).
 */
export function checkHeadersBesideAuth(headers: readonly EndpointHeader[] | undefined, hasAuth: boolean): void {
  const authorization = headers?.find((h) => h.name.toLowerCase() === 'authorization');
  if (authorization !== undefined && hasAuth) {
    throw new ValidationError(`headers.${authorization.name}`, 'cannot be given while the endpoint has auth (it sets authorization)');
  }
}

/** The headers with each secret value sealed by `seal`; the others as they are. */
export function sealHeaders(headers: readonly EndpointHeader[], seal: (value: string) => string): EndpointHeader[] {
  return headers.map((h) => (h.secret ? { ...h, value: seal(h.value) } : h));
}

/** The headers as the API shows them, by name: `null` for none. */
export function headersView(headers: readonly EndpointHeader[] | undefined): Record<string, HeaderView> | null {
  if (headers === undefined) return null;
  return Object.fromEntries(headers.map((h) => [h.name, h.secret ? { secret: true } : { value: h.value, secret: false }]));
}
