/**
 * Failures grouped by endpoint and failure kind (`GET /v1/failures`) and a
 * group's replay (`POST /v1/failures/replay`). A tenant token may use both on
 * its own endpoints.
 */
import type { Herald } from '../../herald.ts';
import { Owned } from '../../tenants/caller-scope.ts';
import { failureGroupFilter } from '../query.ts';
import type { Router } from '../router.ts';
import { TENANT_LISTING } from './tenant-rules.ts';

export function failureRoutes(router: Router, h: Pick<Herald, 'failureGroups' | 'replayFailureGroup'>): void {
  router.route('GET', '/v1/failures', async ({ query }) => ({ status: 200, json: { data: await h.failureGroups(failureGroupFilter(query)) } }), TENANT_LISTING);
  router.route('POST', '/v1/failures/replay', async ({ body }) => ({ status: 202, json: await h.replayFailureGroup(await body()) }), {
    tenant: { body: { endpointId: Owned.ENDPOINT } },
  });
}
