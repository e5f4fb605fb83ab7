/**
 * Retention in MongoDB: attempts and dead letters older than the horizon go,
 * then fanned-out events with nothing left to deliver, with their
 * deliveries, `CHUNK` events per transaction, and replay jobs ended before it; delivery minutes older than
 * theirs, `CHUNK` per delete.
 */
import { purgeInChunks, purgeInOrder } from '../chunked-purge.ts';
import type { PurgeResult } from '../port.ts';
import { CHUNK } from './collections.ts';
import type { StoreDb } from './collections.ts';
import { purgeEndpointChanges } from './endpoint-changes.ts';
import { unfinishedDeliveriesFilter } from './queries.ts';

/**
 * The TTL indexes delete old attempts and dead letters on their own; this
 * deletes them too (for a horizon other than the TTL's, and at once), then
 * the fanned-out events older than the horizon whose deliveries are all
 * finished before it and that no unreplayed dead letter needs, with their
 * deliveries, `CHUNK` events per transaction.
 */
export async function purge(db: StoreDb, before: number): Promise<PurgeResult> {
  // Attempts, dead letters, replay jobs and changes in one `deleteMany` each, not in chunks as in
  // SQL: outside a transaction the server deletes document by document, with no lock held across.
  return purgeInOrder({
    attempts: async () => (await db.attempts.deleteMany({ startedAt: { $lt: before } })).deletedCount,
    deadLetters: async () => (await db.deadLetters.deleteMany({ createdAt: { $lt: before } })).deletedCount,
    events: () => purgeEvents(db, before),
    replayJobs: async () => (await db.replayJobs.deleteMany({ state: { $ne: 'running' }, finishedAt: { $lt: before } })).deletedCount,
    endpointChanges: () => purgeEndpointChanges(db, before),
  });
}

/**
 * `CHUNK` events per step, read past the last one looked at: an event kept (an unfinished
 * delivery or an unreplayed dead letter needs it) stays, so "the next purgeable ones" would read
 * it again forever. Each chunk's deletes run in one transaction.
 */
async function purgeEvents(db: StoreDb, before: number): Promise<number> {
  let after: string | undefined;
  return purgeInChunks(CHUNK, async () => {
    const batch = await db.events
      .find(
        { createdAt: { $lt: before }, fannedOut: true, ...(after === undefined ? {} : { _id: { $gt: after } }) },
        { projection: { _id: 1 } },
      )
      .sort({ _id: 1 })
      .limit(CHUNK)
      .toArray();
    const last = batch.at(-1);
    if (last === undefined) return 0;
    after = last._id;
    const ids = batch.map((e) => e._id);
    const blocked = new Set([
      ...(await db.deliveries.distinct('eventId', unfinishedDeliveriesFilter(ids, before))),
      ...(await db.deadLetters.distinct('eventId', { eventId: { $in: ids }, replayedAt: null })),
    ]);
    const purgeable = ids.filter((id) => !blocked.has(id));
    const removed =
      purgeable.length === 0
        ? 0
        : await db.transaction(async (session) => {
            await db.deliveries.deleteMany({ eventId: { $in: purgeable } }, { session });
            return (await db.events.deleteMany({ _id: { $in: purgeable } }, { session })).deletedCount;
          });
    return { examined: batch.length, removed };
  });
}

/** Deletes the delivery minutes that start before `before`, `CHUNK` documents per delete (read by the `minute` index). */
export async function purgeDeliveryMinutes(db: StoreDb, before: number): Promise<number> {
  return purgeInChunks(CHUNK, async () => {
    const ids = (await db.deliveryMinutes.find({ minute: { $lt: before } }, { projection: { _id: 1 } }).limit(CHUNK).toArray()).map((doc) => doc._id);
    if (ids.length === 0) return 0;
    return { examined: ids.length, removed: (await db.deliveryMinutes.deleteMany({ _id: { $in: ids } })).deletedCount };
  });
}
