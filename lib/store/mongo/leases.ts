/**
 * Slot leases and cluster membership in MongoDB. No transactions: a lease is
 * renewed or taken by conditional updates and upserts, and a race for a slot
 * is lost on its duplicate `_id`.
 */
import type { AnyBulkWriteOperation, Db } from 'mongodb';
import { StoreError } from '../../errors.ts';
import type { NodeHeartbeat, NodeRecord, SlotLease, SlotOpenCount, SlotWeights } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { leaseFromDoc, nodeFromDoc } from './documents.ts';
import { isDuplicateKeyError, MongoErrorCode, onlyDuplicateKeys, serverErrorCode } from './mongo-errors.ts';
import {
  liveLeasesFilter,
  RELEASE_LEASES_UPDATE,
  releaseLeasesFilter,
  renewLeasesFilter,
  renewLeasesUpdate,
  slotsToTake,
  takeLeaseFilter,
  takeLeaseUpdate,
} from './queries.ts';
import { MetaKeys, type LeaseDoc } from './schema.ts';

/**
 * Three steps, none needing a transaction: read the slots' leases; renew the
 * owner's own (live or lapsed, epoch kept) in one update; take the free ones
 * (never leased, or released by anyone, the owner included) and the expired
 * ones of others in one unordered bulk of conditional upserts (epoch + 1).
 * Those are the epochs of the rule in `../port.ts`. An upsert that loses a
 * race fails on the duplicate `_id` and means "not taken". Then read back what
 * the owner holds.
 */
export async function acquireLeases(
  { leases }: StoreDb,
  owner: string,
  slots: readonly number[],
  now: number,
  leaseMs: number,
): Promise<SlotLease[]> {
  const until = now + leaseMs;
  const current = await leases.find({ _id: { $in: [...slots] } }).toArray();
  if (current.some((lease) => lease.owner === owner)) {
    await leases.updateMany(renewLeasesFilter(owner, slots), renewLeasesUpdate(until));
  }
  const take = slotsToTake(slots, current, owner, now);
  if (take.length > 0) {
    const ops: AnyBulkWriteOperation<LeaseDoc>[] = take.map((slot) => ({
      updateOne: { filter: takeLeaseFilter(owner, slot, now), update: takeLeaseUpdate(owner, until), upsert: true },
    }));
    try {
      await leases.bulkWrite(ops, { ordered: false });
    } catch (error) {
      if (!onlyDuplicateKeys(error)) throw error;
    }
  }
  return (await leases.find(liveLeasesFilter(owner, now, slots)).sort({ _id: 1 }).toArray()).map(leaseFromDoc);
}

export async function releaseLeases({ leases }: StoreDb, owner: string, slots: readonly number[]): Promise<void> {
  await leases.updateMany(releaseLeasesFilter(owner, slots), RELEASE_LEASES_UPDATE);
}

/** Leases that have an owner, expired or not; released slots are left out. */
export async function listLeases({ leases }: StoreDb): Promise<SlotLease[]> {
  return (await leases.find({ owner: { $ne: null } }).sort({ _id: 1 }).toArray()).map(leaseFromDoc);
}

/**
 * The server's wall clock: `localTime` of the `hello` reply (of the server the driver sends it
 * to; the members of a replica set keep their clocks in step with NTP, as MongoDB requires).
 */
export async function serverTime(db: Db): Promise<number> {
  const hello = await db.command({ hello: 1 }).catch(async (error: unknown) => {
    // MongoDB 4.4.0 and 4.4.1, still supported, know only the legacy name (`hello` came in 4.4.2).
    if (serverErrorCode(error) === MongoErrorCode.COMMAND_NOT_FOUND) return db.command({ isMaster: 1 });
    throw error;
  });
  const localTime: unknown = hello['localTime'];
  return localTime instanceof Date ? localTime.getTime() : Number.NaN;
}

export async function heartbeat({ nodes }: StoreDb, node: NodeHeartbeat): Promise<void> {
  const figures = { inFlight: node.inFlight, clockOffsetMs: Math.round(node.clockOffsetMs) };
  const write = () =>
    nodes.updateOne(
      { _id: node.id },
      { $setOnInsert: { startedAt: node.startedAt }, $max: { seenAt: node.now }, $set: figures },
      { upsert: true },
    );
  try {
    await write();
  } catch (error) {
    // Two first heartbeats at once: the document exists now, so the second try updates it.
    if (!isDuplicateKeyError(error)) throw error;
    await write();
  }
}

export async function listNodes({ nodes }: StoreDb, seenSince: number): Promise<NodeRecord[]> {
  return (await nodes.find({ seenAt: { $gte: seenSince } }).sort({ _id: 1 }).toArray()).map(nodeFromDoc);
}

export async function removeNode({ nodes }: StoreDb, id: string): Promise<void> {
  await nodes.deleteOne({ _id: id });
}

/**
 * Open deliveries per slot: two `$match` + `$group` passes, each over one index
 * (`deliveries_due`, `deliveries_in_flight`, both led by status then slot), summed here.
 */
export async function countOpenBySlot({ deliveries }: StoreDb, now: number): Promise<SlotOpenCount[]> {
  const bySlot = async (match: Record<string, unknown>): Promise<Array<{ _id: number; n: number }>> =>
    deliveries.aggregate<{ _id: number; n: number }>([{ $match: match }, { $group: { _id: '$slot', n: { $sum: 1 } } }]).toArray();
  const [due, inFlight] = await Promise.all([bySlot({ status: 'pending', nextAttemptAt: { $lte: now } }), bySlot({ status: 'in_flight' })]);
  const open = new Map<number, number>();
  for (const { _id, n } of [...due, ...inFlight]) open.set(_id, (open.get(_id) ?? 0) + n);
  return [...open].sort((a, b) => a[0] - b[0]).map(([slot, n]) => ({ slot, open: n }));
}

export async function getSlotWeights({ meta }: StoreDb): Promise<SlotWeights | undefined> {
  const doc = await meta.findOne({ _id: MetaKeys.SLOT_WEIGHTS });
  if (doc?.weights === undefined) return undefined;
  return { weights: doc.weights, by: doc.by ?? '', at: doc.at ?? 0 };
}

/** Stores `wanted` unless a slot count is stored already; answers the stored one (`../slot-count.ts`). */
export async function fixSlotCount({ meta }: StoreDb, wanted: number): Promise<number> {
  try {
    await meta.updateOne({ _id: MetaKeys.SLOT_COUNT }, { $setOnInsert: { value: wanted } }, { upsert: true });
  } catch (error) {
    // Two first starts at once: the other one inserted it.
    if (!isDuplicateKeyError(error)) throw error;
  }
  const stored = await meta.findOne({ _id: MetaKeys.SLOT_COUNT });
  if (typeof stored?.value !== 'number') throw new StoreError('mongodb: meta.slot_count is missing or not a number');
  return stored.value;
}

export async function putSlotWeights({ meta }: StoreDb, weights: SlotWeights): Promise<void> {
  await meta.updateOne({ _id: MetaKeys.SLOT_WEIGHTS }, { $set: { weights: [...weights.weights], by: weights.by, at: weights.at } }, { upsert: true });
}
