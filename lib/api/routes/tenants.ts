/**
 * A tenant's API tokens (`/v1/tenants/:tenantId/tokens`): issue, list,
 * revoke; the admin's only. An issued token is in the answer once and never
 * again.
 */
import type { Herald } from '../../herald.ts';
import type { Router } from '../router.ts';

export function tenantRoutes(router: Router, h: Pick<Herald, 'tenantTokens'>): void {
  router.route('POST', '/v1/tenants/:tenantId/tokens', async ({ params, optionalBody }) => {
    const issued = await h.tenantTokens.issue(params.tenantId ?? '', await optionalBody());
    return { status: 201, json: { ...issued.record, token: issued.token } };
  });
  router.route('GET', '/v1/tenants/:tenantId/tokens', async ({ params }) => ({
    status: 200,
    json: { data: await h.tenantTokens.list(params.tenantId ?? '') },
  }));
  router.route('DELETE', '/v1/tenants/:tenantId/tokens/:id', async ({ params }) => {
    await h.tenantTokens.revoke(params.tenantId ?? '', params.id ?? '');
    return { status: 204 };
  });
}
