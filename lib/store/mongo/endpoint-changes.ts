/**
 * The endpoint change log in MongoDB (`endpoint_changes`), numbered by the `meta` counter
 * `endpoint_change_counter`. A change takes its number inside the transaction of the write it
 * numbers: two changes at once both write the counter, so one of them conflicts and is retried after
 * the other commits. Numbers therefore become visible in order, and an aborted change takes none.
 */
import type { ClientSession } from 'mongodb';
import type { EndpointChange } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { MetaKeys } from './schema.ts';

/** Numbers a change of the endpoint: call it inside the change's transaction, with its session. */
export async function recordEndpointChange(db: StoreDb, session: ClientSession, endpointId: string, now: number): Promise<void> {
  const counter = await db.meta.findOneAndUpdate(
    { _id: MetaKeys.ENDPOINT_CHANGE_COUNTER },
    { $inc: { value: 1 } },
    { upsert: true, returnDocument: 'after', session },
  );
  const version = counter?.value ?? 1;
  await db.endpointChanges.insertOne({ _id: version, endpointId, changedAt: now }, { session });
}

export async function endpointChangesAfter(db: StoreDb, after: number, limit: number): Promise<EndpointChange[]> {
  const docs = await db.endpointChanges.find({ _id: { $gt: after } }).sort({ _id: 1 }).limit(limit).toArray();
  return docs.map((doc) => ({ version: doc._id, endpointId: doc.endpointId }));
}

export async function lastEndpointChange(db: StoreDb): Promise<number> {
  const counter = await db.meta.findOne({ _id: MetaKeys.ENDPOINT_CHANGE_COUNTER });
  return counter?.value ?? 0;
}

/** Deletes the changes recorded before `before`; answers how many. */
export async function purgeEndpointChanges(db: StoreDb, before: number): Promise<number> {
  return (await db.endpointChanges.deleteMany({ changedAt: { $lt: before } })).deletedCount;
}
