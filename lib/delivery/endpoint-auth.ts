/**
 * What an endpoint adds to each of its requests: its custom headers and its `authorization`.
 *
 * - `requestHeaders()` builds an attempt's headers when it is signed: the custom headers (secret
 *   values opened), `authorization` for `bearer` and `basic` auth, then Herald's own headers,
 *   which win over any custom header of the same name. Opened values are kept per endpoint
 *   version (a WeakMap on the endpoint object, which a change replaces), so an attempt costs no
 *   decryption; a value that cannot be opened fails the signing (a fault on our side: no attempt
 *   is spent).
 * - `authorizedSend()` wraps the sender for `oauth2` auth: the attempt is sent with the
 *   endpoint's access token (lib/delivery/oauth-tokens.ts); when the consumer answers 401, a new
 *   token is fetched and the request is sent once more, within the same attempt, and what that
 *   second request gets is the attempt's outcome. A token that cannot be obtained makes the
 *   attempt's outcome (`network`, code `OAUTH_TOKEN`, retried like any network failure), and the
 *   consumer is not called.
 *
 * Nothing here logs; no header value reaches an outcome, an attempt or a dead letter.
 */
import type { Clock } from '../clock.ts';
import type { Endpoint } from '../model.ts';
import type { OAuthTokens } from './oauth-tokens.ts';
import type { SendRequest, SendResult } from './sender.ts';

/**
 * Names Herald sets itself, or that belong to the connection: refused as custom headers, and
 * dropped from them should one be stored anyway. `user-agent` tells consumers and their
 * firewalls that Herald is calling.
 */
const RESERVED_NAMES: ReadonlySet<string> = new Set([
  'idempotency-key',
  'traceparent',
  'tracestate',
  'content-type',
  'content-length',
  'content-encoding',
  'host',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
  'proxy-authorization',
  'proxy-connection',
  'user-agent',
]);
const RESERVED_PREFIX = 'webhook-';

/** Whether a header name (lower-case) is Herald's or the connection's: every `webhook-*` one and those above. */
export function isReservedHeader(lowerCaseName: string): boolean {
  return lowerCaseName.startsWith(RESERVED_PREFIX) || RESERVED_NAMES.has(lowerCaseName);
}

/** Opens a stored (sealed) value for an endpoint: the SecretBox's `open`. */
export type OpenSecret = (stored: string, endpointId: string) => string;

/** An endpoint's own headers, by lower-case name, per endpoint version. */
const opened = new WeakMap<Endpoint, Readonly<Record<string, string>>>();

/**
 * The headers of one attempt: the endpoint's custom headers and static `authorization`, then
 * `heraldHeaders` (names lower-cased), which win; `heraldHeaders` itself for an endpoint with none.
 * @throws SecretUnreadableError when a sealed value cannot be opened.
 */
export function requestHeaders(endpoint: Endpoint, heraldHeaders: Record<string, string>, open: OpenSecret): Record<string, string> {
  // Nothing of the endpoint's own: Herald's headers as they are (a fresh object per attempt).
  if (endpoint.headers === undefined && endpoint.auth === undefined) return heraldHeaders;
  let own = opened.get(endpoint);
  if (own === undefined) {
    own = ownHeaders(endpoint, open);
    opened.set(endpoint, own);
  }
  const headers: Record<string, string> = { ...own };
  for (const [name, value] of Object.entries(heraldHeaders)) headers[name.toLowerCase()] = value;
  return headers;
}

function ownHeaders(endpoint: Endpoint, open: OpenSecret): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const header of endpoint.headers ?? []) {
    const name = header.name.toLowerCase();
    if (!isReservedHeader(name)) headers[name] = header.secret ? open(header.value, endpoint.id) : header.value;
  }
  const { auth } = endpoint;
  switch (auth?.type) {
    case undefined:
      break;
    case 'bearer':
      headers.authorization = `Bearer ${open(auth.token, endpoint.id)}`;
      break;
    case 'basic':
      headers.authorization = `Basic ${Buffer.from(`${auth.username}:${open(auth.password, endpoint.id)}`, 'utf8').toString('base64')}`;
      break;
    case 'oauth2':
      // Sent with the access token (authorizedSend); opened here so that a secret this node cannot
      // open fails the signing rather than an attempt. A custom header cannot stand in for it.
      open(auth.clientSecret, endpoint.id);
      delete headers.authorization;
      break;
  }
  return Object.freeze(headers);
}

/** The status that makes an attempt with an OAuth token fetch a new one and send once more. */
const UNAUTHORIZED = 401;

/**
 * `send` with OAuth 2.0 for the endpoints that use it; other requests go to `send` as they are.
 * The result's `durationMs` covers the whole attempt, token requests included.
 */
export function authorizedSend(deps: {
  readonly clock: Clock;
  /** Sends to the endpoint (which may carry a client certificate). */
  readonly send: (request: SendRequest, endpoint?: Endpoint) => Promise<SendResult>;
  readonly tokens: OAuthTokens;
}): (request: SendRequest, endpoint?: Endpoint) => Promise<SendResult> {
  const { clock, send, tokens } = deps;
  return async (request, endpoint) => {
    const auth = endpoint?.auth;
    if (endpoint === undefined || auth?.type !== 'oauth2') return send(request, endpoint);
    const startedAt = clock.now();
    const done = (outcome: SendResult['outcome']): SendResult => ({ outcome, durationMs: clock.now() - startedAt });
    let token = await tokens.token(endpoint, auth);
    if ('failure' in token) return done(token.failure);
    let sent = await send({ ...request, headers: { ...request.headers, authorization: `Bearer ${token.token}` } }, endpoint);
    if (sent.outcome.kind !== 'response' || sent.outcome.status !== UNAUTHORIZED) return done(sent.outcome);
    // Refused: the token may have been revoked or expired early. One new token, one more try.
    token = await tokens.token(endpoint, auth, token.token);
    if ('failure' in token) return done(token.failure);
    sent = await send({ ...request, headers: { ...request.headers, authorization: `Bearer ${token.token}` } }, endpoint);
    return done(sent.outcome);
  };
}
