/**
 * Retention in MongoDB: attempts and dead letters older than the horizon go,
 * then fanned-out events with nothing left to deliver, with their
 * deliveries, `CHUNK` events per transaction, and replay jobs ended before it; delivery minutes older than
 * theirs, `CHUNK` per delete.
 */
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
  const attempts = (await db.attempts.deleteMany({ startedAt: { $lt: before } })).deletedCount;
  const deadLetters = (await db.deadLetters.deleteMany({ createdAt: { $lt: before } })).deletedCount;
  let events = 0;
  let after: string | undefined;
  for (;;) {
    const batch = await db.events
      .find(
        { createdAt: { $lt: before }, fannedOut: true, ...(after === undefined ? {} : { _id: { $gt: after } }) },
        { projection: { _id: 1 } },
      )
      .sort({ _id: 1 })
      .limit(CHUNK)
      .toArray();
    const last = batch.at(-1);
    if (last === undefined) break;
    after = last._id;
    const ids = batch.map((e) => e._id);
    const blocked = new Set([
      ...(await db.deliveries.distinct('eventId', unfinishedDeliveriesFilter(ids, before))),
      ...(await db.deadLetters.distinct('eventId', { eventId: { $in: ids }, replayedAt: null })),
    ]);
    const purgeable = ids.filter((id) => !blocked.has(id));
    if (purgeable.length > 0) {
      events += await db.transaction(async (session) => {
        await db.deliveries.deleteMany({ eventId: { $in: purgeable } }, { session });
        return (await db.events.deleteMany({ _id: { $in: purgeable } }, { session })).deletedCount;
      });
    }
    if (batch.length < CHUNK) break;
  }
  const replayJobs = (await db.replayJobs.deleteMany({ state: { $ne: 'running' }, finishedAt: { $lt: before } })).deletedCount;
  await purgeEndpointChanges(db, before);
  return { attempts, deadLetters, events, replayJobs };
}

/** Deletes the delivery minutes that start before `before`, `CHUNK` documents per delete (read by the `minute` index). */
export async function purgeDeliveryMinutes(db: StoreDb, before: number): Promise<number> {
  let total = 0;
  for (;;) {
    const ids = (await db.deliveryMinutes.find({ minute: { $lt: before } }, { projection: { _id: 1 } }).limit(CHUNK).toArray()).map((doc) => doc._id);
    if (ids.length === 0) return total;
    total += (await db.deliveryMinutes.deleteMany({ _id: { $in: ids } })).deletedCount;
    if (ids.length < CHUNK) return total;
  }
}
