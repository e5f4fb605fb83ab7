/**
 * The tenant rules the resource routes share (see `tenants/caller-scope.ts`):
 * a route carrying one may be called with a tenant token, on its own
 * tenant's data; a route without one is the admin's only.
 */
import { Owned } from '../../tenants/caller-scope.ts';

/** The path's `:id` names an endpoint the caller's tenant must own. */
export const OWN_ENDPOINT = { tenant: { params: { id: Owned.ENDPOINT } } } as const;
/** The path's `:id` names a delivery the caller's tenant must own. */
export const OWN_DELIVERY = { tenant: { params: { id: Owned.DELIVERY } } } as const;
/** The path's `:id` names a dead letter the caller's tenant must own. */
export const OWN_DEAD_LETTER = { tenant: { params: { id: Owned.DEAD_LETTER } } } as const;
/** A listing, narrowed to the caller's tenant; an `endpointId` filter must name one of its endpoints. */
export const TENANT_LISTING = { tenant: { listsTenant: true, query: { endpointId: Owned.ENDPOINT } } } as const;
