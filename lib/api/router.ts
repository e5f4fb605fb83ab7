/**
 * The route table of the status port: each route's method, its path (`:name`
 * for a parameter), who may call it and the handler that answers it. The
 * resource modules under `routes/` declare their routes here; the server
 * (`status-server.ts`) finds the one a request names, checks the caller and
 * calls it.
 */
import { ValidationError } from '../errors.ts';
import type { Caller, RouteAccess } from '../tenants/caller-scope.ts';
import type { StaticAsset } from './chart-assets.ts';

export type Params = Readonly<Record<string, string>>;

/** What a handler is given of a request. */
export interface HandlerRequest {
  /** The admin, or a tenant whose access the route's rule has already checked. */
  readonly caller: Caller;
  readonly params: Params;
  readonly query: URLSearchParams;
  /** The body, parsed as JSON. */
  readonly body: () => Promise<unknown>;
  /** The body parsed as JSON, or undefined when there is none. */
  readonly optionalBody: () => Promise<unknown>;
  /** The body as text, exactly as sent (UTF-8 decoded). */
  readonly text: () => Promise<string>;
}

/** A handler's answer; the server writes it (JSON unless another kind of body is given). */
export interface Reply {
  readonly status: number;
  readonly json?: unknown;
  readonly html?: string;
  readonly text?: { readonly body: string; readonly contentType: string };
  /** A static file: cached by browsers, answered 304 when the request's `If-None-Match` has its ETag. */
  readonly asset?: StaticAsset;
}

export type Handler = (request: HandlerRequest) => Promise<Reply>;

export interface Route {
  readonly method: string;
  /** `:name` for a parameter, e.g. `/v1/endpoints/:id`. */
  readonly path: string;
  /** Who may call it (`tenants/caller-scope.ts`). */
  readonly access: RouteAccess;
  readonly handler: Handler;
}

/** The route a request names, with its path parameters as sent (still percent-encoded). */
export interface RouteMatch {
  readonly route: Route;
  /** The names of the path's parameters, in order. */
  readonly keys: readonly string[];
  readonly encodedParams: readonly string[];
}

interface CompiledRoute extends Route {
  readonly pattern: RegExp;
  readonly keys: readonly string[];
}

export class Router {
  readonly #routes: CompiledRoute[] = [];

  /** Declares a route; without `access` it is the admin token's only (a tenant token gets 403). */
  route(method: string, path: string, handler: Handler, access: RouteAccess = 'admin'): void {
    const keys: string[] = [];
    const pattern = new RegExp(
      `^${path.replace(/:([a-zA-Z]+)/g, (_, key: string) => {
        keys.push(key);
        return '([^/]+)';
      })}$`,
    );
    this.#routes.push({ method, path, access, handler, pattern, keys });
  }

  /** Every route, in the order declared. */
  get routes(): readonly Route[] {
    return this.#routes;
  }

  /**
   * The first route declared for this method and path; `'method not allowed'` when routes
   * have the path but none the method; undefined when none has the path.
   */
  match(method: string, pathname: string): RouteMatch | 'method not allowed' | undefined {
    let pathMatched = false;
    for (const route of this.#routes) {
      const match = route.pattern.exec(pathname);
      if (match === null) continue;
      pathMatched = true;
      if (route.method !== method) continue;
      return { route, keys: route.keys, encodedParams: match.slice(1).map((value) => value ?? '') };
    }
    return pathMatched ? 'method not allowed' : undefined;
  }
}

/**
 * A match's path parameters by name, percent-decoded (apart from matching, so that the server
 * checks the caller first).
 * @throws ValidationError (`HERALD_INVALID_INPUT`, the parameter's name) for malformed percent-encoding.
 */
export function paramsOf(match: RouteMatch): Params {
  const params: Record<string, string> = {};
  match.keys.forEach((key, i) => {
    params[key] = decodePathParam(key, match.encodedParams[i] ?? '');
  });
  return params;
}

function decodePathParam(key: string, text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw new ValidationError(key, `must be valid percent-encoding (got ${JSON.stringify(text)})`);
  }
}
