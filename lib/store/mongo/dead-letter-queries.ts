/**
 * The query and update documents of dead letters in the MongoDB store (listing, replay, triage)
 * and of failures grouped by endpoint and kind, as pure functions of their inputs, so each one is
 * unit-tested without a server (as those of `queries.ts`).
 */
import type { Document, Filter, ObjectId, UpdateFilter } from 'mongodb';
import type { FailureGroupFilter, FailureGroupKey } from '../failure-groups.ts';
import { listedStates, OPEN_TRIAGE_STATES, replayableStates, TRIAGE_STATES } from '../triage.ts';
import type { TriageState } from '../../model.ts';
import type { DeadLetterFilter, TriageRequest } from '../port.ts';
import { rangeOf } from './queries.ts';
import type { DeadLetterDoc, DeliveryDoc, EndpointDoc } from './schema.ts';

// Listings

/** `listDeadLetters`: the triage states of `listedStates` (open ones unless asked). */
export function deadLetterListFilter(filter: DeadLetterFilter, states: readonly TriageState[] = listedStates(filter)): Filter<DeadLetterDoc> {
  const query: Filter<DeadLetterDoc> = {};
  if (filter.endpointId !== undefined) query.endpointId = filter.endpointId;
  if (filter.tenantId !== undefined) query.tenantId = filter.tenantId;
  if (filter.failureKind !== undefined) query.failureKind = filter.failureKind;
  const createdAt = rangeOf(filter.since, filter.until);
  if (createdAt !== undefined) query.createdAt = createdAt;
  if (states.length === 1) query['triage.state'] = states[0];
  else if (states.length < TRIAGE_STATES.length) query['triage.state'] = { $in: [...states] };
  return query;
}

/** Replay by filter: the open dead letters that match (`replayableStates`), or `undefined` when none can. */
export function deadLetterReplayFilter(filter: DeadLetterFilter): Filter<DeadLetterDoc> | undefined {
  const states = replayableStates(filter);
  return states.length === 0 ? undefined : deadLetterListFilter(filter, states);
}

/** A replay marks its dead letter replayed; the triage's note and who stay. */
export function markReplayedUpdate(now: number): UpdateFilter<DeadLetterDoc> {
  return { $set: { replayedAt: now, 'triage.state': 'replayed', 'triage.at': now } };
}

/** An operator's decision: only dead letters still open take it (checked again in the write). */
export function triageFilter(ids: readonly string[]): Filter<DeadLetterDoc> {
  return { _id: { $in: [...new Set(ids)] }, 'triage.state': { $in: [...OPEN_TRIAGE_STATES] } };
}

export function triageUpdate(request: TriageRequest, now: number): UpdateFilter<DeadLetterDoc> {
  return { $set: { triage: { state: request.state, note: request.note, by: request.by, at: now } } };
}

/** Dead letters nobody has reviewed (served by the index `dead_letters_triage`). */
export const UNREVIEWED_FILTER: Filter<DeadLetterDoc> = Object.freeze({ 'triage.state': 'new' as const });

/** Newest first, ties by insertion order. */
export const DEAD_LETTER_LIST_SORT = Object.freeze({ createdAt: -1, ord: -1 } as const);

/**
 * Replay by filter walks oldest first: the listing's order reversed, so the listing's indexes
 * (`dead_letters_created`, `_endpoint_log`, `_tenant_log`, `_triage`) serve it, scanned backwards.
 */
export const DEAD_LETTER_REPLAY_SORT = Object.freeze({ createdAt: 1, ord: 1 } as const);

/** Keyset pagination for replay by filter: after `(createdAt, ord)` in {@link DEAD_LETTER_REPLAY_SORT}'s order. */
export function afterKeyFilter(after: { readonly createdAt: number; readonly ord: ObjectId } | undefined): Filter<DeadLetterDoc> {
  if (after === undefined) return {};
  return { $or: [{ createdAt: { $gt: after.createdAt } }, { createdAt: after.createdAt, ord: { $gt: after.ord } }] };
}

// Replay

/**
 * A replay writes to the endpoints of its deliveries inside its transaction, so that it conflicts
 * with a concurrent delete of one of them: either the replay commits first (and the delete's
 * cancellation, which starts after it, cancels the replayed delivery) or it retries and finds the
 * endpoint gone. A write that changes nothing would not conflict, hence a counter.
 */
export function replayFenceFilter(endpointIds: readonly string[]): Filter<EndpointDoc> {
  return { _id: { $in: [...endpointIds] } };
}

export const REPLAY_FENCE_UPDATE: UpdateFilter<EndpointDoc> = Object.freeze({ $inc: { replayFence: 1 } });

/** A dead delivery goes back to pending, due now, in a new round. */
export function replayDeliveryFilter(deliveryId: string): Filter<DeliveryDoc> {
  return { _id: deliveryId, status: 'dead' };
}

export function replayDeliveryUpdate(now: number): UpdateFilter<DeliveryDoc> {
  return {
    $set: {
      status: 'pending',
      attempts: 0,
      nextAttemptAt: now,
      lastError: null,
      deliveredAt: null,
      updatedAt: now,
      wokeAt: now,
      lastFailureKind: null,
      lastFailureAt: null,
    },
    $inc: { round: 1 },
  };
}

// Failures, grouped

/**
 * The retrying deliveries (pending after a failed attempt), as the partial index `deliveries_failing`
 * holds them: its filter's own terms, so the server can use it, and a group's kind besides.
 */
export function retryingFailuresFilter(filter: FailureGroupFilter | FailureGroupKey): Filter<DeliveryDoc> {
  return scoped(
    { status: 'pending', lastFailureKind: 'kind' in filter ? { $type: 'string', $eq: filter.kind } : { $type: 'string' } },
    filter,
  );
}

/** The open dead letters that have a failure kind (the given one for a group). */
export function openFailuresFilter(filter: FailureGroupFilter | FailureGroupKey): Filter<DeadLetterDoc> {
  return scoped({ 'triage.state': { $in: [...OPEN_TRIAGE_STATES] }, failureKind: 'kind' in filter ? filter.kind : { $type: 'string' } }, filter);
}

/** The query narrowed to the filter's endpoint and tenant, when it names them. */
function scoped<T>(query: Filter<T>, filter: FailureGroupFilter | FailureGroupKey): Filter<T> {
  const narrowed: Record<string, unknown> = { ...query };
  if (filter.endpointId !== undefined) narrowed['endpointId'] = filter.endpointId;
  if ('tenantId' in filter && filter.tenantId !== undefined) narrowed['tenantId'] = filter.tenantId;
  return narrowed as Filter<T>;
}

/** Counts the matching documents by (endpoint, kind), with the earliest and latest of their `at` field. */
export function failureCountPipeline(match: Document, kindField: string, atField: string): Document[] {
  return [
    { $match: match },
    {
      $group: {
        _id: { endpointId: '$endpointId', kind: `$${kindField}` },
        tenantId: { $max: '$tenantId' },
        count: { $sum: 1 },
        firstSeen: { $min: `$${atField}` },
        lastSeen: { $max: `$${atField}` },
      },
    },
  ];
}

/** A group's retrying deliveries, made due now (`resumeDeliveriesUpdate` writes them). */
export function resumeFailureGroupFilter(key: FailureGroupKey, now: number): Filter<DeliveryDoc> {
  return { ...retryingFailuresFilter(key), nextAttemptAt: { $gt: now } };
}
