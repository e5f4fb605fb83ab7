/**
 * The query and update documents of the MongoDB store, as pure functions of
 * their inputs, so each one is unit-tested without a server. The store only
 * sends them. Those of dead letters and failure groups are in
 * `dead-letter-queries.ts`.
 *
 * Fencing, as in SQLite: a settle applies only while the delivery is in
 * flight at the epoch it was claimed with AND that epoch is still the slot's
 * current one ({@link isCurrentClaim}), checked inside the settle's
 * transaction, the update itself conditional on the first half
 * ({@link settleFilter}).
 */
import type { Document, Filter, ObjectId, UpdateFilter } from 'mongodb';
import { failureKind } from '../../policy/failure-kind.ts';
import type { DeliveryStatus } from '../../model.ts';
import type { AttemptRecord, ClaimRequest, DeliveryFilter, EndpointPatch, Settlement } from '../port.ts';
import { authToDoc, clientTlsCopy, headersToDoc } from './documents.ts';
import type { DeliveryDoc, EndpointDoc, LeaseDoc } from './schema.ts';
import { secretDoc } from './documents.ts';


/** A slot the claimer holds, with the lease epoch its claims carry. */
export interface OwnedSlot {
  readonly slot: number;
  readonly epoch: number;
}

/** One claimable delivery, as the candidate queries return it. */
export interface ClaimCandidate {
  readonly _id: string;
  readonly endpointId: string;
  readonly slot: number;
  readonly nextAttemptAt: number;
  /** In flight under an older epoch: claiming it takes it over (`DeliveryJob.resumed`). */
  readonly resumed?: true;
}

// Leases

/** The owner's leases that are still live at `now`. */
export function liveLeasesFilter(owner: string, now: number, slots?: readonly number[]): Filter<LeaseDoc> {
  return { owner, until: { $gt: now }, ...(slots === undefined ? {} : { _id: { $in: [...slots] } }) };
}

/** Step 1 of acquiring: the owner renews its own leases, live or lapsed, keeping their epochs. */
export function renewLeasesFilter(owner: string, slots: readonly number[]): Filter<LeaseDoc> {
  return { _id: { $in: [...slots] }, owner };
}

export function renewLeasesUpdate(until: number): UpdateFilter<LeaseDoc> {
  return { $set: { until } };
}

/**
 * Step 2, per slot: take it when free (released, whoever had it) or expired
 * and someone else's, incrementing the epoch (the rule in `../port.ts`); a
 * slot never leased is inserted at epoch 1 (`$inc` on a missing field). When the slot is live and someone else's (or
 * already the owner's), the filter matches nothing and the upsert fails with a
 * duplicate `_id`, which means "not taken".
 */
export function takeLeaseFilter(owner: string, slot: number, now: number): Filter<LeaseDoc> {
  return { _id: slot, owner: { $ne: owner }, $or: [{ owner: null }, { until: { $lte: now } }] };
}

export function takeLeaseUpdate(owner: string, until: number): UpdateFilter<LeaseDoc> {
  return { $set: { owner, until }, $inc: { epoch: 1 } };
}

export function releaseLeasesFilter(owner: string, slots: readonly number[]): Filter<LeaseDoc> {
  return { _id: { $in: [...slots] }, owner };
}

export const RELEASE_LEASES_UPDATE: UpdateFilter<LeaseDoc> = Object.freeze({ $set: { owner: null, until: 0 } });

// Claims

/**
 * Deliveries a claim may take, in the owner's live slots: pending and due, or
 * in flight under an epoch older than the slot's (their claimer crashed or
 * lost the slot). Slots sharing an epoch share one `$in`.
 */
export function claimableFilter(owned: readonly OwnedSlot[], request: ClaimRequest): Filter<DeliveryDoc> {
  const slots = owned.map((o) => o.slot);
  const orphans = orphanBranches(owned);
  const endpoint: Filter<DeliveryDoc> =
    request.endpointId !== undefined
      ? { endpointId: request.skipEndpointIds.includes(request.endpointId) ? { $in: [] } : request.endpointId }
      : request.skipEndpointIds.length > 0
        ? { endpointId: { $nin: [...request.skipEndpointIds] } }
        : {};
  return {
    ...endpoint,
    $or: [{ status: 'pending', slot: { $in: slots }, nextAttemptAt: { $lte: request.now } }, ...orphans],
  };
}

/** The claimable deliveries of one endpoint in one slot (an endpoint lives in exactly one slot). */
export function endpointClaimableFilter(endpointId: string, owned: OwnedSlot, now: number): Filter<DeliveryDoc> {
  return {
    endpointId,
    slot: owned.slot,
    $or: [
      { status: 'pending', nextAttemptAt: { $lte: now } },
      { status: 'in_flight', leaseEpoch: { $lt: owned.epoch } },
    ],
  };
}

/** The pending due deliveries of one endpoint in one slot (what a refill claims). */
export function endpointDueFilter(endpointId: string, owned: OwnedSlot, now: number): Filter<DeliveryDoc> {
  return { endpointId, slot: owned.slot, status: 'pending', nextAttemptAt: { $lte: now } };
}

/** The claim of one candidate, conditional on it still being claimable. */
export function claimOneFilter(candidate: ClaimCandidate, owned: OwnedSlot, now: number): Filter<DeliveryDoc> {
  return { _id: candidate._id, ...endpointClaimableFilter(candidate.endpointId, owned, now) };
}

export function claimUpdate(epoch: number, now: number, claimId: ObjectId): UpdateFilter<DeliveryDoc> {
  return { $set: { status: 'in_flight', leaseEpoch: epoch, updatedAt: now, claimId } };
}

/**
 * `claimDue` reads every due candidate at once while at most this many deliveries are pending and
 * due (counted with {@link dueCountFilter}), else it walks the busy endpoints of each owned slot
 * ({@link busyEndpointsPipeline}): as the SQLite and PostgreSQL stores do, so a claim's cost never
 * follows the whole backlog.
 */
export const CLAIM_SCAN_MAX = 1_000;

/** Pending due deliveries, all slots (index `deliveries_next`), counted up to CLAIM_SCAN_MAX + 1. */
export function dueCountFilter(now: number): Filter<DeliveryDoc> {
  return { status: 'pending', nextAttemptAt: { $lte: now } };
}

/** What a candidate query reads: every field is in `deliveries_claim_walk`, so no document is fetched. */
export const CANDIDATE_PROJECTION = Object.freeze({ _id: 1, endpointId: 1, slot: 1, nextAttemptAt: 1, status: 1 } as const);

/**
 * Earliest due first, ties by id: the order of `deliveries_claim_walk` ({status, slot, endpointId,
 * nextAttemptAt, _id}) under an equality on its first three fields, so an endpoint's first few due
 * deliveries are read in index order and the limit stops the scan.
 */
export const DUE_ORDER = Object.freeze({ nextAttemptAt: 1, _id: 1 } as const);

/** Whether the request lets a claim take this endpoint's deliveries (its skip list, its chosen endpoint). */
export function endpointChosen(request: Pick<ClaimRequest, 'skipEndpointIds' | 'endpointId'>, endpointId: string): boolean {
  if (request.skipEndpointIds.includes(endpointId)) return false;
  return request.endpointId === undefined || request.endpointId === endpointId;
}

/**
 * Step 1 of a claim by endpoint, once per owned slot: each endpoint with pending deliveries in the
 * slot and its earliest `nextAttemptAt` (due when it is at or before now). Equality on `status` and
 * `slot`, then `$sort` on `deliveries_claim_walk`'s key and `$group` by `endpointId` with `$first`
 * only: the shape the server runs as a DISTINCT_SCAN, one index seek per busy endpoint.
 */
export function busyEndpointsPipeline(slot: number): Document[] {
  return [
    { $match: { status: 'pending', slot } },
    { $sort: { status: 1, slot: 1, endpointId: 1, nextAttemptAt: 1 } },
    { $group: { _id: '$endpointId', first: { $first: '$nextAttemptAt' } } },
  ];
}

/** In flight under an epoch older than their slot's, in the owned slots (index `deliveries_in_flight`). */
export function orphansFilter(owned: readonly OwnedSlot[]): Filter<DeliveryDoc> {
  const branches = orphanBranches(owned);
  return branches.length === 1 ? branches[0]! : { $or: branches };
}

/** One branch per epoch among the owned slots: slots sharing an epoch share one `$in`. */
function orphanBranches(owned: readonly OwnedSlot[]): Filter<DeliveryDoc>[] {
  const byEpoch = new Map<number, number[]>();
  for (const { slot, epoch } of owned) byEpoch.set(epoch, [...(byEpoch.get(epoch) ?? []), slot]);
  return [...byEpoch].map(([epoch, inSlots]) => ({ status: 'in_flight', slot: { $in: inSlots }, leaseEpoch: { $lt: epoch } }));
}

/** What one claim won and still holds: in flight under its id (one cancelled in between is not sent). */
export function claimedFilter(claimId: ObjectId): Filter<DeliveryDoc> {
  return { claimId, status: 'in_flight' };
}

/** The deliveries of a claim that are given back (all of it, or those in `slots`), if still in flight under it. */
export function giveBackFilter(claimId: ObjectId, slots?: readonly number[]): Filter<DeliveryDoc> {
  return { claimId, status: 'in_flight', ...(slots === undefined ? {} : { slot: { $in: [...slots] } }) };
}

/** Back to pending, due as before; the claim's id goes (the sparse index holds only live claims). */
export function giveBackUpdate(now: number): UpdateFilter<DeliveryDoc> {
  return { $set: { status: 'pending', updatedAt: now }, $unset: { claimId: '' } };
}

/**
 * The slots a claim used whose lease moved on after it was read: another owner, released, or
 * retaken at another epoch. What the claim took there goes back ({@link giveBackFilter}).
 */
export function movedSlots(
  owned: readonly OwnedSlot[],
  current: readonly Pick<LeaseDoc, '_id' | 'owner' | 'epoch'>[],
  owner: string,
): number[] {
  const bySlot = new Map(current.map((lease) => [lease._id, lease]));
  return owned
    .filter(({ slot, epoch }) => {
      const lease = bySlot.get(slot);
      return lease === undefined || lease.owner !== owner || lease.epoch !== epoch;
    })
    .map(({ slot }) => slot);
}

/**
 * Picks what one claim takes: at most `perEndpoint` per endpoint (each
 * endpoint's earliest due), then the earliest due overall up to `limit`, ties
 * by id. Returns them in that order.
 */
export function pickClaims(candidates: readonly ClaimCandidate[], perEndpoint: number, limit: number): ClaimCandidate[] {
  const sorted = [...candidates].sort(byDueThenId);
  const taken = new Map<string, number>();
  const picked: ClaimCandidate[] = [];
  const seen = new Set<string>();
  for (const candidate of sorted) {
    if (picked.length >= limit) break;
    if (seen.has(candidate._id)) continue;
    const count = taken.get(candidate.endpointId) ?? 0;
    if (count >= perEndpoint) continue;
    taken.set(candidate.endpointId, count + 1);
    seen.add(candidate._id);
    picked.push(candidate);
  }
  return picked;
}

/**
 * Of the busy endpoints (each with its earliest due time), those that can
 * contribute to a claim of `limit`: an endpoint whose earliest delivery is not
 * among the `limit` earliest endpoint-firsts cannot, since at least `limit`
 * deliveries of other endpoints come before any of its own.
 */
export function endpointsWorthClaiming<T extends { readonly first: number; readonly endpointId: string }>(
  busy: readonly T[],
  limit: number,
): T[] {
  return [...busy].sort((a, b) => a.first - b.first || compareText(a.endpointId, b.endpointId)).slice(0, Math.max(0, limit));
}

export function byDueThenId(a: { nextAttemptAt: number; _id: string }, b: { nextAttemptAt: number; _id: string }): number {
  return a.nextAttemptAt - b.nextAttemptAt || compareText(a._id, b._id);
}

// Settles

/** The first half of the fence: the delivery is still in flight at the claim's epoch. */
export function settleFilter(settlement: Settlement): Filter<DeliveryDoc> {
  return { _id: settlement.deliveryId, status: 'in_flight', leaseEpoch: settlement.epoch };
}

/** The whole fence (`../port.ts`, rule 5), on documents read inside the settle's transaction. */
export function isCurrentClaim(
  delivery: Pick<DeliveryDoc, 'status' | 'leaseEpoch' | 'slot'> | undefined,
  lease: Pick<LeaseDoc, '_id' | 'epoch'> | undefined,
  epoch: number,
): boolean {
  return (
    delivery !== undefined &&
    delivery.status === 'in_flight' &&
    delivery.leaseEpoch === epoch &&
    lease !== undefined &&
    lease._id === delivery.slot &&
    lease.epoch === epoch
  );
}

/** The delivery's new state for each kind of settlement. An attempt is counted except on release. */
export function settleUpdate(settlement: Settlement, now: number): UpdateFilter<DeliveryDoc> {
  // The claim's id goes with the claim: the sparse index `deliveries_claim` holds only deliveries in flight.
  const unset = { claimId: '' } as const;
  switch (settlement.kind) {
    case 'delivered':
      return {
        $set: {
          status: 'delivered',
          lastError: settlement.attempt.error,
          deliveredAt: now,
          updatedAt: now,
          lastFailureKind: null,
          lastFailureAt: null,
        },
        $inc: { attempts: 1 },
        $unset: unset,
      };
    case 'retry':
      return {
        $set: { status: 'pending', nextAttemptAt: settlement.nextAttemptAt, ...failedSet(settlement.attempt, now) },
        $inc: { attempts: 1 },
        $unset: unset,
      };
    case 'dead':
      return { $set: { status: 'dead', ...failedSet(settlement.attempt, now) }, $inc: { attempts: 1 }, $unset: unset };
    case 'release':
      return { $set: { status: 'pending', nextAttemptAt: settlement.nextAttemptAt, updatedAt: now }, $unset: unset };
  }
}

/** What a failed attempt writes on its delivery, retried or dead: its error, and its failure kind and when. */
function failedSet(attempt: AttemptRecord, now: number): Partial<DeliveryDoc> {
  return { lastError: attempt.error, updatedAt: now, lastFailureKind: failureKind(attempt.outcome), lastFailureAt: now };
}

/** A success ends the endpoint's run of failures. */
export function clearFailingFilter(endpointId: string): Filter<EndpointDoc> {
  return { _id: endpointId, failingSince: { $ne: null } };
}

export const CLEAR_FAILING_UPDATE: UpdateFilter<EndpointDoc> = Object.freeze({ $set: { failingSince: null } });

/** A failure starts a run of failures unless one is already running. */
export function markFailingFilter(endpointId: string): Filter<EndpointDoc> {
  return { _id: endpointId, failingSince: null };
}

export function markFailingUpdate(since: number): UpdateFilter<EndpointDoc> {
  return { $set: { failingSince: since } };
}

// Endpoints

/** `$set` of the fields the patch gives (undefined ones are left alone) and `updatedAt`. */
export function endpointPatchUpdate(patch: EndpointPatch, now: number): UpdateFilter<EndpointDoc> {
  const set: Partial<EndpointDoc> = { updatedAt: now };
  if (patch.url !== undefined) set.url = patch.url;
  if (patch.description !== undefined) set.description = patch.description;
  if (patch.eventTypes !== undefined) set.eventTypes = [...patch.eventTypes];
  if (patch.retry !== undefined) set.retry = structuredClone(patch.retry);
  if (patch.timeoutMs !== undefined) set.timeoutMs = patch.timeoutMs;
  if (patch.mode !== undefined) set.mode = patch.mode;
  if (patch.ordering !== undefined) set.ordering = patch.ordering;
  if (patch.concurrency !== undefined) set.concurrency = patch.concurrency;
  if (patch.rateLimit !== undefined) {
    set.rateLimit = patch.rateLimit === null ? null : { perSecond: patch.rateLimit.perSecond, burst: patch.rateLimit.burst };
  }
  if (patch.adaptiveConcurrency !== undefined) {
    set.adaptiveConcurrency =
      patch.adaptiveConcurrency === null
        ? null
        : { initial: patch.adaptiveConcurrency.initial, targetLatencyMs: patch.adaptiveConcurrency.targetLatencyMs };
  }
  if (patch.filter !== undefined) set.payloadFilter = patch.filter === null ? null : JSON.stringify(patch.filter);
  if (patch.headers !== undefined) set.headers = headersToDoc(patch.headers);
  if (patch.auth !== undefined) set.auth = authToDoc(patch.auth);
  if (patch.clientTls !== undefined) set.clientTls = patch.clientTls === null ? null : clientTlsCopy(patch.clientTls);
  if (patch.status !== undefined) set.status = patch.status;
  if (patch.disabledReason !== undefined) set.disabledReason = patch.disabledReason;
  if (patch.failingSince !== undefined) set.failingSince = patch.failingSince;
  if (patch.secrets !== undefined) {
    set.secrets = patch.secrets.map(secretDoc);
  }
  return { $set: set };
}

/**
 * The precondition of a patch with `expectedCredentials`: the stored headers and auth are those,
 * matched whole (each written by `headersToDoc`/`authToDoc`, fields always in one order; a `null`
 * also matches a document written before they existed).
 */
export function credentialsFilter(expected: NonNullable<EndpointPatch['expectedCredentials']>): Filter<EndpointDoc> {
  return { headers: headersToDoc(expected.headers ?? null), auth: authToDoc(expected.auth ?? null) };
}

/** Deleting an endpoint cancels what it had not delivered yet. */
export function cancelDeliveriesFilter(endpointId: string): Filter<DeliveryDoc> {
  return { endpointId, status: { $in: ['pending', 'in_flight'] } };
}

/** One chunk of a deleted endpoint's cancellation: these ids, if still unfinished. */
export function cancelChunkFilter(ids: readonly string[]): Filter<DeliveryDoc> {
  return { _id: { $in: [...ids] }, status: { $in: ['pending', 'in_flight'] } };
}

export function cancelDeliveriesUpdate(now: number): UpdateFilter<DeliveryDoc> {
  return { $set: { status: 'cancelled', updatedAt: now }, $unset: { claimId: '' } };
}

/** On re-enable: pending deliveries waiting for later become due now (earlier ones are left alone). */
export function resumeDeliveriesFilter(endpointId: string, now: number): Filter<DeliveryDoc> {
  return { endpointId, status: 'pending', nextAttemptAt: { $gt: now } };
}

export function resumeDeliveriesUpdate(now: number): UpdateFilter<DeliveryDoc> {
  return { $set: { nextAttemptAt: now, updatedAt: now, wokeAt: now } };
}

// Listings

/** `listDeliveries`: each filter field that is set, and the `after` cursor (older than it, ties by id). */
export function deliveryListFilter(filter: DeliveryFilter): Filter<DeliveryDoc> {
  const query: Filter<DeliveryDoc> = {};
  if (filter.endpointId !== undefined) query.endpointId = filter.endpointId;
  if (filter.tenantId !== undefined) query.tenantId = filter.tenantId;
  if (filter.eventId !== undefined) query.eventId = filter.eventId;
  if (filter.status !== undefined) query.status = filter.status;
  if (filter.eventType !== undefined) query.eventType = filter.eventType;
  const createdAt = rangeOf(filter.since, filter.until);
  if (createdAt !== undefined) query.createdAt = createdAt;
  if (filter.after !== undefined) {
    query.$or = [
      { createdAt: { $lt: filter.after.createdAt } },
      { createdAt: filter.after.createdAt, _id: { $lt: filter.after.id } },
    ];
  }
  return query;
}

/** Newest first, ties by id descending. */
export const DELIVERY_LIST_SORT = Object.freeze({ createdAt: -1, _id: -1 } as const);

// Retention

/**
 * Deliveries that keep an event from being purged: any not finished, or
 * finished at or after the horizon.
 */
export function unfinishedDeliveriesFilter(eventIds: readonly string[], before: number): Filter<DeliveryDoc> {
  return {
    eventId: { $in: [...eventIds] },
    $or: [{ status: { $nin: ['delivered', 'dead', 'cancelled'] } }, { updatedAt: { $gte: before } }],
  };
}

// Helpers

/**
 * A document as `update` leaves it, for the flat `$set`, `$inc` and `$unset` updates the store
 * builds: a settle works out in memory what its one bulk write will make of each delivery it read.
 */
export function applyUpdate<T extends object>(doc: T, update: UpdateFilter<T>): T {
  const next = { ...doc } as Record<string, unknown>;
  for (const [field, value] of Object.entries((update.$set ?? {}) as Record<string, unknown>)) next[field] = value;
  for (const [field, by] of Object.entries((update.$inc ?? {}) as Record<string, number>)) next[field] = ((next[field] as number | undefined) ?? 0) + by;
  for (const field of Object.keys((update.$unset ?? {}) as Record<string, unknown>)) delete next[field];
  return next as T;
}


/** Binary order of ids, as MongoDB's simple collation compares them (ids are ASCII). */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One status's deliveries, counted on an index that leads with `status` (`deliveries_next`). */
export function statusCountFilter(status: DeliveryStatus): Filter<DeliveryDoc> {
  return { status };
}

/** A zero for every status, then the counts found. */
export function countsByStatus(
  statuses: readonly DeliveryStatus[],
  found: readonly { readonly _id: unknown; readonly n: number }[],
): Record<DeliveryStatus, number> {
  const counts = Object.fromEntries(statuses.map((status) => [status, 0])) as Record<DeliveryStatus, number>;
  for (const { _id, n } of found) {
    if (typeof _id === 'string' && _id in counts) counts[_id as DeliveryStatus] = n;
  }
  return counts;
}

/** A `createdAt` range: at or after `since`, before `until`, either one open. */
export function rangeOf(since: number | undefined, until: number | undefined): { $gte?: number; $lt?: number } | undefined {
  if (since === undefined && until === undefined) return undefined;
  return { ...(since === undefined ? {} : { $gte: since }), ...(until === undefined ? {} : { $lt: until }) };
}

/**
 * The slots worth an attempt to take, from the lease documents read just
 * before: never leased, released, or expired and someone else's. Slots the
 * owner holds are renewed separately; live leases of others are left alone.
 * The take itself stays conditional ({@link takeLeaseFilter}), so a race
 * with another process costs nothing but a refused upsert.
 */
export function slotsToTake(
  slots: readonly number[],
  current: readonly Pick<LeaseDoc, '_id' | 'owner' | 'until'>[],
  owner: string,
  now: number,
): number[] {
  const bySlot = new Map(current.map((lease) => [lease._id, lease]));
  return [...new Set(slots)].filter((slot) => {
    const lease = bySlot.get(slot);
    if (lease === undefined) return true;
    if (lease.owner === owner) return false;
    return lease.owner === null || lease.until <= now;
  });
}
