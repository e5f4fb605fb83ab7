/**
 * The probes and the snapshot: `/healthz` (the process answers), `/readyz`
 * (the store is available and answers, and this node holds a slot lease),
 * `/metrics` (Prometheus) and `GET /v1/status`.
 */
import type { Herald } from '../../herald.ts';
import type { EndpointStats } from '../../status/endpoint-stats.ts';
import type { HeraldMetrics } from '../../status/metrics.ts';
import type { Router } from '../router.ts';

export interface StatusRoutesContext {
  readonly herald: Pick<Herald, 'storeAvailability' | 'store' | 'leases' | 'status'>;
  readonly metrics: HeraldMetrics;
  /** This node's recent failure rates, `/v1/status`'s `recent`. */
  readonly stats: EndpointStats;
}

/** `/healthz`, `/readyz` and `/metrics` are open to anyone; `/v1/status` is the admin's. */
export function statusRoutes(router: Router, { herald: h, metrics, stats }: StatusRoutesContext): void {
  router.route('GET', '/healthz', async () => ({ status: 200, json: { status: 'ok' } }), 'open');
  router.route('GET', '/readyz', async () => {
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
  router.route('GET', '/metrics', async () => ({
    status: 200,
    text: { body: await metrics.render(), contentType: metrics.contentType },
  }), 'open');
  router.route('GET', '/v1/status', async () => ({
    status: 200,
    // `recent`: this node's attempts only (the cluster's are GET /v1/stats).
    json: { ...(await h.status()), recent: { scope: 'node', windowMs: stats.windowMs, endpoints: stats.snapshot() } },
  }));
}
