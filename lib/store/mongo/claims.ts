/**
 * Claiming deliveries in MongoDB: which documents a claim goes for, marking
 * them in flight at their slot's epoch, and handing them back with their
 * events. No transaction: each delivery is claimed by its own conditional
 * update in one unordered bulk write, and the lease epoch fences the rest.
 */
import { ObjectId } from 'mongodb';
import type { AnyBulkWriteOperation } from 'mongodb';
import { slotOf } from '../../ids.ts';
import type { DeliveryJob } from '../../model.ts';
import type { ClaimRequest, EndpointClaimRequest } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { deliveryFromDoc, eventFromDoc } from './documents.ts';
import {
  byDueThenId,
  claimableFilter,
  claimOneFilter,
  claimUpdate,
  endpointClaimableFilter,
  endpointDueFilter,
  endpointsWorthClaiming,
  liveLeasesFilter,
  pickClaims,
} from './queries.ts';
import type { ClaimCandidate, OwnedSlot } from './queries.ts';
import type { DeliveryDoc } from './schema.ts';

/**
 * `limit` and `perEndpoint` are the request's, whole and at least 1.
 *
 * 1. The owner's live slots and their epochs.
 * 2. The busy endpoints among claimable deliveries, each with its earliest
 *    due time (one `$group`); only enabled endpoints, and only those whose
 *    earliest is among the `limit` earliest, can contribute.
 * 3. Each of those endpoints' first `perEndpointLimit` claimable deliveries
 *    (indexed queries, in parallel); then the earliest due overall, up to `limit`.
 * 4. One unordered bulk of conditional updates claims them, each stamped
 *    with this claim's id; reading that id back gives exactly what was won.
 */
export async function claimDue(db: StoreDb, request: ClaimRequest, limit: number, perEndpoint: number): Promise<DeliveryJob[]> {
  const { owner, now } = request;
  const { leases, deliveries, endpoints } = db;
  const owned: OwnedSlot[] = (await leases.find(liveLeasesFilter(owner, now)).toArray()).map((l) => ({ slot: l._id, epoch: l.epoch }));
  if (owned.length === 0) return [];
  const bySlot = new Map(owned.map((o) => [o.slot, o]));

  const busy = await deliveries
    .aggregate<{ _id: { endpointId: string; slot: number }; first: number }>([
      { $match: claimableFilter(owned, request) },
      { $group: { _id: { endpointId: '$endpointId', slot: '$slot' }, first: { $min: '$nextAttemptAt' } } },
    ])
    .toArray();
  if (busy.length === 0) return [];
  const endpointIds = [...new Set(busy.map((b) => b._id.endpointId))];
  const enabled = new Set(
    (await endpoints.find({ _id: { $in: endpointIds }, status: 'enabled' }, { projection: { _id: 1 } }).toArray()).map((e) => e._id),
  );
  const worth = endpointsWorthClaiming(
    busy.filter((b) => enabled.has(b._id.endpointId)).map((b) => ({ endpointId: b._id.endpointId, slot: b._id.slot, first: b.first })),
    limit,
  );
  const lists = await Promise.all(
    worth.map(async (w): Promise<ClaimCandidate[]> => {
      const slot = bySlot.get(w.slot);
      if (slot === undefined) return [];
      const docs = await deliveries
        .find(endpointClaimableFilter(w.endpointId, slot, now), { projection: { _id: 1, endpointId: 1, slot: 1, nextAttemptAt: 1 } })
        .sort({ nextAttemptAt: 1, _id: 1 })
        .limit(perEndpoint)
        .toArray();
      return docs.map((d) => ({ _id: d._id, endpointId: d.endpointId, slot: d.slot, nextAttemptAt: d.nextAttemptAt }));
    }),
  );
  return claimCandidates(db, pickClaims(lists.flat(), perEndpoint, limit), bySlot, now);
}

/**
 * `wanted` holds the endpoints to claim for, each with a limit of at least 1.
 * The owner's live leases among the endpoints' slots, the enabled endpoints
 * among them, each one's first `limit` pending due deliveries (indexed
 * queries, in parallel); then claimed as `claimDue` claims.
 */
export async function claimForEndpoints(
  db: StoreDb,
  owner: string,
  now: number,
  wanted: EndpointClaimRequest['endpoints'],
  slotCount: number,
): Promise<DeliveryJob[]> {
  const slots = [...new Set(wanted.map((want) => slotOf(want.endpointId, slotCount)))];
  const owned = (await db.leases.find(liveLeasesFilter(owner, now, slots)).toArray()).map((l) => ({ slot: l._id, epoch: l.epoch }));
  if (owned.length === 0) return [];
  const bySlot = new Map(owned.map((o) => [o.slot, o]));
  const enabled = new Set(
    (
      await db.endpoints
        .find({ _id: { $in: wanted.map((want) => want.endpointId) }, status: 'enabled' }, { projection: { _id: 1 } })
        .toArray()
    ).map((e) => e._id),
  );
  const lists = await Promise.all(
    wanted.map(async ({ endpointId, limit }): Promise<ClaimCandidate[]> => {
      const slot = bySlot.get(slotOf(endpointId, slotCount));
      if (slot === undefined || !enabled.has(endpointId)) return [];
      const docs = await db.deliveries
        .find(endpointDueFilter(endpointId, slot, now), { projection: { _id: 1, endpointId: 1, slot: 1, nextAttemptAt: 1 } })
        .sort({ nextAttemptAt: 1, _id: 1 })
        .limit(Math.floor(limit))
        .toArray();
      return docs.map((d) => ({ _id: d._id, endpointId: d.endpointId, slot: d.slot, nextAttemptAt: d.nextAttemptAt }));
    }),
  );
  return claimCandidates(db, lists.flat(), bySlot, now);
}

/**
 * One unordered bulk of conditional updates claims the candidates, each
 * stamped with this claim's id; reading that id back gives exactly what was won.
 */
async function claimCandidates(
  { deliveries, events }: StoreDb,
  candidates: readonly ClaimCandidate[],
  bySlot: ReadonlyMap<number, OwnedSlot>,
  now: number,
): Promise<DeliveryJob[]> {
  if (candidates.length === 0) return [];
  const claimId = new ObjectId();
  const ops: AnyBulkWriteOperation<DeliveryDoc>[] = [];
  for (const candidate of candidates) {
    const slot = bySlot.get(candidate.slot);
    if (slot === undefined) continue;
    ops.push({ updateOne: { filter: claimOneFilter(candidate, slot, now), update: claimUpdate(slot.epoch, now, claimId) } });
  }
  if (ops.length === 0) return [];
  await deliveries.bulkWrite(ops, { ordered: false });
  const won = (await deliveries.find({ claimId }).toArray()).sort(byDueThenId);
  if (won.length === 0) return [];

  const eventIds = [...new Set(won.map((d) => d.eventId))];
  const found = new Map((await events.find({ _id: { $in: eventIds } }).toArray()).map((e) => [e._id, eventFromDoc(e)]));
  const jobs: DeliveryJob[] = [];
  for (const doc of won) {
    const event = found.get(doc.eventId);
    if (event === undefined) {
      // A claimed delivery whose event is gone (deleted by hand) can never be sent.
      await deliveries.updateOne({ _id: doc._id, claimId }, { $set: { status: 'cancelled', lastError: 'event missing', updatedAt: now } });
      continue;
    }
    jobs.push({ delivery: deliveryFromDoc(doc), event });
  }
  return jobs;
}
