/**
 * Claiming deliveries in MongoDB: which documents a claim goes for, marking
 * them in flight at their slot's epoch, and handing them back with their
 * events. No transaction: each delivery is claimed by its own conditional
 * update in one unordered bulk write, stamped with the claim's id, and the
 * lease epoch fences the rest.
 *
 * A claim the engine never receives must not stay in flight: its owner keeps
 * renewing the slot at the same epoch, so nobody would reclaim it until the
 * slot changed hands. So once the bulk write has run, anything that fails
 * gives the whole claim back (by its id, to pending, due as before), and a
 * give-back that fails too is kept in {@link UnsentClaims} and retried before
 * the next claim. A delivery the engine did receive is never given back by
 * age: it may wait in its endpoint's mailbox (up to a few times the
 * endpoint's concurrency, behind a rate limit or a breaker probe) for longer
 * than any request timeout, and giving it back at the same epoch would let
 * it be sent twice.
 */
import type { AnyBulkWriteOperation, ObjectId } from 'mongodb';
import { slotOf } from '../../ids.ts';
import type { DeliveryJob } from '../../model.ts';
import type { ClaimRequest, EndpointClaimRequest } from '../port.ts';
import type { StoreDb } from './collections.ts';
import { deliveryFromDoc, eventFromDoc } from './documents.ts';
import { newObjectId } from './driver.ts';
import {
  claimableHeads,
  contributingEndpoints,
  isFifo,
  keepLineHeads,
  LINE_HEAD_PROJECTION,
  LINE_ORDER,
  lineHeadFilter,
  linesOf,
  pendingLinesPipeline,
} from './line-heads.ts';
import type { Line, LineHead } from './line-heads.ts';
import {
  busyEndpointsPipeline,
  byDueThenId,
  CANDIDATE_PROJECTION,
  CLAIM_SCAN_MAX,
  claimableFilter,
  claimedFilter,
  claimOneFilter,
  claimUpdate,
  DUE_ORDER,
  dueCountFilter,
  endpointChosen,
  endpointDueFilter,
  endpointsWorthClaiming,
  giveBackFilter,
  giveBackUpdate,
  liveLeasesFilter,
  movedSlots,
  orphansFilter,
  pickClaims,
} from './queries.ts';
import type { ClaimCandidate, OwnedSlot } from './queries.ts';
import type { DeliveryDoc } from './schema.ts';

/**
 * The claims whose deliveries may still be in flight although the engine
 * never received them: a claim that failed after its bulk write.
 *
 *   (none) ──claim fails──► kept ──give-back succeeds at a later claim──► (none)
 *
 * A failed claim is given back at once and once more before the next claim:
 * a bulk write the driver reported failed may still be applied by the server
 * after the first give-back ran.
 */
export class UnsentClaims {
  readonly #ids = new Map<string, ObjectId>();

  get size(): number {
    return this.#ids.size;
  }

  /** Gives the claim back now (best effort) and remembers it for one more give-back. */
  async failed(db: StoreDb, claimId: ObjectId, now: number): Promise<void> {
    this.#ids.set(claimId.toHexString(), claimId);
    await giveBack(db, claimId, now).catch(() => undefined);
  }

  /** Gives back every kept claim; those whose give-back fails stay kept. */
  async retry(db: StoreDb, now: number): Promise<void> {
    for (const [key, claimId] of [...this.#ids]) {
      try {
        await giveBack(db, claimId, now);
        this.#ids.delete(key);
      } catch {
        // The server is still out of reach: the claim goes at a later call.
      }
    }
  }
}

async function giveBack({ deliveries }: StoreDb, claimId: ObjectId, now: number): Promise<void> {
  await deliveries.updateMany(giveBackFilter(claimId), giveBackUpdate(now));
}

/**
 * `limit` and `perEndpoint` are the request's, whole and at least 1.
 *
 * 1. The owner's live slots and their epochs.
 * 2. How many deliveries are pending and due, counted up to CLAIM_SCAN_MAX + 1
 *    (index `deliveries_next`). Then the candidates, the same ones either way:
 *    - by scan (at most CLAIM_SCAN_MAX due): every due delivery of the owned
 *      slots and every orphan, in one indexed query;
 *    - by endpoint (more): each owned slot's busy endpoints with their earliest
 *      pending time (a DISTINCT_SCAN per slot, {@link busyEndpointsPipeline}),
 *      then only the endpoints whose earliest is among the `limit` earliest
 *      each give their first `perEndpoint` due deliveries (indexed queries
 *      that stop at the limit, in parallel), and the orphans.
 *    Only enabled endpoints count; each gets at most `perEndpoint`, the
 *    earliest due overall go first, up to `limit` ({@link pickClaims}).
 *    A FIFO endpoint gives only the heads of its lines (see below).
 * 3. Claimed as {@link claimCandidates} claims.
 *
 * FIFO endpoints (`line-heads.ts`): a delivery of one is a candidate only as
 * the head of its line. Only they pay, and only what follows: the scan reads
 * its FIFO candidates' ordering keys (one query by `_id`) and each of their
 * lines' head (one seek of `deliveries_open_line` per line); the walk by
 * endpoint reads, for each busy FIFO endpoint of the owned slots, its lines
 * that have a pending delivery (a DISTINCT_SCAN, one seek per line) and each
 * one's head (one seek per line): so one index seek per line considered, per
 * claim, however long the lines. A FIFO endpoint whose heads are all held
 * (in flight, waiting for a retry) takes no place among the `limit` earliest.
 * The orphans of FIFO endpoints are kept only as heads too (an endpoint
 * switched to FIFO may have several in flight in a line).
 *
 * Why taking heads only stays safe without a transaction (each delivery is
 * claimed by its own conditional update, so the head read and the update are
 * apart):
 * - Only the slot's owner claims (leases, and the epoch fence on every claim
 *   and settle): no other process takes a delivery of the line meanwhile.
 * - A head stays the head while it is open: retried or released, it is
 *   pending again and still the earliest; so nothing after it is read as a
 *   head until it is delivered, dead or cancelled, and none of those goes
 *   back to open but a replay. So two claims of this process that read
 *   different heads of one line read them either side of the first one's
 *   closing, and the first one's conditional update (pending and due, or an
 *   orphan) then matches nothing: at most one delivery of a line is taken,
 *   and never one behind an open head.
 * - A later delivery of a line is never visible before an earlier one: fan-out
 *   numbers them in a transaction that writes the endpoint's counter, so two
 *   fan-outs to one endpoint conflict and commit one after the other, the
 *   lower numbers first.
 * The one way round it is a replay: a dead letter replayed re-enters its line
 * at its own (earlier) sequence, so if a later delivery of the line is in
 * flight then, two are (the SQL stores do the same).
 */
export async function claimDue(
  db: StoreDb,
  request: ClaimRequest,
  limit: number,
  perEndpoint: number,
  unsent: UnsentClaims,
): Promise<DeliveryJob[]> {
  const { owner, now } = request;
  await unsent.retry(db, now);
  const owned: OwnedSlot[] = (await db.leases.find(liveLeasesFilter(owner, now)).toArray()).map((l) => ({ slot: l._id, epoch: l.epoch }));
  if (owned.length === 0) return [];
  const due = await db.deliveries.countDocuments(dueCountFilter(now), { limit: CLAIM_SCAN_MAX + 1 });
  const candidates =
    due > CLAIM_SCAN_MAX
      ? await candidatesByEndpoint(db, request, owned, limit, perEndpoint)
      : await candidatesByScan(db, request, owned);
  return claimCandidates(db, pickClaims(candidates, perEndpoint, limit), owned, owner, now, unsent);
}

/** At most CLAIM_SCAN_MAX pending due deliveries exist: read them all, with the orphans. */
async function candidatesByScan(db: StoreDb, request: ClaimRequest, owned: readonly OwnedSlot[]): Promise<ClaimCandidate[]> {
  const docs = await db.deliveries.find(claimableFilter(owned, request), { projection: CANDIDATE_PROJECTION }).toArray();
  const { enabled, fifo } = await enabledAmong(db, docs.map((d) => d.endpointId));
  return headsAmong(
    db,
    docs.filter((d) => enabled.has(d.endpointId)).map(candidateOf),
    fifo,
  );
}

/** More are due: walk the busy endpoints and take the first few due of only those that can contribute. */
async function candidatesByEndpoint(
  db: StoreDb,
  request: ClaimRequest,
  owned: readonly OwnedSlot[],
  limit: number,
  perEndpoint: number,
): Promise<ClaimCandidate[]> {
  const { deliveries } = db;
  const { now } = request;
  const [busy, orphanDocs] = await Promise.all([
    Promise.all(
      owned.map(async ({ slot }) =>
        (await deliveries.aggregate<{ _id: string; first: number }>(busyEndpointsPipeline(slot)).toArray()).map((b) => ({
          endpointId: b._id,
          slot,
          first: b.first,
        })),
      ),
    ),
    deliveries.find(orphansFilter(owned), { projection: CANDIDATE_PROJECTION }).toArray(),
  ]);
  const dueEndpoints = busy.flat().filter((b) => b.first <= now && endpointChosen(request, b.endpointId));
  const orphans = orphanDocs.filter((d) => endpointChosen(request, d.endpointId));
  const { enabled, fifo } = await enabledAmong(db, [...dueEndpoints.map((b) => b.endpointId), ...orphans.map((d) => d.endpointId)]);
  const bySlot = new Map(owned.map((o) => [o.slot, o]));
  const eligible = dueEndpoints.filter((b) => enabled.has(b.endpointId) && bySlot.has(b.slot));
  // A FIFO endpoint's heads are read before the cut: its earliest due delivery may wait behind a
  // head in flight, and only its claimable heads say what it can contribute.
  const headsOf = new Map(
    await Promise.all(
      eligible
        .filter((b) => fifo.has(b.endpointId))
        .map(async (b) => [b.endpointId, await fifoFirstDue(db, b.endpointId, bySlot.get(b.slot)!, now, perEndpoint)] as const),
    ),
  );
  const worth = endpointsWorthClaiming(contributingEndpoints(eligible, headsOf), limit);
  const lists = await Promise.all(
    worth.map(async (w) => headsOf.get(w.endpointId) ?? firstDue(db, w.endpointId, bySlot.get(w.slot)!, now, perEndpoint)),
  );
  const orphanHeads = await headsAmong(
    db,
    orphans.filter((d) => enabled.has(d.endpointId)).map(candidateOf),
    fifo,
  );
  return [...lists.flat(), ...orphanHeads];
}

/**
 * `wanted` holds the endpoints to claim for, each with a limit of at least 1.
 * The owner's live leases among the endpoints' slots, the enabled endpoints
 * among them, each one's first `limit` pending due deliveries (indexed
 * queries that stop at the limit, in parallel; a FIFO endpoint's first `limit`
 * claimable heads); then claimed as `claimDue` claims.
 */
export async function claimForEndpoints(
  db: StoreDb,
  owner: string,
  now: number,
  wanted: EndpointClaimRequest['endpoints'],
  slotCount: number,
  unsent: UnsentClaims,
): Promise<DeliveryJob[]> {
  await unsent.retry(db, now);
  const slots = [...new Set(wanted.map((want) => slotOf(want.endpointId, slotCount)))];
  const owned = (await db.leases.find(liveLeasesFilter(owner, now, slots)).toArray()).map((l) => ({ slot: l._id, epoch: l.epoch }));
  if (owned.length === 0) return [];
  const bySlot = new Map(owned.map((o) => [o.slot, o]));
  const { enabled, fifo } = await enabledAmong(
    db,
    wanted.map((want) => want.endpointId),
  );
  const lists = await Promise.all(
    wanted.map(async ({ endpointId, limit }): Promise<ClaimCandidate[]> => {
      const slot = bySlot.get(slotOf(endpointId, slotCount));
      if (slot === undefined || !enabled.has(endpointId)) return [];
      const due = fifo.has(endpointId) ? fifoFirstDue : firstDue;
      return due(db, endpointId, slot, now, Math.floor(limit));
    }),
  );
  return claimCandidates(db, lists.flat(), owned, owner, now, unsent);
}

/** One endpoint's first `n` pending due deliveries: read in `deliveries_claim_walk`'s order, covered. */
async function firstDue(db: StoreDb, endpointId: string, slot: OwnedSlot, now: number, n: number): Promise<ClaimCandidate[]> {
  const docs = await db.deliveries
    .find(endpointDueFilter(endpointId, slot, now), { projection: CANDIDATE_PROJECTION })
    .sort(DUE_ORDER)
    .limit(n)
    .toArray();
  return docs.map(candidateOf);
}

/**
 * A FIFO endpoint's first `n` claimable heads, earliest due first: its lines that have a pending
 * delivery (one DISTINCT_SCAN seek each), then each line's head (one seek each), kept when pending,
 * due and in the slot ({@link claimableHeads}). Not its first `n` due deliveries: those may all wait
 * behind heads in flight and hide the heads of its other lines. Its cost follows the endpoint's
 * lines with pending deliveries, not their length.
 */
async function fifoFirstDue(db: StoreDb, endpointId: string, slot: OwnedSlot, now: number, n: number): Promise<ClaimCandidate[]> {
  const lines = await db.deliveries.aggregate<{ _id: string | null }>(pendingLinesPipeline(endpointId)).toArray();
  const heads = await readHeads(
    db,
    lines.map((l) => ({ endpointId, orderingKey: l._id ?? null })),
  );
  return claimableHeads(heads, slot, now, n);
}

/**
 * The candidates, those of FIFO endpoints kept only when they are their line's head: their ordering
 * keys read by `_id` (not in the covered candidate reads), then each line's head. Nothing is read
 * when no candidate is a FIFO endpoint's.
 */
async function headsAmong(db: StoreDb, candidates: ClaimCandidate[], fifo: ReadonlySet<string>): Promise<ClaimCandidate[]> {
  const ofFifo = candidates.filter((c) => fifo.has(c.endpointId));
  if (ofFifo.length === 0) return candidates;
  const keyed = await db.deliveries
    .find({ _id: { $in: ofFifo.map((c) => c._id) } }, { projection: { _id: 1, endpointId: 1, orderingKey: 1 } })
    .toArray();
  const heads = await readHeads(db, linesOf(keyed));
  return keepLineHeads(candidates, fifo, new Set(heads.flatMap((head) => (head === null ? [] : [head._id]))));
}

/** Each line's head (null for a line with nothing open), one seek each, in parallel. */
async function readHeads({ deliveries }: StoreDb, lines: readonly Line[]): Promise<(LineHead | null)[]> {
  return Promise.all(
    lines.map((line) => deliveries.findOne<LineHead>(lineHeadFilter(line), { sort: LINE_ORDER, projection: LINE_HEAD_PROJECTION })),
  );
}

/** Which of the endpoints are enabled, and which of those are FIFO (`ordering` missing: none). */
async function enabledAmong({ endpoints }: StoreDb, ids: readonly string[]): Promise<{ enabled: Set<string>; fifo: Set<string> }> {
  const unique = [...new Set(ids)];
  if (unique.length === 0) return { enabled: new Set(), fifo: new Set() };
  const found = await endpoints.find({ _id: { $in: unique }, status: 'enabled' }, { projection: { _id: 1, ordering: 1 } }).toArray();
  return { enabled: new Set(found.map((e) => e._id)), fifo: new Set(found.filter(isFifo).map((e) => e._id)) };
}

function candidateOf(d: Pick<DeliveryDoc, '_id' | 'endpointId' | 'slot' | 'nextAttemptAt'> & Partial<Pick<DeliveryDoc, 'status'>>): ClaimCandidate {
  const candidate = { _id: d._id, endpointId: d.endpointId, slot: d.slot, nextAttemptAt: d.nextAttemptAt };
  // In flight: an orphan under an older epoch (the claim filters say so), to be taken over.
  return d.status === 'in_flight' ? { ...candidate, resumed: true } : candidate;
}

/**
 * One unordered bulk of conditional updates claims the candidates, each
 * stamped with this claim's id. Then the leases of the slots used are read
 * again: what the claim took in a slot that moved on meanwhile (another
 * owner, a new epoch) goes back at once, so a stale owner does not send what
 * the slot's new owner will. Reading the id back gives what was won and is
 * still in flight under it. Any failure from the bulk write on gives the
 * whole claim back (see {@link UnsentClaims}).
 */
async function claimCandidates(
  db: StoreDb,
  candidates: readonly ClaimCandidate[],
  owned: readonly OwnedSlot[],
  owner: string,
  now: number,
  unsent: UnsentClaims,
): Promise<DeliveryJob[]> {
  if (candidates.length === 0) return [];
  // The claimed documents no longer show it: what was in flight is known from the candidates.
  const takenOver = new Set(candidates.filter((c) => c.resumed === true).map((c) => c._id));
  const bySlot = new Map(owned.map((o) => [o.slot, o]));
  const claimId = newObjectId();
  const ops: AnyBulkWriteOperation<DeliveryDoc>[] = [];
  const used = new Map<number, OwnedSlot>();
  for (const candidate of candidates) {
    const slot = bySlot.get(candidate.slot);
    if (slot === undefined) continue;
    used.set(slot.slot, slot);
    ops.push({ updateOne: { filter: claimOneFilter(candidate, slot, now), update: claimUpdate(slot.epoch, now, claimId) } });
  }
  if (ops.length === 0) return [];
  try {
    return await takeClaim(db, claimId, ops, [...used.values()], owner, now, takenOver);
  } catch (error) {
    await unsent.failed(db, claimId, now);
    throw error;
  }
}

async function takeClaim(
  db: StoreDb,
  claimId: ObjectId,
  ops: AnyBulkWriteOperation<DeliveryDoc>[],
  used: readonly OwnedSlot[],
  owner: string,
  now: number,
  takenOver: ReadonlySet<string>,
): Promise<DeliveryJob[]> {
  const { deliveries, events, leases } = db;
  const written = await deliveries.bulkWrite(ops, { ordered: false });
  if (written.modifiedCount === 0) return [];
  const current = await leases
    .find({ _id: { $in: used.map((u) => u.slot) } }, { projection: { _id: 1, owner: 1, epoch: 1 } })
    .toArray();
  const moved = movedSlots(used, current, owner);
  if (moved.length > 0) await deliveries.updateMany(giveBackFilter(claimId, moved), giveBackUpdate(now));
  const won = (await deliveries.find(claimedFilter(claimId)).toArray()).sort(byDueThenId);
  if (won.length === 0) return [];

  const eventIds = [...new Set(won.map((d) => d.eventId))];
  const found = new Map((await events.find({ _id: { $in: eventIds } }).toArray()).map((e) => [e._id, eventFromDoc(e)]));
  const jobs: DeliveryJob[] = [];
  for (const doc of won) {
    const event = found.get(doc.eventId);
    if (event === undefined) {
      // A claimed delivery whose event is gone (deleted by hand) can never be sent.
      await deliveries.updateOne(
        { _id: doc._id, claimId },
        { $set: { status: 'cancelled', lastError: 'event missing', updatedAt: now }, $unset: { claimId: '' } },
      );
      continue;
    }
    jobs.push(takenOver.has(doc._id) ? { delivery: deliveryFromDoc(doc), event, resumed: true } : { delivery: deliveryFromDoc(doc), event });
  }
  return jobs;
}
