/**
 * OAuth 2.0 access tokens for endpoints whose `auth` is `oauth2`, obtained by the client
 * credentials grant (RFC 6749 §4.4): a POST of `grant_type=client_credentials` (with `scope` and
 * `audience` when set) as `application/x-www-form-urlencoded` to the endpoint's `tokenUrl`, the
 * client authenticated by HTTP Basic (§2.3.1: id and secret form-encoded, then base64). The
 * request goes through a sender, so the SSRF guard, the endpoint's timeout and the outcome of
 * every way it can fail are those of deliveries.
 *
 * One entry per endpoint, for one auth configuration (its `key`: a changed URL, client, secret,
 * scope or audience starts afresh):
 *
 *     none ──need──► fetching ──token──► held ──refreshAt passes, or the consumer answers 401 to it──► none
 *                       └──failure──► none   (every attempt that waited has the failure as its outcome)
 *
 * Attempts that need a token while one is being fetched wait for that fetch: one request per
 * endpoint at a time, never one per attempt. A token is used until `refreshAt`: its `expires_in`
 * less {@link REFRESH_MARGIN_MS} (half its life, when that is shorter), by the injected clock.
 */
import type { Clock } from '../clock.ts';
import { messageOf } from '../errors.ts';
import type { Endpoint, EndpointAuth, Outcome } from '../model.ts';
import type { SendRequest, SendResult } from './sender.ts';

const SECOND = 1_000;
const HOUR = 3_600 * SECOND;

/** A token is fetched again this long before it expires (or at half its life, when shorter). */
export const REFRESH_MARGIN_MS = 30 * SECOND;
/** How long a token is used when the token endpoint gives no `expires_in`. */
export const DEFAULT_TOKEN_LIFETIME_MS = HOUR;
/** The longest a token is used, whatever its `expires_in`. */
export const MAX_TOKEN_LIFETIME_MS = 24 * HOUR;
/** Past this many endpoints' entries, the oldest is forgotten (a deleted endpoint's entry goes this way). */
const MAX_ENTRIES = 10_000;
/** At most this much of a token endpoint's refusal is quoted in the attempt's message. */
const QUOTED_BODY_CHARS = 200;

/** The `network` outcome code of an attempt whose access token could not be obtained. */
export const OAUTH_TOKEN_CODE = 'OAUTH_TOKEN';

export type OAuth2Auth = Extract<EndpointAuth, { type: 'oauth2' }>;

/** An access token, or the outcome that stands for the attempt when none could be obtained. */
export type TokenResult = { readonly token: string } | { readonly failure: Outcome };

interface Entry {
  readonly key: string;
  readonly fetching: Promise<TokenResult> | undefined;
  readonly token: string | undefined;
  readonly refreshAt: number;
}

export class OAuthTokens {
  readonly #clock: Clock;
  readonly #send: (request: SendRequest) => Promise<SendResult>;
  readonly #open: (stored: string, endpointId: string) => string;
  readonly #entries = new Map<string, Entry>();
  #fetches = 0;

  constructor(deps: {
    readonly clock: Clock;
    /** POSTs a request and classifies what happened: the sender, with its SSRF guard. */
    readonly send: (request: SendRequest) => Promise<SendResult>;
    /** Opens a sealed client secret (the SecretBox's `open`). */
    readonly open: (stored: string, endpointId: string) => string;
  }) {
    this.#clock = deps.clock;
    this.#send = deps.send;
    this.#open = deps.open;
  }

  /** Token requests made so far (for tests and metrics). */
  get fetches(): number {
    return this.#fetches;
  }

  /**
   * The endpoint's access token: the one held, or one fetched (once for every attempt asking
   * meanwhile). `rejected`: the consumer answered 401 to that token, so it is not used again.
   */
  token(endpoint: Endpoint, auth: OAuth2Auth, rejected?: string): Promise<TokenResult> {
    const key = keyOf(auth);
    const held = this.#entries.get(endpoint.id);
    if (held?.key === key) {
      if (held.fetching !== undefined) return held.fetching;
      if (held.token !== undefined && held.token !== rejected && this.#clock.now() < held.refreshAt) {
        return Promise.resolve({ token: held.token });
      }
    }
    const fetching = this.#fetch(endpoint, auth).then((result) => {
      // Only the entry this fetch started is settled: a newer configuration's is left alone.
      if (this.#entries.get(endpoint.id) === entry) {
        if ('token' in result) this.#entries.set(endpoint.id, { key, fetching: undefined, token: result.token, refreshAt: result.refreshAt });
        else this.#entries.delete(endpoint.id);
      }
      return 'token' in result ? { token: result.token } : result;
    });
    const entry: Entry = { key, fetching, token: undefined, refreshAt: 0 };
    this.#entries.delete(endpoint.id);
    if (this.#entries.size >= MAX_ENTRIES) this.#entries.delete(this.#entries.keys().next().value!);
    this.#entries.set(endpoint.id, entry);
    return fetching;
  }

  async #fetch(endpoint: Endpoint, auth: OAuth2Auth): Promise<{ token: string; refreshAt: number } | { failure: Outcome }> {
    this.#fetches++;
    let clientSecret: string;
    try {
      clientSecret = this.#open(auth.clientSecret, endpoint.id);
    } catch (error) {
      return failure(auth, `the client secret cannot be opened: ${messageOf(error)}`);
    }
    const form = new URLSearchParams({ grant_type: 'client_credentials' });
    if (auth.scope !== undefined) form.set('scope', auth.scope);
    if (auth.audience !== undefined) form.set('audience', auth.audience);
    const basic = Buffer.from(`${formEncoded(auth.clientId)}:${formEncoded(clientSecret)}`, 'utf8').toString('base64');
    const { outcome } = await this.#send({
      url: auth.tokenUrl,
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json', authorization: `Basic ${basic}` },
      body: form.toString(),
      timeoutMs: endpoint.timeoutMs,
    });
    return this.#tokenOf(auth, outcome);
  }

  #tokenOf(auth: OAuth2Auth, outcome: Outcome): { token: string; refreshAt: number } | { failure: Outcome } {
    switch (outcome.kind) {
      case 'blocked':
      // The egress proxy's own failure stays one: it does not count against the endpoint.
      case 'proxy':
        return { failure: { ...outcome, message: `token endpoint ${auth.tokenUrl}: ${outcome.message}` } };
      case 'timeout':
        return failure(auth, `timeout after ${outcome.timeoutMs} ms`);
      case 'network':
        return failure(auth, `${outcome.code}: ${outcome.message}`);
      case 'response':
        break;
    }
    if (outcome.status < 200 || outcome.status > 299) {
      return failure(auth, `HTTP ${outcome.status}${outcome.body === '' ? '' : ` ${JSON.stringify(outcome.body.slice(0, QUOTED_BODY_CHARS))}`}`);
    }
    let body: unknown;
    try {
      body = JSON.parse(outcome.body);
    } catch {
      return failure(auth, `HTTP ${outcome.status} with a body that is not JSON (or is cut off)`);
    }
    const fields = (body ?? {}) as { access_token?: unknown; token_type?: unknown; expires_in?: unknown };
    if (typeof fields.access_token !== 'string' || fields.access_token === '' || /[^\x21-\x7e]/.test(fields.access_token)) {
      return failure(auth, `HTTP ${outcome.status} without a usable access_token`);
    }
    if (fields.token_type !== undefined && (typeof fields.token_type !== 'string' || fields.token_type.toLowerCase() !== 'bearer')) {
      return failure(auth, `token_type ${JSON.stringify(fields.token_type)} is not supported (only Bearer)`);
    }
    const expiresInSec = Number(fields.expires_in);
    const lifetimeMs =
      fields.expires_in === undefined || !Number.isFinite(expiresInSec) || expiresInSec <= 0
        ? DEFAULT_TOKEN_LIFETIME_MS
        : Math.min(expiresInSec * SECOND, MAX_TOKEN_LIFETIME_MS);
    const refreshAt = this.#clock.now() + lifetimeMs - Math.min(REFRESH_MARGIN_MS, lifetimeMs / 2);
    return { token: fields.access_token, refreshAt };
  }
}

function failure(auth: OAuth2Auth, why: string): { failure: Outcome } {
  return { failure: { kind: 'network', code: OAUTH_TOKEN_CODE, message: `token endpoint ${auth.tokenUrl}: ${why}` } };
}

/** What makes one configuration's tokens: a change to any of it fetches a new one. */
function keyOf(auth: OAuth2Auth): string {
  return JSON.stringify([auth.tokenUrl, auth.clientId, auth.clientSecret, auth.scope ?? null, auth.audience ?? null]);
}

/** `application/x-www-form-urlencoded` of one value (RFC 6749 Appendix B). */
function formEncoded(value: string): string {
  return new URLSearchParams([['', value]]).toString().slice(1);
}
