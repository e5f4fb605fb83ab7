/**
 * Endpoints in MongoDB: the documents the admin API edits and the engine
 * reads to fan out and to build an endpoint's actor.
 */
import { ConflictError } from '../../errors.ts';
import type { Endpoint } from '../../model.ts';
import type { EndpointPatch } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { endpointFromDoc, endpointToDoc } from './documents.ts';
import { isDuplicateKeyError } from './mongo-errors.ts';
import {
  cancelDeliveriesFilter,
  cancelDeliveriesUpdate,
  endpointPatchUpdate,
  resumeDeliveriesFilter,
  resumeDeliveriesUpdate,
} from './queries.ts';

export async function createEndpoint({ endpoints }: StoreDb, endpoint: Endpoint): Promise<void> {
  try {
    await endpoints.insertOne(endpointToDoc(endpoint));
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

export async function updateEndpoint({ endpoints }: StoreDb, id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
  const doc = await endpoints.findOneAndUpdate({ _id: id }, endpointPatchUpdate(patch, now), { returnDocument: 'after' });
  return doc === null ? undefined : endpointFromDoc(doc);
}

/** Its unfinished deliveries are cancelled with it, in one transaction. */
export async function deleteEndpoint(db: StoreDb, id: string, now: number): Promise<boolean> {
  return db.transaction(async (session) => {
    const { deletedCount } = await db.endpoints.deleteOne({ _id: id }, { session });
    if (deletedCount === 0) return false;
    await db.deliveries.updateMany(cancelDeliveriesFilter(id), cancelDeliveriesUpdate(now), { session });
    return true;
  });
}

export async function resumeDeliveries({ deliveries }: StoreDb, endpointId: string, now: number): Promise<number> {
  const { modifiedCount } = await deliveries.updateMany(resumeDeliveriesFilter(endpointId, now), resumeDeliveriesUpdate(now));
  return modifiedCount;
}

export async function tenantExists({ endpoints }: StoreDb, tenantId: string): Promise<boolean> {
  return (await endpoints.findOne({ tenantId }, { projection: { _id: 1 } })) !== null;
}
