/**
 * Dead letters in MongoDB: read with the attempts of the round that died,
 * replayed (their deliveries made pending again in a new round), `CHUNK` per
 * transaction, triaged (acknowledged, discarded), and the unreviewed ones the
 * review check watches.
 */
import { replayInChunks, walkPages, type ReplaySelection } from '../chunked-replay.ts';
import { triageOutcome, type TriageOutcome } from '../triage.ts';
import type { DeadLetter } from '../../model.ts';
import type { DeadLetterFilter, ReplayableDeadLetter, TriageRequest, UnreviewedDeadLetters } from '../port.ts';
import { CHUNK } from './collections.ts';
import type { StoreDb } from './collections.ts';
import { deadLetterFromDoc, triageFromDoc } from './documents.ts';
import {
  afterKeyFilter,
  DEAD_LETTER_LIST_SORT,
  DEAD_LETTER_REPLAY_SORT,
  deadLetterListFilter,
  deadLetterReplayFilter,
  markReplayedUpdate,
  REPLAY_FENCE_UPDATE,
  replayDeliveryFilter,
  replayDeliveryUpdate,
  replayFenceFilter,
  triageFilter,
  triageUpdate,
  UNREVIEWED_FILTER,
} from './dead-letter-queries.ts';
import type { DeadLetterDoc } from './schema.ts';

/** A dead letter's position in {@link DEAD_LETTER_REPLAY_SORT}'s order; `undefined` before the first. */
type ReplayKey = { readonly createdAt: number; readonly ord: DeadLetterDoc['ord'] } | undefined;

const replayKeyOf = (row: Pick<DeadLetterDoc, 'createdAt' | 'ord'>): ReplayKey => ({ createdAt: row.createdAt, ord: row.ord });

/** A dead letter's attempts are those of the round that died; earlier rounds have their own dead letters. */
export async function getDeadLetter(db: StoreDb, id: string): Promise<DeadLetter | undefined> {
  const doc = await db.deadLetters.findOne({ _id: id });
  if (doc === null) return undefined;
  return (await withAttempts(db, [doc]))[0];
}

/** `limit` is the filter's, clamped, at least 1. */
export async function listDeadLetters(db: StoreDb, filter: DeadLetterFilter, limit: number): Promise<DeadLetter[]> {
  const query = deadLetterListFilter(filter);
  if (filter.after !== undefined) {
    // Past the page's last document in the listing's order (createdAt, ord); a vanished one leaves none of its millisecond.
    const { createdAt, id } = filter.after;
    const anchor = await db.deadLetters.findOne({ _id: id }, { projection: { ord: 1 } });
    query.$or = anchor === null ? [{ createdAt: { $lt: createdAt } }] : [{ createdAt: { $lt: createdAt } }, { createdAt, ord: { $lt: anchor.ord } }];
  }
  const docs = await db.deadLetters.find(query).sort(DEAD_LETTER_LIST_SORT).limit(limit).toArray();
  return withAttempts(db, docs);
}

/**
 * By filter, every match is replayed (`limit` and `includeReplayed` are
 * ignored), `CHUNK` per transaction. Dead letters whose endpoint has been
 * deleted are skipped (their delivery would wait forever).
 */
export async function replayDeadLetters(db: StoreDb, selection: ReplaySelection, now: number): Promise<string[]> {
  // A transaction per chunk: outside one, MongoDB writes each document on its own, and a chunk's
  // writes (the endpoints' fence, each delivery, each dead letter) must commit or abort together.
  const replay = (rows: readonly DeadLetterDoc[]) =>
    db.transaction(async (session) => {
      const done: string[] = [];
      const endpointIds = [...new Set(rows.map((r) => r.endpointId))];
      const existing = new Set(
        (await db.endpoints.find({ _id: { $in: endpointIds } }, { session, projection: { _id: 1 } }).toArray()).map((e) => e._id),
      );
      // Conflicts with a concurrent deleteEndpoint (see REPLAY_FENCE_UPDATE): no pending delivery is left for a deleted endpoint.
      if (existing.size > 0) await db.endpoints.updateMany(replayFenceFilter([...existing]), REPLAY_FENCE_UPDATE, { session });
      for (const row of rows) {
        if (!existing.has(row.endpointId)) continue;
        const moved = await db.deliveries.updateOne(replayDeliveryFilter(row.deliveryId), replayDeliveryUpdate(now), { session });
        if (moved.modifiedCount === 0) continue;
        await db.deadLetters.updateOne({ _id: row._id }, markReplayedUpdate(now), { session });
        done.push(row._id);
      }
      return done;
    });
  return replayInChunks<DeadLetterDoc, ReplayKey>(selection, {
    chunkSize: CHUNK,
    replayIds: async (chunk) => {
      const ids = [...new Set(chunk)];
      const rows = await db.deadLetters.find({ _id: { $in: ids }, replayedAt: null }).sort({ createdAt: 1, _id: 1 }).toArray();
      return rows.length > 0 ? replay(rows) : [];
    },
    // The page is read outside the chunk's transaction: the replay checks each delivery is still dead.
    replayPage: async (filter, after) => {
      const base = deadLetterReplayFilter(filter);
      if (base === undefined) return { page: [], replayed: [] };
      const page = await db.deadLetters.find({ $and: [base, afterKeyFilter(after)] }).sort(DEAD_LETTER_REPLAY_SORT).limit(CHUNK).toArray();
      return { page, replayed: page.length > 0 ? await replay(page) : [] };
    },
    start: undefined,
    keyOf: replayKeyOf,
  });
}

/** The next open dead letters matching `filter`, oldest first, after the dead letter `afterId` (or from the start). */
export async function replayableDeadLetterPage(
  db: StoreDb,
  filter: DeadLetterFilter,
  afterId: string | null,
  limit: number,
  exceptEndpointIds: readonly string[] = [],
): Promise<ReplayableDeadLetter[]> {
  const base = deadLetterReplayFilter(filter);
  if (base === undefined || limit < 1) return [];
  const cursor = afterId === null ? null : await db.deadLetters.findOne({ _id: afterId }, { projection: { createdAt: 1, ord: 1 } });
  const after = cursor === null ? undefined : { createdAt: cursor.createdAt, ord: cursor.ord };
  const except = exceptEndpointIds.length === 0 ? {} : { endpointId: { $nin: [...exceptEndpointIds] } };
  const rows = await db.deadLetters
    .find({ $and: [base, afterKeyFilter(after), except] }, { projection: { deliveryId: 1, endpointId: 1 } })
    .sort(DEAD_LETTER_REPLAY_SORT)
    .limit(limit)
    .toArray();
  return rows.map((row) => ({ id: row._id, deliveryId: row.deliveryId, endpointId: row.endpointId }));
}

/**
 * How many of the open dead letters matching `filter` a replay would revive (the conditions of
 * `replayDeadLetters`): those whose endpoint exists and whose delivery is dead.
 */
export async function countReplayableDeadLetters(db: StoreDb, filter: DeadLetterFilter): Promise<number> {
  const base = deadLetterReplayFilter(filter);
  if (base === undefined) return 0;
  const endpointIds = (await db.deadLetters.distinct('endpointId', base)) as string[];
  const existing = (await db.endpoints.find({ _id: { $in: endpointIds } }, { projection: { _id: 1 } }).toArray()).map((e) => e._id);
  if (existing.length === 0) return 0;
  let count = 0;
  // Checked a chunk at a time against the deliveries: a dead letter's delivery may have been revived another way.
  await walkPages(undefined, CHUNK, replayKeyOf, async (after: ReplayKey) => {
    const rows = await db.deadLetters
      .find({ $and: [base, { endpointId: { $in: existing } }, afterKeyFilter(after)] }, { projection: { deliveryId: 1, createdAt: 1, ord: 1 } })
      .sort(DEAD_LETTER_REPLAY_SORT)
      .limit(CHUNK)
      .toArray();
    if (rows.length > 0) count += await db.deliveries.countDocuments({ _id: { $in: rows.map((row) => row.deliveryId) }, status: 'dead' });
    return rows;
  });
  return count;
}

/**
 * Sets the triage of the open ones among `request.ids`, in one transaction: the states read are
 * those the update acts on (a concurrent change aborts and retries the transaction).
 */
export async function triageDeadLetters(db: StoreDb, request: TriageRequest, now: number): Promise<TriageOutcome> {
  return db.transaction(async (session) => {
    const ids = [...new Set(request.ids)];
    const found = await db.deadLetters.find({ _id: { $in: ids } }, { session, projection: { _id: 1, triage: 1, replayedAt: 1, createdAt: 1 } }).toArray();
    const outcome = triageOutcome(request.ids, new Map(found.map((doc) => [doc._id, triageFromDoc(doc).state])));
    if (outcome.applied.length > 0) await db.deadLetters.updateMany(triageFilter(outcome.applied), triageUpdate(request, now), { session });
    return outcome;
  });
}

export async function unreviewedDeadLetters(db: StoreDb, cap: number): Promise<UnreviewedDeadLetters> {
  const limit = Math.max(0, Math.floor(cap));
  const [count, oldest] = await Promise.all([
    limit === 0 ? Promise.resolve(0) : db.deadLetters.countDocuments(UNREVIEWED_FILTER, { limit }),
    db.deadLetters.findOne(UNREVIEWED_FILTER, { sort: { 'triage.state': 1, createdAt: 1 }, projection: { createdAt: 1 } }),
  ]);
  return { count, oldestAt: oldest?.createdAt ?? null };
}

async function withAttempts(db: StoreDb, docs: readonly DeadLetterDoc[]): Promise<DeadLetter[]> {
  if (docs.length === 0) return [];
  const deliveryIds = [...new Set(docs.map((d) => d.deliveryId))];
  const all = await db.attempts.find({ deliveryId: { $in: deliveryIds } }).sort({ deliveryId: 1, round: 1, number: 1, _id: 1 }).toArray();
  return docs.map((doc) =>
    deadLetterFromDoc(
      doc,
      all.filter((a) => a.deliveryId === doc.deliveryId && a.round === doc.round),
    ),
  );
}
