/**
 * The delivery log in MongoDB: deliveries and their attempts as the admin
 * API and the status server read them, counts by status and the next due time.
 */
import type { Attempt, Delivery, DeliveryStatus } from '../../model.ts';
import { DeliveryStatus as Status } from '../../model.ts';
import type { DeliveryFilter } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { attemptFromDoc, deliveryFromDoc } from './documents.ts';
import { countsByStatus, DELIVERY_LIST_SORT, deliveryListFilter, statusCountFilter } from './queries.ts';

export async function getDelivery({ deliveries }: StoreDb, id: string): Promise<Delivery | undefined> {
  const doc = await deliveries.findOne({ _id: id });
  return doc === null ? undefined : deliveryFromDoc(doc);
}

/** `limit` is the filter's, clamped, at least 1. */
export async function listDeliveries({ deliveries }: StoreDb, filter: DeliveryFilter, limit: number): Promise<Delivery[]> {
  return (await deliveries.find(deliveryListFilter(filter)).sort(DELIVERY_LIST_SORT).limit(limit).toArray()).map(deliveryFromDoc);
}

/** `sequence > after`, in sequence order: a seek on deliveries_endpoint_sequence. `limit` clamped, at least 1. */
export async function listDeliveriesAfterSequence({ deliveries }: StoreDb, endpointId: string, after: number, limit: number): Promise<Delivery[]> {
  const docs = await deliveries.find({ endpointId, sequence: { $gt: after } }).sort({ endpointId: 1, sequence: 1 }).limit(limit).toArray();
  return docs.map(deliveryFromDoc);
}

export async function listAttempts({ attempts }: StoreDb, deliveryId: string): Promise<Attempt[]> {
  return (await attempts.find({ deliveryId }).sort({ round: 1, number: 1, _id: 1 }).toArray()).map(attemptFromDoc);
}

/**
 * One count per status, each on the index that leads with `status` (`deliveries_next`): it reads
 * index keys only, never the documents, where a `$group` over the collection read every document.
 */
export async function countDeliveries({ deliveries }: StoreDb): Promise<Readonly<Record<DeliveryStatus, number>>> {
  const statuses = Object.values(Status);
  const found = await Promise.all(
    statuses.map(async (status) => ({ _id: status, n: await deliveries.countDocuments(statusCountFilter(status)) })),
  );
  return countsByStatus(statuses, found);
}

/** The earliest due time of a pending delivery whose endpoint is enabled. */
export async function nextDueAt({ deliveries, endpoints }: StoreDb): Promise<number | undefined> {
  const disabled = await endpoints.distinct('_id', { status: { $ne: 'enabled' } });
  const [next] = await deliveries
    .find({ status: 'pending', endpointId: { $nin: disabled } }, { projection: { nextAttemptAt: 1 } })
    .sort({ nextAttemptAt: 1 })
    .limit(1)
    .toArray();
  return next?.nextAttemptAt;
}
