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
 * The server listens, authenticates, reads bodies and writes replies; the
 * routes themselves are declared by one module per resource under `routes/`
 * on a {@link Router}.
 *
 *   stopped ──listen()──► listening ──close()──► stopped
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock, type Clock } from '../clock.ts';
import { ErrorCode, NotFoundError, PayloadTooLargeError, UnauthorizedError, ValidationError, isHeraldError } from '../errors.ts';
import type { Herald } from '../herald.ts';
import { EndpointStats } from '../status/endpoint-stats.ts';
import { HeraldMetrics } from '../status/metrics.ts';
import { ADMIN, authorizeCall, Owned, type Caller, type OwnerOf, type RouteAccess } from '../tenants/caller-scope.ts';
import { looksLikeTenantToken } from '../tenants/tenant-tokens.ts';
import { ASSET_CACHE_CONTROL } from './chart-assets.ts';
import { paramsOf, Router, type Reply } from './router.ts';
import { deadLetterRoutes } from './routes/dead-letters.ts';
import { deliveryRoutes } from './routes/deliveries.ts';
import { endpointRoutes } from './routes/endpoints.ts';
import { eventTypeRoutes } from './routes/event-types.ts';
import { eventRoutes } from './routes/events.ts';
import { failureRoutes } from './routes/failures.ts';
import { pageRoutes } from './routes/pages.ts';
import { replayRoutes } from './routes/replays.ts';
import { secretRoutes } from './routes/secrets.ts';
import { statsRoutes } from './routes/stats.ts';
import { statusRoutes } from './routes/status.ts';
import { tenantRoutes } from './routes/tenants.ts';

export interface StatusServerOptions {
  readonly host: string;
  readonly port: number;
  readonly adminToken: string;
  /** Times this node's recent failure rates (`/v1/status`'s `recent`), and how long a refused body is read. @default the system clock */
  readonly clock?: Clock;
  /** Metrics to serve on `/metrics`; by default the server makes its own registry (and closes it with the server). */
  readonly metrics?: HeraldMetrics;
}

/** How long the rest of a refused request body is read (and dropped) before the connection is closed. */
const LINGER_MS = 10_000;

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
  readonly #router = new Router();
  #server: Server | undefined;

  constructor(herald: Herald, options: StatusServerOptions) {
    this.#herald = herald;
    this.#options = options;
    this.#tokenDigest = sha256(options.adminToken);
    this.#ownsMetrics = options.metrics === undefined;
    this.#metrics = options.metrics ?? new HeraldMetrics(herald);
    this.#stats = new EndpointStats(herald.events, options.clock ?? systemClock);
    const router = this.#router;
    statusRoutes(router, { herald, metrics: this.#metrics, stats: this.#stats });
    pageRoutes(router);
    tenantRoutes(router, herald);
    endpointRoutes(router, herald);
    secretRoutes(router, herald);
    statsRoutes(router, herald);
    eventRoutes(router, herald);
    eventTypeRoutes(router, herald);
    deliveryRoutes(router, herald);
    deadLetterRoutes(router, herald);
    replayRoutes(router, herald);
    failureRoutes(router, herald);
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
    return this.#router.routes.map(({ method, path, access }) => ({ method, path, access }));
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
    const socket = req.socket;
    const timer = (this.#options.clock ?? systemClock).setTimeout(() => socket.destroy(), LINGER_MS);
    // The socket outlives the request on a kept-alive connection: its listener goes with the request.
    const done = (): void => {
      timer.cancel();
      socket.off('close', done);
    };
    socket.once('close', done);
    req.once('end', done);
  }

  async #dispatch(req: IncomingMessage): Promise<Reply> {
    const url = new URL(req.url ?? '/', 'http://status.invalid');
    const method = req.method ?? 'GET';
    // Everything under /v1/ needs a token, so unknown routes and methods there tell nothing to a caller without one.
    let caller = url.pathname.startsWith('/v1/') ? await this.#authenticate(req) : undefined;
    const match = this.#router.match(method, url.pathname);
    if (match === undefined) return { status: 404, json: { error: { code: ErrorCode.NOT_FOUND, message: `no route ${method} ${url.pathname}` } } };
    if (match === 'method not allowed') {
      return { status: 405, json: { error: { code: 'HERALD_METHOD_NOT_ALLOWED', message: `${method} is not allowed on ${url.pathname}` } } };
    }
    const { route } = match;
    if (route.access !== 'open') caller ??= await this.#authenticate(req);
    const params = paramsOf(match);
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
