/**
 * The cluster's delivery figures: each endpoint's attempts and failure rate
 * over the last hour (`GET /v1/stats`, from the stored delivery minutes:
 * `status/cluster-stats.ts`) and the delivery charts' series (`GET
 * /v1/stats/series`). Both within the tenant the query names (a tenant
 * token's own, always) or, for the admin without one, every endpoint.
 */
import type { Herald } from '../../herald.ts';
import { seriesRequestOf } from '../../status/delivery-series.ts';
import type { Router } from '../router.ts';

export function statsRoutes(router: Router, h: Pick<Herald, 'deliveryStats' | 'deliverySeries'>): void {
  router.route('GET', '/v1/stats', async ({ query }) => {
    const tenantId = query.get('tenantId');
    return { status: 200, json: await h.deliveryStats(tenantId === null || tenantId === '' ? { kind: 'all' } : { kind: 'tenant', tenantId }) };
  }, { tenant: { listsTenant: true } });

  // One endpoint's series or every endpoint's (`all`). An endpoint outside the scope answers 404
  // like an unknown one (Herald.deliverySeries).
  router.route('GET', '/v1/stats/series', async ({ query }) => {
    const tenantId = query.get('tenantId');
    const within = tenantId === null || tenantId === '' ? ({ kind: 'all' } as const) : ({ kind: 'tenant', tenantId } as const);
    return { status: 200, json: await h.deliverySeries(seriesRequestOf(query), within) };
  }, { tenant: { listsTenant: true } });
}
