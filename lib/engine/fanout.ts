/**
 * Fan-out: one event becomes one delivery per subscribed endpoint of its
 * tenant. Delivery ids derive from (event, endpoint), so planning the same
 * event twice (a crash between fan-out and marking it done) plans the same ids
 * and the store creates nothing twice.
 */
import { eventSubject, filterTestOf, type FilterSubject } from '../endpoints/payload-filter-match.ts';
import { matchesEventType } from '../endpoints/subscription.ts';
import { deliveryIdFor, slotOf } from '../ids.ts';
import type { Endpoint, OutboxEvent } from '../model.ts';
import type { NewDelivery } from '../store/port.ts';

/**
 * The deliveries for one event. Disabled endpoints get theirs too: they wait
 * and go out when the endpoint is re-enabled, so disabling never loses events.
 * An endpoint with a payload filter the event does not match gets none. The
 * payload is parsed at most once, and only when a target has a filter.
 * An event addressed to one endpoint goes to that endpoint only, whatever its filters
 * (a test event, or one the producer aimed on purpose).
 */
export function planDeliveries(
  event: OutboxEvent,
  tenantEndpoints: readonly Endpoint[],
  slotCount: number,
  now: number,
): NewDelivery[] {
  let subject: FilterSubject | undefined;
  const targets = tenantEndpoints.filter((endpoint) => {
    if (endpoint.tenantId !== event.tenantId) return false;
    if (event.endpointId !== null) return endpoint.id === event.endpointId;
    if (!matchesEventType(endpoint.eventTypes, event.type)) return false;
    if (endpoint.filter === undefined) return true;
    subject ??= eventSubject(event.type, event.payload);
    return filterTestOf(endpoint.filter)(subject) === null;
  });
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
