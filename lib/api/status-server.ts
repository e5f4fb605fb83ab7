/**
 * The status port: health, readiness, Prometheus metrics, the admin API, the
 * dashboard and the tenants' portal.
 *
 * `/healthz`, `/readyz`, `/metrics`, the dashboard and the portal pages and
 * their chart library (`/assets/…`) are open (a page asks for a token and
 * calls the API with it); everything under `/v1/` needs
 * `Authorization: Bearer <token>` (the scheme in any case, RFC 9110 §11.1):
 * the admin token, or a tenant token, which may use only the routes declared
 * with a tenant rule, on its own tenant's data (`caller-scope.ts`). A request
 * body is UTF-8 JSON of at most `api.maxRequestBytes`.
 * Errors are JSON `{ "error": { "code", "message", "field"?, "rule"? } }`
 * with a 4xx for bad input, naming the field and the rule it broke.
 *
 *   stopped ──listen()──► listening ──close()──► stopped
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ISO_TIME_RULE, parseDate, systemClock, type Clock } from '../clock.ts';
import {
  ErrorCode,
  NotFoundError,
  PayloadTooLargeError,
  UnauthorizedError,
  ValidationError,
  isHeraldError,
} from '../errors.ts';
import type { Herald } from '../herald.ts';
import type { FailureGroupFilter } from '../store/failure-groups.ts';
import { isTriageState, TRIAGE_STATES } from '../store/triage.ts';
import { sequencePageRequest } from '../endpoints/sequence-page.ts';
import { DeliveryStatus, TriageState } from '../model.ts';
import { parseEventsBody } from '../producer/json-text.ts';
import type { DeadLetterFilter, DeliveryFilter } from '../store/port.ts';
import { looksLikeTenantToken } from '../tenants/tenant-tokens.ts';
import { ADMIN, authorizeCall, newEndpointBody, Owned, type Caller, type OwnerOf, type RouteAccess } from '../tenants/caller-scope.ts';
import { ASSET_CACHE_CONTROL, chartAsset, chartAssetPaths, type StaticAsset } from './chart-assets.ts';
import { dashboardHtml } from './dashboard.ts';
import { seriesRequestOf } from '../status/delivery-series.ts';
import { decodeCursor, encodeCursor } from './delivery-cursor.ts';
import { EndpointStats } from '../status/endpoint-stats.ts';
import { HeraldMetrics } from '../status/metrics.ts';
import { portalHtml } from './portal.ts';

export interface StatusServerOptions {
  readonly host: string;
  readonly port: number;
  readonly adminToken: string;
  /** Times this node's recent failure rates (`/v1/status`'s `recent`), and how long a refused body is read. @default the system clock */
  readonly clock?: Clock;
  /** Metrics to serve on `/metrics`; by default the server makes its own registry (and closes it with the server). */
  readonly metrics?: HeraldMetrics;
}

/** Dead letters replayed by id in one bulk request, at most. */
const MAX_REPLAY_IDS = 1_000;

type Params = Readonly<Record<string, string>>;
type Handler = (request: {
  /** The admin, or a tenant whose access the route's rule has already checked. */
  caller: Caller;
  params: Params;
  query: URLSearchParams;
  /** The body, parsed as JSON. */
  body: () => Promise<unknown>;
  /** The body parsed as JSON, or undefined when there is none. */
  optionalBody: () => Promise<unknown>;
  /** The body as text, exactly as sent (UTF-8 decoded). */
  text: () => Promise<string>;
}) => Promise<Reply>;
interface Reply {
  readonly status: number;
  readonly json?: unknown;
  readonly html?: string;
  readonly text?: { readonly body: string; readonly contentType: string };
  /** A static file: cached by browsers, answered 304 when the request's `If-None-Match` has its ETag. */
  readonly asset?: StaticAsset;
}

/** How long the rest of a refused request body is read (and dropped) before the connection is closed. */
const LINGER_MS = 10_000;

/** Deliveries per page of the delivery log when `limit` is not given. */
const DEFAULT_PAGE = 100;

/** An `Authorization` header with the Bearer scheme (any case) and its token (RFC 9110 §11.1, RFC 6750 §2.1). */
const BEARER = /^bearer +(.+)$/i;

const STATUS_OF_CODE: Readonly<Record<string, number>> = {
  [ErrorCode.INVALID_INPUT]: 400,
  [ErrorCode.PAYLOAD_TOO_LARGE]: 413,
  [ErrorCode.NOT_FOUND]: 404,
  [ErrorCode.CONFLICT]: 409,
  [ErrorCode.UNAUTHORIZED]: 401,
  [ErrorCode.FORBIDDEN]: 403,
  [ErrorCode.STORE]: 503,
};

export class StatusServer {
  readonly #herald: Herald;
  readonly #options: StatusServerOptions;
  /** SHA-256 of the admin token: a given token is hashed too and compared in constant time, so neither its bytes nor its length show in the timing. */
  readonly #tokenDigest: Buffer;
  readonly #metrics: HeraldMetrics;
  readonly #ownsMetrics: boolean;
  readonly #stats: EndpointStats;
  readonly #routes: Array<{ method: string; path: string; pattern: RegExp; keys: string[]; access: RouteAccess; handler: Handler }> = [];
  #server: Server | undefined;

  constructor(herald: Herald, options: StatusServerOptions) {
    this.#herald = herald;
    this.#options = options;
    this.#tokenDigest = sha256(options.adminToken);
    this.#ownsMetrics = options.metrics === undefined;
    this.#metrics = options.metrics ?? new HeraldMetrics(herald);
    this.#stats = new EndpointStats(herald.events, options.clock ?? systemClock);
    this.#defineRoutes();
  }

  /** Starts listening; resolves with the URL it listens on. */
  async listen(): Promise<string> {
    const server = createServer((req, res) => void this.#handle(req, res));
    server.keepAliveTimeout = 5_000;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.#options.port, this.#options.host, () => resolve());
    });
    this.#server = server;
    const address = server.address() as AddressInfo;
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
    return `http://${host}:${address.port}`;
  }

  /** The metrics this server serves (its own registry unless given one). */
  get metrics(): HeraldMetrics {
    return this.#metrics;
  }

  async close(): Promise<void> {
    this.#stats.close();
    if (this.#ownsMetrics) this.#metrics.close();
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Every route: its method, its path (`:name` for a parameter) and who may call it. */
  get routes(): ReadonlyArray<{ readonly method: string; readonly path: string; readonly access: RouteAccess }> {
    return this.#routes.map(({ method, path, access }) => ({ method, path, access }));
  }

  /** Declares a route; without `access` it is the admin token's only (a tenant token gets 403). */
  #route(method: string, path: string, handler: Handler, access: RouteAccess = 'admin'): void {
    const keys: string[] = [];
    const pattern = new RegExp(
      `^${path.replace(/:([a-zA-Z]+)/g, (_, key: string) => {
        keys.push(key);
        return '([^/]+)';
      })}$`,
    );
    this.#routes.push({ method, path, pattern, keys, access, handler });
  }

  #defineRoutes(): void {
    const h = this.#herald;
    this.#route('GET', '/healthz', async () => ({ status: 200, json: { status: 'ok' } }), 'open');
    this.#route('GET', '/readyz', async () => {
      // Before the probe read: a store can answer reads while its writes wait or fail.
      const availability = h.storeAvailability;
      if (!availability.available) {
        return { status: 503, json: { status: 'not ready', reason: `store unavailable: ${availability.reason}` } };
      }
      try {
        await h.store.countDeliveries();
      } catch (error) {
        return { status: 503, json: { status: 'not ready', reason: `store unreachable: ${(error as Error).message}` } };
      }
      if (h.leases.length === 0) return { status: 503, json: { status: 'not ready', reason: 'no slot lease held' } };
      return { status: 200, json: { status: 'ready', slotsOwned: h.leases.length } };
    }, 'open');
    this.#route('GET', '/', async () => ({ status: 200, html: dashboardHtml() }), 'open');
    this.#route('GET', '/portal', async () => ({ status: 200, html: portalHtml() }), 'open');
    for (const path of chartAssetPaths()) this.#route('GET', path, async () => ({ status: 200, asset: chartAsset(path) }), 'open');
    this.#route('GET', '/metrics', async () => ({
      status: 200,
      text: { body: await this.#metrics.render(), contentType: this.#metrics.contentType },
    }), 'open');

    this.#route('GET', '/v1/status', async () => ({
      status: 200,
      // `recent`: this node's attempts only (the cluster's are GET /v1/stats).
      json: { ...(await h.status()), recent: { scope: 'node', windowMs: this.#stats.windowMs, endpoints: this.#stats.snapshot() } },
    }));

    // Tenant tokens: the admin's only. The token is in the answer once and never again.
    this.#route('POST', '/v1/tenants/:tenantId/tokens', async ({ params, optionalBody }) => {
      const issued = await h.tenantTokens.issue(params.tenantId ?? '', await optionalBody());
      return { status: 201, json: { ...issued.record, token: issued.token } };
    });
    this.#route('GET', '/v1/tenants/:tenantId/tokens', async ({ params }) => ({
      status: 200,
      json: { data: await h.tenantTokens.list(params.tenantId ?? '') },
    }));
    this.#route('DELETE', '/v1/tenants/:tenantId/tokens/:id', async ({ params }) => {
      await h.tenantTokens.revoke(params.tenantId ?? '', params.id ?? '');
      return { status: 204 };
    });

    // A tenant may use the routes below that carry a tenant rule (caller-scope.ts), on its own data.
    const ownEndpoint = { tenant: { params: { id: Owned.ENDPOINT } } } as const;
    const ownDelivery = { tenant: { params: { id: Owned.DELIVERY } } } as const;
    const ownDeadLetter = { tenant: { params: { id: Owned.DEAD_LETTER } } } as const;
    const tenantListing = { tenant: { listsTenant: true, query: { endpointId: Owned.ENDPOINT } } } as const;

    this.#route('POST', '/v1/endpoints', async ({ caller, body }) => {
      const created = await h.createEndpoint(newEndpointBody(caller, await body()));
      return { status: 201, json: { ...created.endpoint, secret: created.secret } };
    }, { tenant: {} });
    this.#route('GET', '/v1/endpoints', async ({ query }) => {
      const tenantId = query.get('tenantId') ?? undefined;
      return { status: 200, json: { data: await h.listEndpoints(tenantId === undefined ? {} : { tenantId }) } };
    }, tenantListing);
    this.#route('GET', '/v1/endpoints/:id', async ({ params }) => ({ status: 200, json: await h.getEndpoint(params.id ?? '') }), ownEndpoint);
    this.#route('PATCH', '/v1/endpoints/:id', async ({ params, body }) => ({
      status: 200,
      json: await h.updateEndpoint(params.id ?? '', await body()),
    }), ownEndpoint);
    this.#route('DELETE', '/v1/endpoints/:id', async ({ params }) => {
      await h.deleteEndpoint(params.id ?? '');
      return { status: 204 };
    }, ownEndpoint);
    this.#route('POST', '/v1/endpoints/:id/enable', async ({ params }) => ({ status: 200, json: await h.enableEndpoint(params.id ?? '') }), ownEndpoint);
    this.#route('POST', '/v1/endpoints/:id/disable', async ({ params }) => ({ status: 200, json: await h.disableEndpoint(params.id ?? '') }), ownEndpoint);
    this.#route('POST', '/v1/endpoints/:id/rotate-secret', async ({ params }) => {
      const rotated = await h.rotateSecret(params.id ?? '');
      return { status: 200, json: { ...rotated.endpoint, secret: rotated.secret } };
    }, ownEndpoint);
    // Gap detection: the endpoint's deliveries numbered after `after` (webhook-sequence), in order.
    this.#route('GET', '/v1/endpoints/:id/events', async ({ params, query }) => ({
      status: 200,
      json: await h.listEndpointEvents(params.id ?? '', sequencePageRequest(query.get('after'), query.get('limit'))),
    }), ownEndpoint);
    this.#route('POST', '/v1/endpoints/:id/test', async ({ params }) => {
      const sent = await h.sendTestEvent(params.id ?? '');
      return { status: 202, json: { ...sent.event, payload: JSON.parse(sent.event.payload) as unknown, deliveryId: sent.deliveryId } };
    }, ownEndpoint);

    // Each endpoint's attempts and failure rate over the last hour on every node (the cluster's,
    // from the stored delivery minutes: cluster-stats.ts), within the tenant the query names (a
    // tenant token's own, always) or, for the admin without one, every endpoint.
    this.#route('GET', '/v1/stats', async ({ query }) => {
      const tenantId = query.get('tenantId');
      return { status: 200, json: await h.deliveryStats(tenantId === null || tenantId === '' ? { kind: 'all' } : { kind: 'tenant', tenantId }) };
    }, { tenant: { listsTenant: true } });

    // The delivery charts: one endpoint's series or every endpoint's (`all`), within the tenant the
    // query names (a tenant token's own, always) or, for the admin without one, every endpoint.
    // An endpoint outside that scope answers 404 like an unknown one (Herald.deliverySeries).
    this.#route('GET', '/v1/stats/series', async ({ query }) => {
      const tenantId = query.get('tenantId');
      const within = tenantId === null || tenantId === '' ? ({ kind: 'all' } as const) : ({ kind: 'tenant', tenantId } as const);
      return { status: 200, json: await h.deliverySeries(seriesRequestOf(query), within) };
    }, { tenant: { listsTenant: true } });

    this.#route('POST', '/v1/events', async ({ text }) => {
      // Each payload is kept as the text the producer sent, so it is stored, signed and delivered byte for byte.
      const input = parseEventsBody(await text());
      const events = await h.publish(input);
      const view = events.map((e) => ({ ...e, payload: JSON.parse(e.payload) as unknown }));
      return { status: 202, json: Array.isArray(input) ? { data: view } : view[0] };
    });

    this.#route('GET', '/v1/deliveries', async ({ query }) => {
      const filter = deliveryFilter(query);
      const limit = filter.limit ?? DEFAULT_PAGE;
      return { status: 200, json: pageOf(await h.listDeliveries({ ...filter, limit: lookAhead(limit) }), limit) };
    }, tenantListing);
    this.#route('GET', '/v1/deliveries/:id', async ({ params }) => {
      const { payload, ...delivery } = await h.getDeliveryWithPayload(params.id ?? '');
      return { status: 200, json: { ...delivery, payload: payload === null ? null : (JSON.parse(payload) as unknown) } };
    }, ownDelivery);
    this.#route('GET', '/v1/deliveries/:id/attempts', async ({ params }) => ({
      status: 200,
      json: { data: await h.listAttempts(params.id ?? '') },
    }), ownDelivery);

    // Paged like the delivery log: `cursor` is the previous page's `nextCursor`.
    this.#route('GET', '/v1/dead-letters', async ({ query }) => {
      const filter = deadLetterFilter(query);
      const limit = filter.limit ?? DEFAULT_PAGE;
      return { status: 200, json: pageOf(await h.listDeadLetters({ ...filter, limit: lookAhead(limit) }), limit) };
    }, tenantListing);
    this.#route('GET', '/v1/dead-letters/:id', async ({ params }) => ({ status: 200, json: await h.getDeadLetter(params.id ?? '') }), ownDeadLetter);
    this.#route('POST', '/v1/dead-letters/replay', async ({ body }) => {
      const input = await body();
      const ids = replayIds(input);
      if (ids === undefined) {
        const { dryRun, filter, chunkSize } = replayRequest(input);
        if (chunkSize !== undefined) throw new ValidationError('chunkSize', 'belongs to POST /v1/replays (a paced replay job)');
        if (dryRun) return { status: 200, json: { dryRun: true, wouldReplay: await h.countReplayableDeadLetters(filter) } };
        const replayed = await h.replayDeadLetters(filter);
        return { status: 202, json: { replayed: replayed.length, ids: replayed, skipped: [] } };
      }
      // By id: each one replayed on its own; one already replayed or unknown is skipped, not fatal.
      const replayed: string[] = [];
      const skipped: string[] = [];
      for (const id of ids) {
        try {
          await h.replayDeadLetter(id);
          replayed.push(id);
        } catch (error) {
          if (!isHeraldError(error) || (error.code !== ErrorCode.CONFLICT && error.code !== ErrorCode.NOT_FOUND)) throw error;
          skipped.push(id);
        }
      }
      return { status: 202, json: { replayed: replayed.length, ids: replayed, skipped } };
    });
    this.#route('POST', '/v1/dead-letters/:id/replay', async ({ params }) => {
      await h.replayDeadLetter(params.id ?? '');
      return { status: 202, json: { replayed: 1, ids: [params.id] } };
    }, ownDeadLetter);
    // Paced bulk replays (lib/dead-letters/replay-jobs.ts): a dry run counts, otherwise a job starts.
    this.#route('POST', '/v1/replays', async ({ body }) => {
      const { dryRun, filter, chunkSize } = replayRequest(await body());
      if (dryRun) return { status: 200, json: { dryRun: true, wouldReplay: await h.countReplayableDeadLetters(filter) } };
      return { status: 202, json: await h.startReplay(filter, chunkSize === undefined ? {} : { chunkSize }) };
    });
    this.#route('GET', '/v1/replays', async () => ({ status: 200, json: { data: await h.listReplays() } }));
    this.#route('GET', '/v1/replays/:id', async ({ params }) => ({ status: 200, json: await h.getReplay(params.id ?? '') }));
    this.#route('DELETE', '/v1/replays/:id', async ({ params }) => ({ status: 200, json: await h.cancelReplay(params.id ?? '') }));
    // Failures grouped by endpoint and failure kind, and a group's replay.
    this.#route('GET', '/v1/failures', async ({ query }) => ({ status: 200, json: { data: await h.failureGroups(failureGroupFilter(query)) } }), tenantListing);
    this.#route('POST', '/v1/failures/replay', async ({ body }) => ({ status: 202, json: await h.replayFailureGroup(await body()) }), {
      tenant: { body: { endpointId: Owned.ENDPOINT } },
    });
    // Triage: acknowledge (looked at, still open) or discard (closed), with {note, by}; one, or {ids} in bulk.
    for (const [action, state] of [['acknowledge', TriageState.ACKNOWLEDGED], ['discard', TriageState.DISCARDED]] as const) {
      this.#route('POST', `/v1/dead-letters/${action}`, async ({ body }) => {
        const outcome = await h.triageDeadLetters(state, await body());
        return { status: 200, json: { state, updated: outcome.applied.length, ids: outcome.applied, skipped: outcome.skipped } };
      });
      this.#route('POST', `/v1/dead-letters/:id/${action}`, async ({ params, body }) => ({
        status: 200,
        json: await h.triageDeadLetter(params.id ?? '', state, await body()),
      }));
    }
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let reply: Reply;
    try {
      reply = await this.#dispatch(req);
    } catch (error) {
      reply = errorReply(error);
    }
    // Answered before the body was read: only a body refused unread (declared too large) is left to drain.
    if (!req.complete && !req.destroyed) this.#lingerOn(req, res);
    if (reply.asset !== undefined) {
      const { body, contentType, etag } = reply.asset;
      const fresh = (req.headers['if-none-match'] ?? '').split(',').some((tag) => tag.trim() === etag);
      res.writeHead(fresh ? 304 : reply.status, { 'content-type': contentType, 'cache-control': ASSET_CACHE_CONTROL, etag });
      res.end(fresh ? undefined : body);
      return;
    }
    if (reply.text !== undefined) {
      res.writeHead(reply.status, { 'content-type': reply.text.contentType, 'cache-control': 'no-store' });
      res.end(reply.text.body);
      return;
    }
    if (reply.html !== undefined) {
      res.writeHead(reply.status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      res.end(reply.html);
      return;
    }
    if (reply.json === undefined) {
      res.writeHead(reply.status);
      res.end();
      return;
    }
    const text = JSON.stringify(reply.json);
    res.writeHead(reply.status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
    res.end(text);
  }

  /**
   * Answering before the body has arrived (a declared oversize body gets its 413 at once): after
   * a client's `Connection: close` Node closes the socket while the client still sends, and the
   * client's stack drops our answer with the reset. So keep the connection and read the rest
   * into nothing (Node does once the answer is sent), for at most `LINGER_MS`, like a web
   * server's lingering close.
   */
  #lingerOn(req: IncomingMessage, res: ServerResponse): void {
    res.shouldKeepAlive = true;
    const timer = (this.#options.clock ?? systemClock).setTimeout(() => req.socket.destroy(), LINGER_MS);
    req.socket.once('close', () => timer.cancel());
    req.once('end', () => timer.cancel());
  }

  async #dispatch(req: IncomingMessage): Promise<Reply> {
    const url = new URL(req.url ?? '/', 'http://status.invalid');
    const method = req.method ?? 'GET';
    // Everything under /v1/ needs a token, so unknown routes and methods there tell nothing to a caller without one.
    let caller = url.pathname.startsWith('/v1/') ? await this.#authenticate(req) : undefined;
    let pathMatched = false;
    for (const route of this.#routes) {
      const match = route.pattern.exec(url.pathname);
      if (match === null) continue;
      pathMatched = true;
      if (route.method !== method) continue;
      if (route.access !== 'open') caller ??= await this.#authenticate(req);
      const params: Record<string, string> = {};
      route.keys.forEach((key, i) => {
        params[key] = decodePathParam(key, match[i + 1] ?? '');
      });
      // Read once: a tenant rule may look into the body before the handler does.
      let read: Promise<string> | undefined;
      const text = (): Promise<string> => (read ??= this.#readText(req));
      const body = async (): Promise<unknown> => parseJson(await text());
      const optionalBody = async (): Promise<unknown> => {
        const declared = req.headers['content-length'];
        const empty = (declared === undefined && req.headers['transfer-encoding'] === undefined) || declared === '0';
        return empty ? undefined : body();
      };
      const query = url.searchParams;
      await authorizeCall(caller ?? ADMIN, route.access, { route: `${method} ${route.path}`, params, query, body }, this.#ownerOf);
      return route.handler({ caller: caller ?? ADMIN, params, query, body, optionalBody, text });
    }
    return pathMatched
      ? { status: 405, json: { error: { code: 'HERALD_METHOD_NOT_ALLOWED', message: `${method} is not allowed on ${url.pathname}` } } }
      : { status: 404, json: { error: { code: ErrorCode.NOT_FOUND, message: `no route ${method} ${url.pathname}` } } };
  }

  /**
   * The admin, or the tenant whose live token this is; else 401. A tenant token is read from the
   * store on every request (no cache), so a revoked one is refused at once on every node.
   */
  async #authenticate(req: IncomingMessage): Promise<Caller> {
    const given = BEARER.exec(req.headers.authorization ?? '')?.[1];
    if (given === undefined) throw new UnauthorizedError();
    if (timingSafeEqual(sha256(given), this.#tokenDigest)) return ADMIN;
    if (!looksLikeTenantToken(given)) throw new UnauthorizedError();
    const token = await this.#herald.tenantTokens.authenticate(given);
    if (token === undefined) throw new UnauthorizedError();
    return { kind: 'tenant', tenantId: token.tenantId, tokenId: token.id };
  }

  /** Which tenant owns what an id names (undefined: nothing by that id). */
  readonly #ownerOf: OwnerOf = async (kind, id) => {
    const store = this.#herald.store;
    switch (kind) {
      case Owned.ENDPOINT:
        return (await store.getEndpoint(id))?.tenantId;
      case Owned.DELIVERY:
        return (await store.getDelivery(id))?.tenantId;
      case Owned.DEAD_LETTER:
        return (await store.getDeadLetter(id))?.tenantId;
    }
  };

  /**
   * The request body as text: at most `api.maxRequestBytes`, valid UTF-8 (so
   * the text holds exactly the bytes sent), not empty.
   */
  async #readText(req: IncomingMessage): Promise<string> {
    const max = this.#herald.config.api.maxRequestBytes;
    const tooLarge = (size: number): PayloadTooLargeError =>
      new PayloadTooLargeError('body', size, max, 'the request body limit is api.maxRequestBytes; split a list of events into several requests');
    // Refuse a declared oversize body at once, with its real size (a streamed one is cut off at the limit).
    const declared = Number(req.headers['content-length']);
    if (Number.isInteger(declared) && declared > max) throw tooLarge(declared);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > max) throw tooLarge(size);
      chunks.push(chunk);
    }
    let text: string;
    try {
      text = UTF8.decode(Buffer.concat(chunks));
    } catch {
      throw new ValidationError('body', 'must be UTF-8 encoded JSON (RFC 8259)');
    }
    if (text.trim() === '') throw new ValidationError('body', 'must be a JSON document (it is empty)');
    return text;
  }

}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ValidationError('body', 'must be valid JSON');
  }
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** Refuses malformed UTF-8 instead of replacing it with U+FFFD; a byte order mark is kept (and is then not JSON, as before). */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function errorReply(error: unknown): Reply {
  if (isHeraldError(error)) {
    const status = STATUS_OF_CODE[error.code] ?? 500;
    const detail: Record<string, unknown> = { code: error.code, message: error.message };
    if (error instanceof ValidationError) {
      detail.field = error.field;
      detail.rule = error.rule;
    } else if (error instanceof NotFoundError) {
      detail.field = error.field;
      detail.rule = `must name an existing ${error.resource}`;
    }
    return { status, json: { error: detail } };
  }
  return { status: 500, json: { error: { code: 'HERALD_INTERNAL', message: (error as Error)?.message ?? String(error) } } };
}

function decodePathParam(key: string, text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new ValidationError(key, `must be valid percent-encoding (got ${JSON.stringify(text)})`);
  }
}

function deliveryFilter(query: URLSearchParams): DeliveryFilter {
  const status = query.get('status');
  const statuses = Object.values(DeliveryStatus) as string[];
  if (status !== null && !statuses.includes(status)) {
    throw new ValidationError('status', `must be one of ${statuses.join(', ')} (got ${JSON.stringify(status)})`);
  }
  const cursor = query.get('cursor');
  return {
    ...optionalString(query, 'endpointId'),
    ...optionalString(query, 'tenantId'),
    ...optionalString(query, 'eventId'),
    ...optionalString(query, 'eventType'),
    ...(status === null ? {} : { status: status as DeliveryStatus }),
    ...timeRange(query),
    ...limitOf(query),
    ...(cursor === null || cursor === '' ? {} : { after: decodeCursor(cursor) }),
  };
}

/** `{ids: [...]}` of a bulk replay by id, or undefined when the body is a filter. */
function replayIds(body: unknown): string[] | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || !Object.hasOwn(body, 'ids')) return undefined;
  const { ids, ...rest } = body as { ids: unknown };
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) throw new ValidationError(extra, 'cannot be combined with ids');
  if (!Array.isArray(ids) || ids.length < 1 || ids.length > MAX_REPLAY_IDS || !ids.every((id) => typeof id === 'string' && id !== '')) {
    throw new ValidationError('ids', `must be a list of 1 to ${MAX_REPLAY_IDS} dead-letter ids`);
  }
  return ids as string[];
}

/** How many rows to ask the store for a page of `limit`: one more tells whether there is a next page (the store caps a query at 1000). */
function lookAhead(limit: number): number {
  return Math.min(limit + 1, 1_000);
}

/** A page of a listing (newest first) read with {@link lookAhead}: its rows and the cursor to the next page, `null` on the last one. */
function pageOf<Row extends { readonly createdAt: number; readonly id: string }>(rows: readonly Row[], limit: number): { data: Row[]; nextCursor: string | null } {
  const data = rows.slice(0, limit);
  const last = data.at(-1);
  const more = rows.length > limit || (limit === 1_000 && rows.length === limit);
  return { data, nextCursor: more && last !== undefined ? encodeCursor(last) : null };
}

function deadLetterFilter(query: URLSearchParams): DeadLetterFilter {
  const includeReplayed = query.get('includeReplayed');
  const cursor = query.get('cursor');
  const state = optionalString(query, 'state').state;
  if (state !== undefined && !isTriageState(state)) {
    throw new ValidationError('state', `must be one of ${TRIAGE_STATES.join(', ')} (got ${JSON.stringify(state)})`);
  }
  return {
    ...(state === undefined ? {} : { state }),
    ...optionalString(query, 'endpointId'),
    ...optionalString(query, 'tenantId'),
    ...timeRange(query),
    ...limitOf(query),
    ...(includeReplayed === null ? {} : { includeReplayed: includeReplayed === 'true' }),
    ...(cursor === null || cursor === '' ? {} : { after: decodeCursor(cursor) }),
  };
}

function failureGroupFilter(query: URLSearchParams): FailureGroupFilter {
  for (const key of query.keys()) {
    if (!['endpointId', 'tenantId', 'limit'].includes(key)) throw new ValidationError(key, 'is not a known filter (allowed: endpointId, tenantId, limit)');
  }
  return { ...optionalString(query, 'endpointId'), ...optionalString(query, 'tenantId'), ...limitOf(query) };
}

/** The body of a bulk replay by filter: `{endpointId?, tenantId?, since?, until?}`, at least one of them. */
/**
 * A bulk replay's body: the filter, `dryRun: true` to count the matches instead of replaying them,
 * and (for a replay job) `chunkSize`, checked by the job.
 */
function replayRequest(body: unknown): { dryRun: boolean; filter: DeadLetterFilter; chunkSize?: number } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return { dryRun: false, filter: replayFilter(body) };
  const { dryRun = false, chunkSize, ...filter } = body as { dryRun?: unknown; chunkSize?: unknown };
  if (typeof dryRun !== 'boolean') throw new ValidationError('dryRun', `must be true or false (got ${JSON.stringify(dryRun)})`);
  if (chunkSize !== undefined && typeof chunkSize !== 'number') throw new ValidationError('chunkSize', `must be a number (got ${JSON.stringify(chunkSize)})`);
  return { dryRun, filter: replayFilter(filter), ...(chunkSize === undefined ? {} : { chunkSize }) };
}

function replayFilter(body: unknown): DeadLetterFilter {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ValidationError('body', 'must be a JSON object');
  const allowed = ['endpointId', 'tenantId', 'since', 'until'];
  const record = body as Record<string, unknown>;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(record)) {
    if (!allowed.includes(key)) throw new ValidationError(key, `is not a known filter (allowed: ${allowed.join(', ')})`);
    if (typeof value !== 'string' && typeof value !== 'number') throw new ValidationError(key, 'must be a string');
    params.set(key, String(value));
  }
  if ([...params.keys()].length === 0) {
    throw new ValidationError('body', 'must name at least one of endpointId, tenantId, since, until (use since=1970-01-01T00:00:00Z to replay everything)');
  }
  return { ...optionalString(params, 'endpointId'), ...optionalString(params, 'tenantId'), ...timeRange(params) };
}

function optionalString(query: URLSearchParams, key: string): Record<string, string> {
  const value = query.get(key);
  return value === null || value === '' ? {} : { [key]: value };
}

/** `since`/`until` as strict ISO-8601 dates or date-times (see `parseDate`) or epoch milliseconds. */
function timeRange(query: URLSearchParams): { since?: number; until?: number } {
  const out: { since?: number; until?: number } = {};
  for (const key of ['since', 'until'] as const) {
    const text = query.get(key);
    if (text === null || text === '') continue;
    const value = /^\d+$/.test(text) ? Number(text) : parseDate(text);
    if (value === undefined) throw new ValidationError(key, `${ISO_TIME_RULE}, or be epoch milliseconds (got ${JSON.stringify(text)})`);
    out[key] = value;
  }
  return out;
}

function limitOf(query: URLSearchParams): { limit?: number } {
  const text = query.get('limit');
  if (text === null) return {};
  const limit = Number(text);
  if (!/^\d+$/.test(text) || limit < 1 || limit > 1000) throw new ValidationError('limit', `must be an integer from 1 to 1000 (got ${JSON.stringify(text)})`);
  return { limit };
}

