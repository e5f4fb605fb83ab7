/**
 * Endpoints in MongoDB: the documents the admin API edits and the engine
 * reads to fan out and to build an endpoint's actor.
 */
import { ConflictError } from '../../errors.ts';
import type { Endpoint } from '../../model.ts';
import { secretsChanged } from '../endpoint-patch.ts';
import type { EndpointPatch } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { recordEndpointChange } from './endpoint-changes.ts';
import { endpointFromDoc, endpointToDoc } from './documents.ts';
import { isDuplicateKeyError } from './mongo-errors.ts';
import { CHUNK } from './collections.ts';
import {
  cancelChunkFilter,
  cancelDeliveriesFilter,
  cancelDeliveriesUpdate,
  credentialsFilter,
  endpointPatchUpdate,
  resumeDeliveriesFilter,
  resumeDeliveriesUpdate,
} from './queries.ts';

export async function createEndpoint(db: StoreDb, endpoint: Endpoint): Promise<void> {
  try {
    await db.transaction(async (session) => {
      await db.endpoints.insertOne(endpointToDoc(endpoint), { session });
      await recordEndpointChange(db, session, endpoint.id, endpoint.createdAt);
    });
  } catch (error) {
    if (isDuplicateKeyError(error)) throw new ConflictError(`endpoint '${endpoint.id}' already exists`);
    throw error;
  }
}

export async function getEndpoint({ endpoints }: StoreDb, id: string): Promise<Endpoint | undefined> {
  const doc = await endpoints.findOne({ _id: id });
  return doc === null ? undefined : endpointFromDoc(doc);
}

export async function listEndpoints({ endpoints }: StoreDb, filter?: { readonly tenantId?: string }): Promise<Endpoint[]> {
  const query = filter?.tenantId === undefined ? {} : { tenantId: filter.tenantId };
  return (await endpoints.find(query).sort({ createdAt: 1, _id: 1 }).toArray()).map(endpointFromDoc);
}

export async function updateEndpoint(db: StoreDb, id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
  const { endpoints } = db;
  const { expectedSecrets, expectedCredentials, expectedClientTlsKey } = patch;
  // The preconditions in the filter, so they are checked and the write made in one atomic step.
  const filter = {
    _id: id,
    ...(expectedSecrets === undefined ? {} : { $expr: { $eq: ['$secrets.secret', [...expectedSecrets]] } }),
    ...(expectedCredentials === undefined ? {} : credentialsFilter(expectedCredentials)),
    // `clientTls: null` also matches a document without the field.
    ...(expectedClientTlsKey === undefined ? {} : expectedClientTlsKey === null ? { clientTls: null } : { 'clientTls.key': expectedClientTlsKey }),
  };
  const doc = await db.transaction(async (session) => {
    const updated = await endpoints.findOneAndUpdate(filter, endpointPatchUpdate(patch, now), { returnDocument: 'after', session });
    if (updated !== null) await recordEndpointChange(db, session, id, now);
    return updated;
  });
  if (doc === null && (expectedSecrets !== undefined || expectedCredentials !== undefined || expectedClientTlsKey !== undefined) && (await endpoints.countDocuments({ _id: id }, { limit: 1 })) > 0) {
    throw secretsChanged(id);
  }
  return doc === null ? undefined : endpointFromDoc(doc);
}

/**
 * Deletes the endpoint (numbering the change in the same transaction), then cancels its unfinished deliveries `CHUNK` at a
 * time, outside any transaction: one transaction over a big backlog exceeds
 * MongoDB's transaction limits (a runtime under `transactionLifetimeLimitSeconds`,
 * 60 s by default; a write set that dirties too much of the WiredTiger cache
 * aborts with a write conflict, `TransactionTooLargeForCache` from 6.2, and
 * retrying cannot help). Nothing is lost in between:
 * claims take only deliveries of endpoints that exist and are enabled, and
 * a replay touches the endpoint inside its transaction (`dead-letters.ts`), so
 * it either commits before the delete, and its delivery is cancelled here,
 * or sees the endpoint gone. Interrupted half way, the rest is cancelled by
 * the next delete of the same id, which cancels whatever is left even when
 * the endpoint is already gone (and answers false).
 */
export async function deleteEndpoint(db: StoreDb, id: string, now: number): Promise<boolean> {
  const deletedCount = await db.transaction(async (session) => {
    const deleted = (await db.endpoints.deleteOne({ _id: id }, { session })).deletedCount;
    if (deleted > 0) await recordEndpointChange(db, session, id, now);
    return deleted;
  });
  await cancelBacklog(db, id, now);
  return deletedCount > 0;
}

/** Cancels a deleted endpoint's unfinished deliveries, `CHUNK` per write; returns how many. */
export async function cancelBacklog({ deliveries }: StoreDb, endpointId: string, now: number): Promise<number> {
  let cancelled = 0;
  for (;;) {
    const chunk = await deliveries.find(cancelDeliveriesFilter(endpointId), { projection: { _id: 1 } }).limit(CHUNK).toArray();
    if (chunk.length === 0) return cancelled;
    const { modifiedCount } = await deliveries.updateMany(
      cancelChunkFilter(chunk.map((d) => d._id)),
      cancelDeliveriesUpdate(now),
    );
    cancelled += modifiedCount;
    if (chunk.length < CHUNK) return cancelled;
  }
}

export async function resumeDeliveries({ deliveries }: StoreDb, endpointId: string, now: number): Promise<number> {
  const { modifiedCount } = await deliveries.updateMany(resumeDeliveriesFilter(endpointId, now), resumeDeliveriesUpdate(now));
  return modifiedCount;
}

export async function tenantExists({ endpoints }: StoreDb, tenantId: string): Promise<boolean> {
  return (await endpoints.findOne({ tenantId }, { projection: { _id: 1 } })) !== null;
}
