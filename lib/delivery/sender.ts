/**
 * The sender: one HTTP POST per attempt, turned into an {@link Outcome}.
 *
 * It never throws for a delivery failure; every way a request can go wrong
 * (timeout, refused, reset, DNS, TLS, a peer that does not speak HTTP, an
 * address the SSRF guard refuses) becomes an outcome for `classify()` to
 * judge. Redirects are never followed
 * (a dispatch does not follow them), at most `responseBodyMaxBytes` of a
 * response are kept, and the rest is discarded without being buffered.
 *
 * Connections are pooled per origin by one undici `Pool` each, with
 * keep-alive; each request is dispatched to its pool with an `Exchange`
 * handler (no stream, promise or AbortSignal per request) and its timeout is
 * an entry in the sender's `Deadlines` (one clock timer for all requests).
 * The SSRF guard sits in the pools' connector, so it judges the address
 * actually connected to (after DNS), not the one a URL seemed to name.
 *
 * With `proxy`, every connection is a CONNECT tunnel through it to an address
 * the guard allowed (lib/delivery/egress-connector.ts); a proxy's own failure
 * is a `proxy` outcome, not the endpoint's. A request with a client
 * certificate goes to a pool of its own, keyed by origin and certificate
 * fingerprint. Without either, a request takes the same pool and dispatch as
 * before they existed.
 *
 * Lifecycle: open from `createSender()` until `close()`; `send()` after
 * `close()` throws `ClosedError`.
 */
import type tls from 'node:tls';
import type * as Undici from 'undici';
import { durationText, type Clock } from '../clock.ts';
import { BlockedAddressError, ClosedError, ConfigError, ErrorCode, hasCode, messageOf, ProxyError } from '../errors.ts';
import type { Outcome } from '../model.ts';
import { createAddressGuard } from './address-guard.ts';
import { secureContextOf, type ClientCertificate } from './client-tls.ts';
import { Deadlines } from './deadlines.ts';
import { directConnector, proxiedConnector, type ProxiedConnector } from './egress-connector.ts';
import { parseProxyUrl, type EgressProxy } from './egress-proxy.ts';
import { Exchange } from './exchange.ts';
import { Pool, undiciErrors } from './undici-parts.ts';

const SECOND = 1_000;
const KIB = 1_024;

export interface SenderOptions {
  /** Drives request timeouts and measures durations. */
  readonly clock: Clock;
  /**
   * CIDRs the SSRF guard lets through despite being private, loopback or
   * link-local, e.g. `['127.0.0.0/8', '::1/128']` for tests and local demos.
   * @default []
   */
  readonly allowNetworks?: readonly string[];
  /**
   * How much of a response body is kept (as UTF-8 text) for the attempt log.
   * @default 4096
   */
  readonly responseBodyMaxBytes?: number;
  /**
   * Keep-alive connections per origin (undici `connections`).
   * @default 16
   */
  readonly connectionsPerOrigin?: number;
  /**
   * The URL of an HTTP proxy every request leaves through in a CONNECT tunnel,
   * `http://[user:password@]host:port`; `null`: straight to the endpoint.
   * @default null
   */
  readonly proxy?: string | null;
  /**
   * Extra CA certificates (PEM) trusted besides Node's built-in roots, for
   * endpoints with certificates from a private CA.
   * @default []
   */
  readonly ca?: readonly string[];
}

export const SENDER_DEFAULTS = Object.freeze({
  allowNetworks: [],
  responseBodyMaxBytes: 4 * KIB,
  connectionsPerOrigin: 16,
  proxy: null,
  ca: [],
}) satisfies Required<Omit<SenderOptions, 'clock'>>;

export interface SendRequest {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** Time allowed for the whole exchange, from connecting to the end of the response. */
  readonly timeoutMs: number;
  /** The endpoint's client certificate for mutual TLS; absent: none. */
  readonly clientTls?: ClientCertificate;
}

export interface SendResult {
  readonly outcome: Outcome;
  /** By the injected clock, from the start of `send()` to its outcome. */
  readonly durationMs: number;
}

export interface Sender {
  /**
   * POSTs `body` to `url`. Resolves with an outcome for every delivery failure.
   * @throws ClosedError (`HERALD_CLOSED`) after `close()`.
   */
  send(request: SendRequest): Promise<SendResult>;
  /** Closes pooled connections, letting requests in flight finish. */
  close(): Promise<void>;
}

export const USER_AGENT = 'Herald-Webhooks/0.1';

/**
 * undici's own connect, headers and body timeouts: only a safety net in case
 * the clock's timer never fires. The real per-request timeout (at most 30 s)
 * is the injected clock's, so it can be tested without waiting.
 */
const SAFETY_NET_TIMEOUT_MS = 120 * SECOND;

/** The most the proxy may take to open a tunnel (connect, CONNECT, its answer), on the clock. */
export const PROXY_TUNNEL_TIMEOUT_MS = 10 * SECOND;

/**
 * After the kept bytes, up to this much more is read and dropped so the
 * connection can be reused; a larger remainder is cheaper to cut off by
 * closing the connection than to download.
 */
const DISCARD_MAX_BYTES = 64 * KIB;

const ALLOWED_PROTOCOLS: ReadonlySet<string> = new Set(['http:', 'https:']);

/** The code of an outcome for a URL that cannot be sent to at all. */
const INVALID_URL_CODE = 'ERR_INVALID_URL';

/**
 * The code of a `network` outcome whose peer answered, but not in HTTP/1.1:
 * a service that is not HTTP (SSH, SMTP, a TLS port spoken to over http:) or
 * a malformed response (a bad status line or header). The parser's own code
 * (`HPE_…`, often missing) and reason are in the message. Retried like other
 * network failures: a port briefly taken by something else is not permanent.
 */
export const PROTOCOL_ERROR_CODE = 'PROTOCOL';

/**
 * The code of a `network` outcome of an endpoint whose client certificate has
 * expired: no request is made with it. Retried, so a certificate replaced in
 * time lets the delivery through.
 */
export const CLIENT_CERT_EXPIRED_CODE = 'CLIENT_CERT_EXPIRED';

/** At most this much of what a non-HTTP peer sent, from where parsing failed, is quoted (JSON-escaped) in the message. */
const PROTOCOL_SAMPLE_CHARS = 32;

type Settings = Required<Omit<SenderOptions, 'proxy'>> & { readonly proxy: EgressProxy | null };

function validateOptions(options: SenderOptions): Settings {
  if (typeof options !== 'object' || options === null) {
    throw new ConfigError('sender', options, 'must be an options object with a clock');
  }
  const { clock } = options;
  if (typeof clock?.now !== 'function' || typeof clock.setTimeout !== 'function') {
    throw new ConfigError('clock', typeof clock, 'must be a Clock with now() and setTimeout()');
  }
  const merged = { ...SENDER_DEFAULTS, ...definedOnly(options), clock };
  if (!Number.isSafeInteger(merged.responseBodyMaxBytes) || merged.responseBodyMaxBytes < 0) {
    throw new ConfigError('responseBodyMaxBytes', merged.responseBodyMaxBytes, 'must be an integer of at least 0');
  }
  if (!Number.isSafeInteger(merged.connectionsPerOrigin) || merged.connectionsPerOrigin < 1) {
    throw new ConfigError('connectionsPerOrigin', merged.connectionsPerOrigin, 'must be an integer of at least 1');
  }
  if (!Array.isArray(merged.ca) || merged.ca.some((pem) => typeof pem !== 'string' || !pem.includes('-----BEGIN CERTIFICATE-----'))) {
    throw new ConfigError('ca', typeof merged.ca, 'must be a list of PEM certificates');
  }
  return { ...merged, proxy: merged.proxy === null ? null : parseProxyUrl(merged.proxy, 'proxy') };
}

function definedOnly<T extends object>(options: T): Partial<T> {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) as Partial<T>;
}

/** Every error reachable from `error` through `cause` and `AggregateError.errors`. */
function* errorChain(error: unknown, depth = 0): Generator<unknown> {
  if (error === undefined || error === null || depth > 8) return;
  yield error;
  if (error instanceof AggregateError) {
    for (const inner of error.errors) yield* errorChain(inner, depth + 1);
  }
  if (error instanceof Error && error.cause !== undefined) yield* errorChain(error.cause, depth + 1);
}

function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && code !== '' ? code : undefined;
}

/**
 * The most telling code in an error chain: a system or TLS code
 * (`ECONNRESET`, `CERT_HAS_EXPIRED`) over undici's wrapper codes
 * (`UND_ERR_SOCKET`), which say less about what happened.
 */
function networkCode(error: unknown): string {
  const codes = [...errorChain(error)].map(codeOf).filter((code) => code !== undefined);
  return codes.find((code) => !code.startsWith('UND_ERR_')) ?? codes[0] ?? 'UNKNOWN';
}

/** The outcome of a response undici's HTTP/1.1 parser could not read (`HTTPParserError`). */
function protocolOutcome(error: Undici.errors.HTTPParserError): Outcome {
  const parserCode = codeOf(error);
  const data: unknown = (error as { data?: unknown }).data;
  const sample = typeof data === 'string' && data !== '' ? `; failing at ${JSON.stringify(data.slice(0, PROTOCOL_SAMPLE_CHARS))}` : '';
  const message = `${parserCode === undefined ? '' : `${parserCode}: `}${messageOf(error) || 'not an HTTP/1.1 response'}${sample}`;
  return { kind: 'network', code: PROTOCOL_ERROR_CODE, message };
}

function failureOutcome(error: unknown): Outcome {
  for (const inner of errorChain(error)) {
    if (inner instanceof ProxyError) return { kind: 'proxy', status: inner.status, message: inner.message };
    if (inner instanceof BlockedAddressError || hasCode(inner, ErrorCode.BLOCKED_ADDRESS)) {
      const blocked = inner as BlockedAddressError;
      return { kind: 'blocked', address: blocked.address, message: blocked.message };
    }
  }
  for (const inner of errorChain(error)) {
    if (inner instanceof undiciErrors.HTTPParserError) return protocolOutcome(inner);
  }
  return { kind: 'network', code: networkCode(error), message: messageOf(error) };
}

function expiredCertificate(client: ClientCertificate): Outcome {
  const message = `the endpoint's client certificate (sha256 ${client.fingerprint}) expired at ${new Date(client.notAfter).toISOString()}: not sent; replace it (clientTls)`;
  return { kind: 'network', code: CLIENT_CERT_EXPIRED_CODE, message };
}

function tunnelTimeout(proxy: EgressProxy, timeoutMs: number): Outcome {
  return { kind: 'proxy', status: null, message: `proxy ${proxy.display}: no tunnel within the request's ${durationText(timeoutMs)}` };
}

function invalidUrl(url: string, why: string): Outcome {
  return { kind: 'network', code: INVALID_URL_CODE, message: `${JSON.stringify(url)}: ${why}` };
}

/**
 * Creates a sender with its own connection pool.
 *
 * @throws ConfigError (`HERALD_INVALID_CONFIG`) naming a bad option.
 */
export function createSender(options: SenderOptions): Sender {
  const settings = validateOptions(options);
  const { clock, proxy } = settings;
  const guard = createAddressGuard(settings.allowNetworks);
  const caContext = secureContextOf(settings.ca);
  /** The connector of every pool without a client certificate, when there is no proxy. */
  const shared = proxy === null ? directConnector(guard, SAFETY_NET_TIMEOUT_MS, caContext) : undefined;
  /** By origin, or by origin and certificate fingerprint for requests with a client certificate. */
  const pools = new Map<string, Pool>();
  /** With a proxy: each pool's connector, by the pool's key. */
  const tunnels = new Map<string, ProxiedConnector>();
  const targets = new Map<string, Target | Outcome>();
  const deadlines = new Deadlines(clock);
  let closed = false;

  /** A pool's connector: the shared one, or its own (a client certificate's TLS context, a proxy's tunnels). */
  const connectorFor = (key: string, client: ClientCertificate | undefined): Undici.buildConnector.connector => {
    if (shared !== undefined && client === undefined) return shared;
    const secureContext: tls.SecureContext | undefined = client === undefined ? caContext : secureContextOf(settings.ca, client);
    if (proxy === null) return directConnector(guard, SAFETY_NET_TIMEOUT_MS, secureContext);
    const proxied = proxiedConnector({ guard, proxy, clock, tunnelTimeoutMs: PROXY_TUNNEL_TIMEOUT_MS, timeoutMs: SAFETY_NET_TIMEOUT_MS, secureContext });
    tunnels.set(key, proxied);
    return proxied.connect;
  };

  const poolFor = (key: string, origin: string, client: ClientCertificate | undefined): Pool => {
    let pool = pools.get(key);
    if (pool === undefined) {
      pool = new Pool(origin, {
        connections: settings.connectionsPerOrigin,
        pipelining: 1,
        headersTimeout: SAFETY_NET_TIMEOUT_MS,
        bodyTimeout: SAFETY_NET_TIMEOUT_MS,
        connect: connectorFor(key, client),
      });
      pools.set(key, pool);
    }
    return pool;
  };

  async function attempt(sendRequest: SendRequest): Promise<Outcome> {
    const target = targetOf(sendRequest.url, targets);
    if ('kind' in target) return target;
    const client = sendRequest.clientTls;
    if (client !== undefined && client.notAfter <= clock.now()) return expiredCertificate(client);
    const key = client === undefined ? target.origin : `${target.origin} ${client.fingerprint}`;
    let pool: Pool;
    try {
      pool = poolFor(key, target.origin, client);
    } catch (error) {
      // The client certificate's TLS context did not load (its key, its passphrase).
      return { kind: 'network', code: networkCode(error), message: `client certificate: ${messageOf(error)}` };
    }

    const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': USER_AGENT };
    for (const [name, value] of Object.entries(sendRequest.headers)) headers[name.toLowerCase()] = value;

    const { timeoutMs } = sendRequest;
    const tunnel = proxy === null ? undefined : tunnels.get(key);
    const exchange = new Exchange({
      keepBytes: settings.responseBodyMaxBytes,
      discardBytes: DISCARD_MAX_BYTES,
      timeoutMs,
      failure: failureOutcome,
      // Timed out before the request was written while the proxy had a tunnel to open: the proxy's delay.
      ...(tunnel === undefined || proxy === null ? {} : { unsent: () => (tunnel.opening > 0 ? tunnelTimeout(proxy, timeoutMs) : undefined) }),
    });
    const deadline = deadlines.add(clock.now() + timeoutMs, () => exchange.expire());
    try {
      pool.dispatch({ path: target.path, method: 'POST', headers, body: sendRequest.body }, exchange);
      return await exchange.outcome;
    } finally {
      deadline.cancel();
    }
  }

  return Object.freeze({
    async send(sendRequest: SendRequest): Promise<SendResult> {
      if (closed) throw new ClosedError('sender');
      const startedAt = clock.now();
      const outcome = await attempt(sendRequest);
      return { outcome, durationMs: clock.now() - startedAt };
    },
    async close(): Promise<void> {
      if (closed) return;
      closed = true;
      await Promise.all([...pools.values()].map((pool) => pool.close()));
      pools.clear();
      deadlines.close();
    },
  });
}

/** Where a URL's requests go: its pool's origin and the request path. */
interface Target {
  readonly origin: string;
  readonly path: string;
}

/** Endpoint URLs parsed once each; past this many, the cache starts over. */
const TARGET_CACHE_MAX = 10_000;

/** The URL's origin and path, or the outcome of a URL that cannot be sent to. */
function targetOf(url: string, cache: Map<string, Target | Outcome>): Target | Outcome {
  let target = cache.get(url);
  if (target !== undefined) return target;
  let parsed: URL | undefined;
  try {
    parsed = new URL(url);
  } catch {
    target = invalidUrl(url, 'not an absolute URL');
  }
  if (parsed !== undefined) {
    target = ALLOWED_PROTOCOLS.has(parsed.protocol)
      ? { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` }
      : invalidUrl(url, `unsupported protocol ${JSON.stringify(parsed.protocol)}`);
  }
  if (cache.size >= TARGET_CACHE_MAX) cache.clear();
  cache.set(url, target!);
  return target!;
}
