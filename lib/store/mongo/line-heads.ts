/**
 * FIFO endpoints in MongoDB: the lines (endpoint, ordering key) and their
 * heads, as pure functions of their inputs — the query documents the claims
 * and the fan-out send, and the decisions they make on what comes back — so
 * each one is unit-tested without a server.
 *
 * A line's head is its earliest open (pending or in flight) delivery in
 * `deliveries_open_line`'s order: sequence (missing first: deliveries written
 * before numbering sort lowest, as SQL's NULLS FIRST), then creation, then id.
 * A delivery of a FIFO endpoint may be claimed only as the head of its line,
 * so a line never has two in flight, and a head in flight or waiting for a
 * retry holds the line. A missing or null ordering key is the endpoint's
 * default line (`orderingKey: null` in a filter matches both).
 */
import type { Document, Filter } from 'mongodb';
import { EndpointOrdering } from '../../model.ts';
import type { NewDelivery } from '../port.ts';
import { byDueThenId } from './queries.ts';
import type { ClaimCandidate, OwnedSlot } from './queries.ts';
import type { DeliveryDoc, EndpointDoc } from './schema.ts';

/** One line of a FIFO endpoint: `orderingKey` null for the default line. */
export interface Line {
  readonly endpointId: string;
  readonly orderingKey: string | null;
}

/** A line's head as {@link lineHeadFilter} reads it. */
export type LineHead = Pick<DeliveryDoc, '_id' | 'endpointId' | 'slot' | 'status' | 'nextAttemptAt'>;

/** The statuses that keep a delivery in its line. */
export const OPEN_STATUSES = Object.freeze(['pending', 'in_flight'] as const);

/** Whether the endpoint document says FIFO (a missing `ordering` is `none`). */
export function isFifo(endpoint: Pick<EndpointDoc, 'ordering'>): boolean {
  return endpoint.ordering === EndpointOrdering.FIFO;
}

/** The line a delivery (or a planned one) belongs to. */
export function lineOf(d: { readonly endpointId: string; readonly orderingKey?: string | null | undefined }): Line {
  return { endpointId: d.endpointId, orderingKey: d.orderingKey ?? null };
}

/** A map key for a line: the pair as JSON, so no key can be mistaken for another's. */
export function lineKey(line: Line): string {
  return JSON.stringify([line.endpointId, line.orderingKey]);
}

/** The distinct lines of `docs`, in the order first seen. */
export function linesOf(docs: readonly { readonly endpointId: string; readonly orderingKey?: string | null | undefined }[]): Line[] {
  const lines = new Map<string, Line>();
  for (const doc of docs) {
    const line = lineOf(doc);
    const key = lineKey(line);
    if (!lines.has(key)) lines.set(key, line);
  }
  return [...lines.values()];
}

/**
 * A line's open deliveries; with {@link LINE_ORDER} and a limit of 1, its head. On
 * `deliveries_open_line` ({endpointId, status, orderingKey, sequence, createdAt, _id}) the `$in`
 * on `status` gives two ranges (four for the default line: null and missing are two index keys),
 * each already in the sort's order, which the server merges (SORT_MERGE): one seek per range and
 * the limit stops it, however long the line.
 */
export function lineHeadFilter(line: Line): Filter<DeliveryDoc> {
  return { endpointId: line.endpointId, status: { $in: [...OPEN_STATUSES] }, orderingKey: line.orderingKey };
}

/** A line's order: sequence (missing first), then creation, then id. */
export const LINE_ORDER = Object.freeze({ sequence: 1, createdAt: 1, _id: 1 } as const);

/** What a head read takes: enough to tell whether a claim may take it, and the candidate it makes. */
export const LINE_HEAD_PROJECTION = Object.freeze({ _id: 1, endpointId: 1, slot: 1, status: 1, nextAttemptAt: 1 } as const);

/**
 * The lines of one endpoint that have a pending delivery. Equality on the first two fields of
 * `deliveries_open_line`, `$sort` on its key and `$group` by `orderingKey` with no accumulator: the
 * shape the server runs as a DISTINCT_SCAN (as `busyEndpointsPipeline` in queries.ts), one index seek per
 * such line, never a walk of a line's backlog. The slot is not matched (no index field, it would
 * take the DISTINCT_SCAN away): an endpoint lives in one slot, checked on the heads.
 */
export function pendingLinesPipeline(endpointId: string): Document[] {
  return [
    { $match: { endpointId, status: 'pending' } },
    { $sort: { endpointId: 1, status: 1, orderingKey: 1 } },
    { $group: { _id: '$orderingKey' } },
  ];
}

/**
 * Of the heads read for one endpoint's lines, those a claim may take: pending, due, in the owned
 * slot (a head in flight, or waiting for a retry, holds its line); the earliest due first, ties by
 * id, at most `n`. One per line, since a line has one head.
 */
export function claimableHeads(heads: readonly (LineHead | null)[], owned: OwnedSlot, now: number, n: number): ClaimCandidate[] {
  const seen = new Set<string>();
  const claimable: ClaimCandidate[] = [];
  for (const head of heads) {
    if (head === null || seen.has(head._id)) continue;
    if (head.status !== 'pending' || head.nextAttemptAt > now || head.slot !== owned.slot) continue;
    seen.add(head._id);
    claimable.push({ _id: head._id, endpointId: head.endpointId, slot: head.slot, nextAttemptAt: head.nextAttemptAt });
  }
  return claimable.sort(byDueThenId).slice(0, Math.max(0, n));
}

/**
 * The candidates a claim may take: every one of an endpoint not in `fifo`, and of a FIFO endpoint
 * only those that are their line's head (`heads`, the ids read with {@link lineHeadFilter}).
 */
export function keepLineHeads<T extends { readonly _id: string; readonly endpointId: string }>(
  candidates: readonly T[],
  fifo: ReadonlySet<string>,
  heads: ReadonlySet<string>,
): T[] {
  return candidates.filter((c) => !fifo.has(c.endpointId) || heads.has(c._id));
}

/**
 * Fan-out: which of the new deliveries named for claiming may go in in flight. Those of an endpoint
 * not in `fifo`, all; of a FIFO endpoint, only the first new delivery of its line in `fresh` (which
 * is the numbering order, so the lowest sequence), and only when the line had no open delivery
 * (`openLines`, {@link lineKey}s read in the fan-out's transaction): a new delivery is last in its
 * line, so it is the head only of an empty one.
 */
export function mayGoInFlight(
  fresh: readonly Pick<NewDelivery, 'id' | 'endpointId' | 'orderingKey'>[],
  toClaim: ReadonlySet<string>,
  fifo: ReadonlySet<string>,
  openLines: ReadonlySet<string>,
): Set<string> {
  const allowed = new Set<string>();
  const started = new Set<string>();
  for (const d of fresh) {
    if (!fifo.has(d.endpointId)) {
      if (toClaim.has(d.id)) allowed.add(d.id);
      continue;
    }
    const key = lineKey(lineOf(d));
    const first = !started.has(key);
    started.add(key);
    if (first && !openLines.has(key) && toClaim.has(d.id)) allowed.add(d.id);
  }
  return allowed;
}

/**
 * A claim by endpoint cuts the busy endpoints to those whose earliest due delivery is among the
 * `limit` earliest (`endpointsWorthClaiming`). For a FIFO endpoint (one in `headsOf`, with its
 * claimable heads, earliest first) the earliest that counts is its first claimable head's, and an
 * endpoint with none drops out: otherwise endpoints whose lines are all held could fill the cut and
 * keep the others' due deliveries out of every claim.
 */
export function contributingEndpoints<T extends { readonly endpointId: string; readonly first: number }>(
  busy: readonly T[],
  headsOf: ReadonlyMap<string, readonly Pick<ClaimCandidate, 'nextAttemptAt'>[]>,
): T[] {
  return busy.flatMap((b) => {
    const heads = headsOf.get(b.endpointId);
    if (heads === undefined) return [b];
    const [first] = heads;
    return first === undefined ? [] : [{ ...b, first: first.nextAttemptAt }];
  });
}
