/**
 * What an endpoint subscribes to: the event types it takes and, within them, the events its payload
 * filter matches. Fan-out (lib/engine/fanout.ts) decides with these, and the filter test
 * (`POST /v1/endpoints/:id/filter-test`) answers the same question for an event that was never
 * published, saying which condition failed.
 */
import { ValidationError } from '../errors.ts';
import type { Endpoint, JsonValue, PayloadFilter } from '../model.ts';
import { validatePayloadFilter } from './payload-filter.ts';
import { compilePayloadFilter, filterTestOf, MISSING } from './payload-filter-match.ts';

/**
 * True when `type` passes the endpoint's filters: an empty list or `*` takes
 * every type, `invoice.*` takes `invoice.paid` and `invoice.line.added`, any
 * other filter must equal the type.
 */
export function matchesEventType(filters: readonly string[], type: string): boolean {
  if (filters.length === 0) return true;
  return filters.some((filter) => {
    if (filter === '*') return true;
    if (filter.endsWith('.*')) return type.startsWith(filter.slice(0, -1));
    return filter === type;
  });
}

/** A filter test's question: an event (its type optional) and, optionally, a filter to try instead of the endpoint's. */
export interface FilterTestRequest {
  readonly type?: string;
  readonly payload: JsonValue;
  /** Tried instead of the endpoint's filter (before saving it); `null`: as if the endpoint had none. */
  readonly filter?: PayloadFilter | null;
}

export interface FilterTestResult {
  /** Whether fan-out would make the endpoint a delivery for this event. */
  readonly matches: boolean;
  /**
   * What failed first: `eventTypes` when the endpoint's event types do not take `type`, otherwise
   * the filter's condition as written (`payload.amount.$gte`, `$or`); `null` when it matches.
   */
  readonly failed: string | null;
  /** The filter tried: the one given, else the endpoint's; `null` for none. */
  readonly filter: PayloadFilter | null;
}

const FIELDS = ['type', 'payload', 'filter'] as const;

/** @throws ValidationError naming `type`, `payload`, `filter…` or an unknown field. */
export function validateFilterTest(input: unknown): FilterTestRequest {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw new ValidationError('body', 'must be a JSON object {"type"?, "payload", "filter"?}');
  const body = input as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    if (!(FIELDS as readonly string[]).includes(key)) throw new ValidationError(key, `is not a known field (allowed: ${FIELDS.join(', ')})`);
  }
  if (body.type !== undefined && (typeof body.type !== 'string' || body.type === '' || body.type.length > 256)) {
    throw new ValidationError('type', 'must be an event type, a string of 1 to 256 characters');
  }
  if (body.payload === undefined) throw new ValidationError('payload', 'is required: the JSON payload to test');
  return {
    ...(body.type === undefined ? {} : { type: body.type as string }),
    payload: body.payload as JsonValue,
    ...(body.filter === undefined ? {} : { filter: body.filter === null ? null : validatePayloadFilter(body.filter, 'filter') }),
  };
}

/** Whether the endpoint takes the event, and if not, why: what fan-out decides, for an event not published. */
export function testSubscription(endpoint: Endpoint, request: FilterTestRequest): FilterTestResult {
  const filter = request.filter === undefined ? (endpoint.filter ?? null) : request.filter;
  if (request.type !== undefined && !matchesEventType(endpoint.eventTypes, request.type)) return { matches: false, failed: 'eventTypes', filter };
  if (filter === null) return { matches: true, failed: null, filter };
  const test = request.filter === undefined ? filterTestOf(filter) : compilePayloadFilter(filter);
  const failed = test({ type: request.type ?? MISSING, payload: request.payload });
  return { matches: failed === null, failed, filter };
}
