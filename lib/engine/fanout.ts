/**
 * Fan-out: one event becomes one delivery per subscribed endpoint of its
 * tenant. Delivery ids derive from (event, endpoint), so planning the same
 * event twice (a crash between fan-out and marking it done) plans the same ids
 * and the store creates nothing twice.
 */
import { deliveryIdFor, slotOf } from '../ids.ts';
import type { Endpoint, OutboxEvent } from '../model.ts';
import type { NewDelivery } from '../store/port.ts';

/**
 * True when `type` passes the endpoint's filters: an empty list or `*` takes
 * every type, `invoice.*` takes `invoice.paid` and `invoice.line.added`, any
 * other filter must equal the type.
 */
export function matchesEventType(filters: readonly string[], type: string): boolean {
  if (filters.length === 0) return true;
  return filters.some((filter) => {
    if (filter === '*') return true;
    if (filter.endsWith('.*')) return type.startsWith(filter.slice(0, -1));
    return filter === type;
  });
}

/**
 * The deliveries for one event. Disabled endpoints get theirs too: they wait
 * and go out when the endpoint is re-enabled, so disabling never loses events.
 * An event addressed to one endpoint goes to that endpoint only, whatever its filters.
 */
export function planDeliveries(
  event: OutboxEvent,
  tenantEndpoints: readonly Endpoint[],
  slotCount: number,
  now: number,
): NewDelivery[] {
  const targets = tenantEndpoints.filter((endpoint) =>
    endpoint.tenantId === event.tenantId &&
    (event.endpointId === null ? matchesEventType(endpoint.eventTypes, event.type) : endpoint.id === event.endpointId),
  );
  return targets.map((endpoint) => ({
    id: deliveryIdFor(event.id, endpoint.id, event.createdAt),
    eventId: event.id,
    endpointId: endpoint.id,
    tenantId: event.tenantId,
    eventType: event.type,
    slot: slotOf(endpoint.id, slotCount),
    nextAttemptAt: now,
    createdAt: now,
    orderingKey: event.orderingKey,
  }));
}
