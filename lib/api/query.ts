/**
 * The admin API's query strings: the filters of its listings (the delivery
 * log, dead letters, failure groups) read from the URL, each bad value
 * refused with a ValidationError that names its parameter and shows it.
 */
import { ISO_TIME_RULE, parseDate } from '../clock.ts';
import { ValidationError } from '../errors.ts';
import { DeliveryStatus } from '../model.ts';
import type { FailureGroupFilter } from '../store/failure-groups.ts';
import type { DeadLetterFilter, DeliveryFilter } from '../store/port.ts';
import { isTriageState, TRIAGE_STATES } from '../store/triage.ts';
import { decodeCursor } from './delivery-cursor.ts';

/** The delivery log's filter: `endpointId`, `tenantId`, `eventId`, `eventType`, `status`, `since`, `until`, `limit`, `cursor`. */
export function deliveryFilter(query: URLSearchParams): DeliveryFilter {
  const status = query.get('status');
  const statuses = Object.values(DeliveryStatus) as string[];
  if (status !== null && !statuses.includes(status)) {
    throw new ValidationError('status', `must be one of ${statuses.join(', ')} (got ${JSON.stringify(status)})`);
  }
  const cursor = query.get('cursor');
  return {
    ...optionalString(query, 'endpointId'),
    ...optionalString(query, 'tenantId'),
    ...optionalString(query, 'eventId'),
    ...optionalString(query, 'eventType'),
    ...(status === null ? {} : { status: status as DeliveryStatus }),
    ...timeRange(query),
    ...limitOf(query),
    ...(cursor === null || cursor === '' ? {} : { after: decodeCursor(cursor) }),
  };
}

/** The dead letters' filter: `state`, `endpointId`, `tenantId`, `since`, `until`, `limit`, `includeReplayed`, `cursor`. */
export function deadLetterFilter(query: URLSearchParams): DeadLetterFilter {
  const includeReplayed = query.get('includeReplayed');
  const cursor = query.get('cursor');
  const state = optionalString(query, 'state').state;
  if (state !== undefined && !isTriageState(state)) {
    throw new ValidationError('state', `must be one of ${TRIAGE_STATES.join(', ')} (got ${JSON.stringify(state)})`);
  }
  return {
    ...(state === undefined ? {} : { state }),
    ...optionalString(query, 'endpointId'),
    ...optionalString(query, 'tenantId'),
    ...timeRange(query),
    ...limitOf(query),
    ...(includeReplayed === null ? {} : { includeReplayed: includeReplayed === 'true' }),
    ...(cursor === null || cursor === '' ? {} : { after: decodeCursor(cursor) }),
  };
}

/** The failure groups' filter: `endpointId`, `tenantId`, `limit`, and nothing else. */
export function failureGroupFilter(query: URLSearchParams): FailureGroupFilter {
  for (const key of query.keys()) {
    if (!['endpointId', 'tenantId', 'limit'].includes(key)) throw new ValidationError(key, 'is not a known filter (allowed: endpointId, tenantId, limit)');
  }
  return { ...optionalString(query, 'endpointId'), ...optionalString(query, 'tenantId'), ...limitOf(query) };
}

/** `{[key]: value}` when the parameter is given and not empty, else `{}`. */
export function optionalString(query: URLSearchParams, key: string): Record<string, string> {
  const value = query.get(key);
  return value === null || value === '' ? {} : { [key]: value };
}

/** `since`/`until` as strict ISO-8601 dates or date-times (see `parseDate`) or epoch milliseconds. */
export function timeRange(query: URLSearchParams): { since?: number; until?: number } {
  const out: { since?: number; until?: number } = {};
  for (const key of ['since', 'until'] as const) {
    const text = query.get(key);
    if (text === null || text === '') continue;
    const value = /^\d+$/.test(text) ? Number(text) : parseDate(text);
    if (value === undefined) throw new ValidationError(key, `${ISO_TIME_RULE}, or be epoch milliseconds (got ${JSON.stringify(text)})`);
    out[key] = value;
  }
  return out;
}

function limitOf(query: URLSearchParams): { limit?: number } {
  const text = query.get('limit');
  if (text === null) return {};
  const limit = Number(text);
  if (!/^\d+$/.test(text) || limit < 1 || limit > 1000) throw new ValidationError('limit', `must be an integer from 1 to 1000 (got ${JSON.stringify(text)})`);
  return { limit };
}
