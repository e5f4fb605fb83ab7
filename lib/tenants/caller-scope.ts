/**
 * Who calls the admin API, and what they may do: the one place that decides it.
 *
 * The admin token may use every route. A tenant token (lib/tenants/tenant-tokens.ts) may use a
 * route only when the route's declaration carries a {@link TenantRule}, and then only on its own
 * tenant's data:
 *
 * - an id in the path, the query or the body that names another tenant's endpoint, delivery or
 *   dead letter answers 404 `HERALD_NOT_FOUND`, word for word what an unknown id answers, so a
 *   tenant cannot even learn that it exists; nothing runs;
 * - a listing is filtered to the caller's tenant (naming another `tenantId` answers 404, as an
 *   unknown tenant would);
 * - a route declared without a rule is the admin's only: 403 `HERALD_FORBIDDEN`. Forgetting the
 *   rule on a new route fails closed.
 *
 * Making a new route tenant-scoped is one argument on its declaration, e.g.
 * `{ tenant: { params: { id: Owned.ENDPOINT } } }` or `{ tenant: { listsTenant: true } }`.
 */
import { ForbiddenError, NotFoundError, ValidationError } from '../errors.ts';

export type Caller =
  | { readonly kind: 'admin' }
  | { readonly kind: 'tenant'; readonly tenantId: string; readonly tokenId: string };

export const ADMIN: Caller = Object.freeze({ kind: 'admin' });

/** The kinds of thing an id can name, each owned by one tenant. */
export const Owned = {
  ENDPOINT: 'endpoint',
  DELIVERY: 'delivery',
  DEAD_LETTER: 'dead letter',
} as const;
export type Owned = (typeof Owned)[keyof typeof Owned];

/** The input field an unknown id of each kind is reported under (as the engine reports it). */
const FIELD_OF: Readonly<Record<Owned, string>> = {
  [Owned.ENDPOINT]: 'endpointId',
  [Owned.DELIVERY]: 'deliveryId',
  [Owned.DEAD_LETTER]: 'deadLetterId',
};

/** How a tenant token may use a route: the ids to check and whether the route lists per tenant. */
export interface TenantRule {
  /** Path parameters that name something the caller's tenant must own, e.g. `{ id: Owned.ENDPOINT }`. */
  readonly params?: Readonly<Record<string, Owned>>;
  /** Query parameters that do, checked when given, e.g. `{ endpointId: Owned.ENDPOINT }`. */
  readonly query?: Readonly<Record<string, Owned>>;
  /** Fields of a JSON object body that do, checked when given. */
  readonly body?: Readonly<Record<string, Owned>>;
  /** The route lists things: its `tenantId` query filter becomes the caller's tenant. */
  readonly listsTenant?: boolean;
}

/** Who may call a route: anyone (`open`), the admin token only (`admin`), or a tenant token too, under a rule. */
export type RouteAccess = 'open' | 'admin' | { readonly tenant: TenantRule };

/** What the check needs of a request. */
export interface ScopedRequest {
  readonly route: string;
  readonly params: Readonly<Record<string, string>>;
  /** Changed in place for a listing: `tenantId` set to the caller's. */
  readonly query: URLSearchParams;
  readonly body: () => Promise<unknown>;
}

/** The tenant that owns the thing `id` names, or undefined when there is no such thing. */
export type OwnerOf = (kind: Owned, id: string) => Promise<string | undefined>;

/**
 * Lets the call through, or throws: 403 for a route a tenant may not use, 404 for an id of
 * another tenant's. A listing's query is narrowed to the caller's tenant.
 * @throws ForbiddenError, NotFoundError
 */
export async function authorizeCall(caller: Caller, access: RouteAccess, request: ScopedRequest, ownerOf: OwnerOf): Promise<void> {
  if (caller.kind === 'admin' || access === 'open') return;
  if (access === 'admin') throw new ForbiddenError(request.route);
  const rule = access.tenant;
  const mustOwn = async (kind: Owned, id: string): Promise<void> => {
    if ((await ownerOf(kind, id)) !== caller.tenantId) throw new NotFoundError(kind, id, FIELD_OF[kind]);
  };
  for (const [key, kind] of Object.entries(rule.params ?? {})) await mustOwn(kind, request.params[key] ?? '');
  for (const [key, kind] of Object.entries(rule.query ?? {})) {
    const id = request.query.get(key);
    if (id !== null && id !== '') await mustOwn(kind, id);
  }
  if (rule.body !== undefined) {
    const body = await request.body();
    if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
      for (const [key, kind] of Object.entries(rule.body)) {
        const id = (body as Record<string, unknown>)[key];
        if (typeof id === 'string') await mustOwn(kind, id);
      }
    }
  }
  if (rule.listsTenant === true) {
    const named = request.query.get('tenantId');
    if (named !== null && named !== '' && named !== caller.tenantId) throw new NotFoundError('tenant', named, 'tenantId');
    request.query.set('tenantId', caller.tenantId);
  }
}

/**
 * A new endpoint's body as a tenant may send it: `tenantId` is the token's (left out, it is
 * filled in; another one is refused) and `id` is Herald's to choose (a chosen id could collide
 * with another tenant's endpoint and so tell that it exists). The admin's body passes as it is.
 * @throws ValidationError naming `tenantId` or `id`.
 */
export function newEndpointBody(caller: Caller, body: unknown): unknown {
  if (caller.kind === 'admin' || body === null || typeof body !== 'object' || Array.isArray(body)) return body;
  const fields = body as Record<string, unknown>;
  if (fields.id !== undefined) throw new ValidationError('id', 'is chosen by Herald when a tenant token creates an endpoint; leave it out');
  if (fields.tenantId !== undefined && fields.tenantId !== caller.tenantId) {
    throw new ValidationError('tenantId', `must be the token's tenant ${JSON.stringify(caller.tenantId)}, or be left out`);
  }
  return { ...fields, tenantId: caller.tenantId };
}
