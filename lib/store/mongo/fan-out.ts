/**
 * The outbox and fan-out in MongoDB: events appended (idempotently), the
 * ones waiting to be fanned out, and recording a fan-out: its events marked
 * and its deliveries upserted in one transaction, those the caller claims
 * inserted in flight at their slot's epoch (of a FIFO endpoint, only the head
 * of an empty line).
 */
import type { AnyBulkWriteOperation, ClientSession } from 'mongodb';
import { NotFoundError, StoreError } from '../../errors.ts';
import { EndpointOrdering, type Delivery, type OutboxEvent } from '../../model.ts';
import type { FanOut, FanOutClaim, NewDelivery } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { deliveryFromDoc, eventFromDoc, eventToDoc, newDeliveryDoc } from './documents.ts';
import { lineHeadFilter, lineKey, linesOf, mayGoInFlight } from './line-heads.ts';
import { liveLeasesFilter } from './queries.ts';
import type { DeliveryDoc, EventDoc } from './schema.ts';

/**
 * What one `recordFanOuts` call writes. The store works it out before its
 * ready check and error mapping (`#run`), as it always has, so only what
 * touches the database is in `recordFanOuts` below.
 */
export interface FanOutBatch {
  readonly eventIds: readonly string[];
  readonly all: readonly NewDelivery[];
  /** Those of `all` that the claim names. */
  readonly toClaim: readonly NewDelivery[];
}

export function fanOutBatch(fanOuts: readonly FanOut[], claim: FanOutClaim | undefined): FanOutBatch {
  const eventIds = [...new Set(fanOuts.map((fanOut) => fanOut.eventId))];
  const all = fanOuts.flatMap((fanOut) => fanOut.deliveries);
  const toClaim = claim === undefined ? [] : all.filter((d) => claim.deliveryIds.has(d.id));
  return { eventIds, all, toClaim };
}

/** Idempotent: an event whose id is already stored is left as it is. One transaction for the batch. */
export async function appendEvents(db: StoreDb, events: readonly OutboxEvent[]): Promise<void> {
  return db.transaction(async (session) => {
    const ops: AnyBulkWriteOperation<EventDoc>[] = events.map((event) => {
      const { _id, ...fields } = eventToDoc(event);
      return { updateOne: { filter: { _id }, update: { $setOnInsert: { ...fields, origin: db.origin } }, upsert: true } };
    });
    await db.events.bulkWrite(ops, { session, ordered: true });
  });
}

/** The first `n` (at least 1) events waiting to be fanned out, oldest first; none of the excepted tenants'. */
export async function unfannedEvents({ events }: StoreDb, n: number, exceptTenantIds: readonly string[] = []): Promise<OutboxEvent[]> {
  if (exceptTenantIds.length === 0) {
    return (await events.find({ fannedOut: false }).sort({ createdAt: 1, ord: 1 }).limit(n).toArray()).map(eventFromDoc);
  }
  // The tenants with events waiting, from events_unfanned_tenant (a distinct scan reads one entry
  // per tenant, never a tenant's backlog); then the oldest few of each tenant not excepted.
  const excepted = new Set(exceptTenantIds);
  const tenants = (await events.distinct('tenantId', { fannedOut: false })).filter((id) => !excepted.has(id));
  const found: OutboxEvent[] = [];
  for (const tenantId of tenants) {
    const docs = await events.find({ fannedOut: false, tenantId }).sort({ tenantId: 1, createdAt: 1, ord: 1 }).limit(n).toArray();
    found.push(...docs.map(eventFromDoc));
  }
  // The oldest of them all first; ids break ties within a millisecond only roughly (as `ord` does per tenant).
  return found.sort((a, b) => a.createdAt - b.createdAt).slice(0, n);
}

/** The events waiting to be fanned out, counted up to `n` (at least 1). */
export async function countUnfannedEvents({ events }: StoreDb, n: number): Promise<number> {
  // The filter is the partial filter of events_unfanned, so the count walks that index only.
  return events.countDocuments({ fannedOut: false }, { limit: n });
}

/** One transaction; answers the deliveries it inserted in flight (claimed). */
export async function recordFanOuts(db: StoreDb, batch: FanOutBatch, now: number, claim?: FanOutClaim): Promise<Delivery[]> {
  const { eventIds, all, toClaim } = batch;
  return db.transaction(async (session) => {
    const marked = await db.events.updateMany(
      { _id: { $in: eventIds }, fannedOut: false },
      { $set: { fannedOut: true, fannedOutAt: now } },
      { session },
    );
    if (marked.matchedCount < eventIds.length) {
      // Fewer were waiting than named: some were fanned out before (a rerun), or are not stored.
      const stored = await db.events.find({ _id: { $in: eventIds } }, { session, projection: { _id: 1 } }).toArray();
      const storedIds = new Set(stored.map((doc) => doc._id));
      const missing = eventIds.find((id) => !storedIds.has(id));
      if (missing !== undefined) throw new NotFoundError('event', missing);
    }
    if (all.length === 0) return [];
    const epochs = new Map<number, number>();
    if (claim !== undefined && toClaim.length > 0) {
      const slots = [...new Set(toClaim.map((d) => d.slot))];
      for (const lease of await db.leases.find(liveLeasesFilter(claim.owner, now, slots), { session }).toArray()) {
        epochs.set(lease._id, lease.epoch);
      }
    }
    // Only deliveries not stored yet take a number: a re-planned event's existing ones keep theirs.
    const stored = new Set(
      (await db.deliveries.find({ _id: { $in: all.map((d) => d.id) } }, { session, projection: { _id: 1 } }).toArray()).map((doc) => doc._id),
    );
    const fresh = all.filter((d) => !stored.has(d.id));
    const next = await takeSequences(db, fresh, session);
    const inFlight = await claimableOnInsert(db, fresh, new Set(toClaim.map((d) => d.id)), session);
    const docs = fresh.map((d) => {
      const epoch = inFlight.has(d.id) ? epochs.get(d.slot) : undefined;
      const sequence = next.get(d.endpointId)!;
      next.set(d.endpointId, sequence + 1);
      return newDeliveryDoc(d, sequence, epoch === undefined ? undefined : { epoch, now });
    });
    if (docs.length === 0) return [];
    const ops: AnyBulkWriteOperation<DeliveryDoc>[] = docs.map((doc) => {
      const { _id, ...fields } = doc;
      return { updateOne: { filter: { _id }, update: { $setOnInsert: { ...fields, origin: db.origin } }, upsert: true } };
    });
    const result = await db.deliveries.bulkWrite(ops, { session, ordered: true });
    // Only the upserted ones are new; an id that existed (a rerun) keeps its state.
    const inserted = new Set(Object.values(result.upsertedIds));
    return docs.filter((doc) => doc.status === 'in_flight' && inserted.has(doc._id)).map(deliveryFromDoc);
  });
}

/**
 * Which of the new deliveries named for claiming may go in in flight ({@link mayGoInFlight}): of a
 * FIFO endpoint, only the first of a line with nothing open, read here (one seek of
 * `deliveries_open_line` per line named; nothing read when no FIFO endpoint is named). The reads
 * are the transaction's snapshot, and they are current for this endpoint: the transaction has
 * written its counter ({@link takeSequences}), which fails with a write conflict (and is retried
 * from a new snapshot) if another fan-out to it committed since the snapshot or has not committed
 * yet. A delivery settled meanwhile only makes the line look open: the new one goes in pending, and
 * a claim takes it.
 */
async function claimableOnInsert(
  db: StoreDb,
  fresh: readonly NewDelivery[],
  toClaim: ReadonlySet<string>,
  session: ClientSession,
): Promise<Set<string>> {
  const named = fresh.filter((d) => toClaim.has(d.id));
  if (named.length === 0) return new Set();
  const endpointIds = [...new Set(named.map((d) => d.endpointId))];
  const fifoDocs = await db.endpoints.find({ _id: { $in: endpointIds }, ordering: EndpointOrdering.FIFO }, { session, projection: { _id: 1 } }).toArray();
  const fifo = new Set(fifoDocs.map((e) => e._id));
  const open = new Set<string>();
  // One at a time: operations of one transaction do not run in parallel.
  for (const line of linesOf(named.filter((d) => fifo.has(d.endpointId)))) {
    if ((await db.deliveries.findOne(lineHeadFilter(line), { session, projection: { _id: 1 } })) !== null) open.add(lineKey(line));
  }
  return mayGoInFlight(fresh, toClaim, fifo, open);
}

/**
 * Adds to each endpoint's counter how many of `fresh` are its, in the transaction (one `$inc` per
 * endpoint, in endpoint id order); answers the first number of each. Two transactions numbering the
 * same endpoint conflict on its document and the driver retries one, so numbers are never shared;
 * an aborted transaction gives its numbers back.
 */
async function takeSequences(db: StoreDb, fresh: readonly NewDelivery[], session: ClientSession): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const d of fresh) counts.set(d.endpointId, (counts.get(d.endpointId) ?? 0) + 1);
  const first = new Map<string, number>();
  for (const endpointId of [...counts.keys()].sort()) {
    const n = counts.get(endpointId)!;
    const counter = await db.endpointSequences.findOneAndUpdate(
      { _id: endpointId },
      { $inc: { last: n } },
      { session, upsert: true, returnDocument: 'after' },
    );
    if (counter === null) throw new StoreError(`mongodb: the sequence counter of endpoint '${endpointId}' was not written`);
    first.set(endpointId, counter.last - n + 1);
  }
  return first;
}

export async function getEvent({ events }: StoreDb, id: string): Promise<OutboxEvent | undefined> {
  const doc = await events.findOne({ _id: id });
  return doc === null ? undefined : eventFromDoc(doc);
}
