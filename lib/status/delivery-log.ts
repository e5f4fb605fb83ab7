/**
 * The delivery log as operators and tenants read it: deliveries, one with the payload it sends,
 * and its attempts; and the delivery charts' series and the cluster's per-endpoint figures, read
 * from the stored delivery minutes every node writes.
 */
import type { Clock } from '../clock.ts';
import { NotFoundError } from '../errors.ts';
import type { Attempt, Delivery, TraceContext } from '../model.ts';
import { isInScope, type SeriesScope } from '../store/delivery-minutes.ts';
import type { DeliveryFilter, Store } from '../store/port.ts';
import { clusterStatsOf, LAST_FAILURE_GROUPS, statsRange, type ClusterStats } from './cluster-stats.ts';
import { ALL_ENDPOINTS, seriesOf, seriesRange, type DeliverySeries, type SeriesRequest } from './delivery-series.ts';

export class DeliveryLog {
  readonly #store: Store;
  readonly #clock: Clock;

  constructor(deps: { readonly store: Store; readonly clock: Clock }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
  }

  async list(filter: DeliveryFilter): Promise<Delivery[]> {
    return this.#store.listDeliveries(filter);
  }

  /** @throws NotFoundError (`deliveryId`). */
  async get(id: string): Promise<Delivery> {
    const delivery = await this.#store.getDelivery(id);
    if (delivery === undefined) throw new NotFoundError('delivery', id, 'deliveryId');
    return delivery;
  }

  /**
   * One delivery and the payload it sends (the event's JSON text, byte for byte) and its event's
   * trace context; `null` once the retention purge has deleted the event (or, for the trace
   * context, when it had none).
   */
  async getWithPayload(id: string): Promise<Delivery & { readonly payload: string | null; readonly traceContext: TraceContext | null }> {
    const delivery = await this.get(id);
    const event = await this.#store.getEvent(delivery.eventId);
    return { ...delivery, payload: event?.payload ?? null, traceContext: event?.traceContext ?? null };
  }

  /** @throws NotFoundError (`deliveryId`). */
  async attempts(deliveryId: string): Promise<Attempt[]> {
    await this.get(deliveryId);
    return this.#store.listAttempts(deliveryId);
  }

  /**
   * The delivery charts' series: one endpoint's, or every endpoint's in `within` (`endpointId: all`),
   * read from the stored delivery minutes. `within` is what the asker may see: the admin every
   * endpoint, a tenant its own.
   * @throws NotFoundError (`endpointId`) when the endpoint does not exist or is outside `within`.
   */
  async series(request: SeriesRequest, within: SeriesScope): Promise<DeliverySeries> {
    let scope = within;
    if (request.endpointId !== ALL_ENDPOINTS) {
      const endpoint = await this.#store.getEndpoint(request.endpointId);
      if (endpoint === undefined || !isInScope(endpoint, within)) throw new NotFoundError('endpoint', request.endpointId, 'endpointId');
      scope = { kind: 'endpoints', endpointIds: [endpoint.id] };
    }
    const now = this.#clock.now();
    const { from, to } = seriesRange(request.window, now);
    return seriesOf(request, now, await this.#store.deliveryMinutes({ scope, from, to }));
  }

  /**
   * The cluster's attempts and failure rate per endpoint over the last hour, every node's, from the
   * stored delivery minutes (lib/status/cluster-stats.ts; they lag by up to one flush of each
   * node's minutes). `within` is what the asker may see: every endpoint, or a tenant's. An
   * endpoint's last open failure comes from its failure groups (the largest `LAST_FAILURE_GROUPS` in scope).
   */
  async stats(within: Exclude<SeriesScope, { kind: 'endpoints' }>): Promise<ClusterStats> {
    const range = statsRange(this.#clock.now());
    const [totals, groups] = await Promise.all([
      this.#store.deliveryTotals({ scope: within, ...range }),
      this.#store.failureGroups({ ...(within.kind === 'tenant' ? { tenantId: within.tenantId } : {}), limit: LAST_FAILURE_GROUPS }),
    ]);
    return clusterStatsOf(range, totals, groups);
  }
}
