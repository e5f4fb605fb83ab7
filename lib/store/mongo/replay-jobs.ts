/**
 * Replay jobs in MongoDB (lib/dead-letters/replay-jobs.ts): created by the
 * node a job is started on, leased by the node that runs it, read by any node.
 * A take is a `findOneAndUpdate` conditional on the lease it saw, one job at a
 * time: two nodes racing for a lapsed job get it once.
 */
import { ConflictError } from '../../errors.ts';
import type { ReplayJobRecord } from '../../model.ts';
import type { ReplayJobEnd, ReplayJobProgress } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { isDuplicateKeyError } from './mongo-errors.ts';
import type { ReplayJobDoc } from './schema.ts';

export async function createReplayJob({ replayJobs }: StoreDb, job: ReplayJobRecord): Promise<void> {
  try {
    await replayJobs.insertOne(replayJobToDoc(job));
  } catch (error) {
    if (isDuplicateKeyError(error)) throw new ConflictError(`replay job '${job.id}' already exists`);
    throw error;
  }
}

export async function getReplayJob({ replayJobs }: StoreDb, id: string): Promise<ReplayJobRecord | undefined> {
  const doc = await replayJobs.findOne({ _id: id });
  return doc === null ? undefined : replayJobFromDoc(doc);
}

export async function listReplayJobs({ replayJobs }: StoreDb, limit: number): Promise<ReplayJobRecord[]> {
  const docs = await replayJobs.find({}).sort({ createdAt: -1, _id: -1 }).limit(Math.max(0, Math.floor(limit))).toArray();
  return docs.map(replayJobFromDoc);
}

export async function leaseReplayJobs({ replayJobs }: StoreDb, owner: string, now: number, leaseUntil: number): Promise<ReplayJobRecord[]> {
  const takeable = { state: 'running' as const, $or: [{ owner }, { owner: null }, { leaseUntil: { $lte: now } }] };
  const candidates = await replayJobs.find(takeable, { projection: { _id: 1 } }).sort({ createdAt: 1, _id: 1 }).toArray();
  const held: ReplayJobRecord[] = [];
  for (const { _id } of candidates) {
    // Conditional again: another node may have taken it since the find.
    const doc = await replayJobs.findOneAndUpdate({ _id, ...takeable }, { $set: { owner, leaseUntil } }, { returnDocument: 'after' });
    if (doc !== null) held.push(replayJobFromDoc(doc));
  }
  return held;
}

export async function saveReplayJobProgress({ replayJobs }: StoreDb, id: string, owner: string, progress: ReplayJobProgress): Promise<boolean> {
  const { matchedCount } = await replayJobs.updateOne(
    { _id: id, owner, state: 'running' },
    { $set: { cursor: progress.cursor, replayed: progress.replayed, waiting: progress.waiting } },
  );
  return matchedCount > 0;
}

export async function endReplayJob({ replayJobs }: StoreDb, id: string, owner: string | null, end: ReplayJobEnd): Promise<ReplayJobRecord | undefined> {
  const doc = await replayJobs.findOneAndUpdate(
    { _id: id, state: 'running', ...(owner === null ? {} : { owner }) },
    { $set: { state: end.state, finishedAt: end.finishedAt, error: end.error, owner: null, leaseUntil: 0 } },
    { returnDocument: 'after' },
  );
  return doc === null ? undefined : replayJobFromDoc(doc);
}

export async function releaseReplayJobs({ replayJobs }: StoreDb, owner: string): Promise<void> {
  await replayJobs.updateMany({ owner, state: 'running' }, { $set: { owner: null, leaseUntil: 0 } });
}

/** Each endpoint's replayed deliveries (round above 0) still pending or in flight, in one aggregation. */
export async function countLiveReplays({ deliveries }: StoreDb, endpointIds: readonly string[]): Promise<Record<string, number>> {
  const rows = await deliveries
    .aggregate<{ _id: string; live: number }>([
      { $match: { endpointId: { $in: [...endpointIds] }, round: { $gt: 0 }, status: { $in: ['pending', 'in_flight'] } } },
      { $group: { _id: '$endpointId', live: { $sum: 1 } } },
    ])
    .toArray();
  const counts: Record<string, number> = {};
  for (const row of rows) counts[row._id] = row.live;
  return counts;
}

export function replayJobToDoc(job: ReplayJobRecord): ReplayJobDoc {
  const { id, ...rest } = job;
  return { _id: id, ...rest };
}

export function replayJobFromDoc(doc: ReplayJobDoc): ReplayJobRecord {
  return {
    id: doc._id,
    filter: doc.filter,
    state: doc.state,
    total: doc.total,
    replayed: doc.replayed,
    waiting: doc.waiting,
    cursor: doc.cursor,
    chunkSize: doc.chunkSize,
    createdAt: doc.createdAt,
    finishedAt: doc.finishedAt,
    error: doc.error,
    owner: doc.owner,
    leaseUntil: doc.leaseUntil,
  };
}
