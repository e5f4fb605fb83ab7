/**
 * The rows the two SQL stores (SQLite and PostgreSQL) share, and their
 * domain values. Both lay out their tables alike; what differs is how a
 * structured column arrives: JSON text from SQLite, already parsed from a
 * PostgreSQL `jsonb` column ({@link JsonColumn}). A `bigint` time may arrive
 * as text from a connection that does not parse int8 (a producer's own pool),
 * hence `Number()` where that can happen.
 */
import type {
  AdaptiveConcurrency, Attempt, ClientTls, DeadLetter, Delivery, DeliveryStatus, Endpoint, EndpointAuth, EndpointHeader, OutboxEvent, Outcome, PayloadFilter, RateLimit, ReplayJobFilter, ReplayJobRecord,
  ReplayJobState, TenantToken, TraceContext, TriageState,
} from '../model.ts';
import { EndpointOrdering, EndpointStatus } from '../model.ts';
import { COUNT_FIELDS, LATENCY_BUCKETS, type DeliveryMinute, type DeliveryMinuteIncrement, type EndpointDeliveryTotals } from './delivery-minutes.ts';
import type { NodeRecord, SlotLease, SlotWeights } from './port.ts';

/** A structured column: JSON text (SQLite) or the parsed value (PostgreSQL `jsonb`). */
export type JsonColumn<T> = string | T;

export function fromJson<T>(value: JsonColumn<T>): T {
  return typeof value === 'string' ? (JSON.parse(value) as T) : value;
}

export interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string;
  event_types: JsonColumn<string[]>;
  retry: JsonColumn<Endpoint['retry']>;
  timeout_ms: number;
  mode: string;
  /** `none` on every row written before the column existed (its default). */
  ordering: string;
  concurrency: number;
  /** NULL: no limit (and every row written before the column existed). */
  rate_limit: JsonColumn<RateLimit> | null;
  /** NULL: a fixed concurrency (and every row written before the column existed). */
  adaptive_concurrency: JsonColumn<AdaptiveConcurrency> | null;
  /** NULL: no payload filter (and every row written before the column existed). */
  payload_filter: JsonColumn<PayloadFilter> | null;
  /** NULL: no custom headers (and every row written before the column existed); secret values sealed. */
  headers: JsonColumn<EndpointHeader[]> | null;
  /** NULL: no authentication (and every row written before the column existed); its secret sealed. */
  auth: JsonColumn<EndpointAuth> | null;
  /** NULL: no client certificate (and every row written before the column existed). */
  client_tls?: JsonColumn<ClientTls> | null;
  status: string;
  disabled_reason: string | null;
  failing_since: number | null;
  secrets: JsonColumn<Endpoint['secrets']>;
  created_at: number;
  updated_at: number;
}

export interface EventRow {
  id: string;
  tenant_id: string;
  type: string;
  payload: string;
  created_at: number | string;
  endpoint_id: string | null;
  /** Absent from rows a producer's older statement selects (read as no key). */
  ordering_key?: string | null;
  /** The producer's W3C trace context; NULL: none (and every row written before the column existed). */
  trace_context?: JsonColumn<TraceContext> | null;
}

export interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  tenant_id: string;
  event_type: string;
  slot: number;
  status: string;
  attempts: number;
  round: number;
  next_attempt_at: number;
  lease_epoch: number;
  last_error: string | null;
  created_at: number;
  updated_at: number;
  delivered_at: number | null;
  /** A bigint from PostgreSQL (parsed into a number by the store's pool); NULL on rows older than the numbering. */
  sequence: number | string | null;
  ordering_key: string | null;
}

export interface AttemptRow {
  delivery_id: string;
  number: number;
  round: number;
  started_at: number;
  duration_ms: number;
  outcome: JsonColumn<Outcome>;
  error: string | null;
}

export interface DeadLetterRow {
  id: string;
  delivery_id: string;
  event_id: string;
  endpoint_id: string;
  tenant_id: string;
  event_type: string;
  payload: string;
  reason: string;
  last_outcome: JsonColumn<Outcome>;
  round: number;
  created_at: number;
  replayed_at: number | null;
  triage_state: string;
  triage_note: string | null;
  triage_by: string | null;
  /** NULL on a row an older Herald wrote after the migration (it knows no triage): its state began at its creation. */
  triage_at: number | null;
}

export interface LeaseRow {
  slot: number;
  owner: string;
  until: number;
  epoch: number;
}

export interface NodeRow {
  id: string;
  started_at: number;
  seen_at: number;
  in_flight: number;
  clock_offset_ms: number;
}

export function nodeFromRow(row: NodeRow): NodeRecord {
  return { id: row.id, startedAt: row.started_at, seenAt: row.seen_at, inFlight: row.in_flight, clockOffsetMs: row.clock_offset_ms };
}

export function endpointFromRow(row: EndpointRow): Endpoint {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    url: row.url,
    description: row.description,
    eventTypes: fromJson(row.event_types),
    retry: fromJson(row.retry),
    timeoutMs: row.timeout_ms,
    mode: row.mode as Endpoint['mode'],
    ordering: row.ordering === EndpointOrdering.FIFO ? EndpointOrdering.FIFO : EndpointOrdering.NONE,
    concurrency: row.concurrency,
    status: row.status === EndpointStatus.ENABLED ? EndpointStatus.ENABLED : EndpointStatus.DISABLED,
    disabledReason: row.disabled_reason,
    failingSince: row.failing_since,
    secrets: fromJson(row.secrets),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    ...(row.rate_limit === null || row.rate_limit === undefined ? {} : { rateLimit: fromJson(row.rate_limit) }),
    ...(row.adaptive_concurrency === null || row.adaptive_concurrency === undefined
      ? {}
      : { adaptiveConcurrency: fromJson(row.adaptive_concurrency) }),
    ...(row.payload_filter === null || row.payload_filter === undefined ? {} : { filter: fromJson(row.payload_filter) }),
    ...(row.headers === null || row.headers === undefined ? {} : { headers: fromJson(row.headers) }),
    ...(row.auth === null || row.auth === undefined ? {} : { auth: fromJson(row.auth) }),
    ...(row.client_tls === null || row.client_tls === undefined ? {} : { clientTls: fromJson(row.client_tls) }),
  };
}

export function eventFromRow(row: EventRow): OutboxEvent {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    type: row.type,
    payload: row.payload,
    // Epoch milliseconds fit a double exactly.
    createdAt: Number(row.created_at),
    endpointId: row.endpoint_id,
    orderingKey: row.ordering_key ?? null,
    traceContext: traceContextFromColumn(row.trace_context),
  };
}

/** The `trace_context` column of an event: JSON text (SQLite) or parsed `jsonb` (PostgreSQL); NULL is none. */
export function traceContextFromColumn(column: JsonColumn<TraceContext> | null | undefined): TraceContext | null {
  return column === null || column === undefined ? null : fromJson(column);
}

/** What the `trace_context` column stores (SQLite text, PostgreSQL `jsonb` from text). */
export function traceContextToColumn(traceContext: TraceContext | null | undefined): string | null {
  return traceContext === null || traceContext === undefined ? null : JSON.stringify(traceContext);
}

export function deliveryFromRow(row: DeliveryRow): Delivery {
  return {
    id: row.id,
    eventId: row.event_id,
    endpointId: row.endpoint_id,
    tenantId: row.tenant_id,
    eventType: row.event_type,
    slot: row.slot,
    status: row.status as DeliveryStatus,
    attempts: row.attempts,
    round: row.round,
    nextAttemptAt: row.next_attempt_at,
    leaseEpoch: row.lease_epoch,
    lastError: row.last_error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    deliveredAt: row.delivered_at,
    sequence: row.sequence === null ? null : Number(row.sequence),
    orderingKey: row.ordering_key,
  };
}

export function attemptFromRow(row: AttemptRow): Attempt {
  return {
    deliveryId: row.delivery_id,
    number: row.number,
    round: row.round,
    startedAt: row.started_at,
    durationMs: row.duration_ms,
    outcome: fromJson(row.outcome),
    error: row.error,
  };
}

/** A dead letter with `attempts`, those of the round that died (the caller reads them). */
export function deadLetterFromRow(row: DeadLetterRow, attempts: readonly AttemptRow[]): DeadLetter {
  return {
    id: row.id,
    deliveryId: row.delivery_id,
    eventId: row.event_id,
    endpointId: row.endpoint_id,
    tenantId: row.tenant_id,
    eventType: row.event_type,
    payload: row.payload,
    reason: row.reason,
    lastOutcome: fromJson(row.last_outcome),
    attempts: attempts.map(attemptFromRow),
    createdAt: row.created_at,
    replayedAt: row.replayed_at,
    triage: { state: row.triage_state as TriageState, note: row.triage_note, by: row.triage_by, at: row.triage_at ?? row.created_at },
  };
}

export function leaseFromRow(row: LeaseRow): SlotLease {
  return { slot: row.slot, owner: row.owner, until: row.until, epoch: row.epoch };
}

/** The `meta` key both SQL stores keep the cluster's slot weights under, as JSON text. */
export const SLOT_WEIGHTS_KEY = 'slot_weights';

export function slotWeightsToText(weights: SlotWeights): string {
  return JSON.stringify({ weights: weights.weights, by: weights.by, at: weights.at });
}

export function slotWeightsFromText(text: string): SlotWeights {
  const { weights, by, at } = JSON.parse(text) as SlotWeights;
  return { weights, by, at: Number(at) };
}

export interface TenantTokenRow {
  id: string;
  tenant_id: string;
  name: string;
  secret_hash: string;
  created_at: number | string;
  expires_at: number | string | null;
}

export function tenantTokenFromRow(row: TenantTokenRow): TenantToken {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    name: row.name,
    secretHash: row.secret_hash,
    createdAt: Number(row.created_at),
    expiresAt: row.expires_at === null ? null : Number(row.expires_at),
  };
}

export function tenantTokenToRow(token: TenantToken): TenantTokenRow {
  return {
    id: token.id,
    tenant_id: token.tenantId,
    name: token.name,
    secret_hash: token.secretHash,
    created_at: token.createdAt,
    expires_at: token.expiresAt,
  };
}

/** `delivery_minutes`' count columns, in `COUNT_FIELDS` order. */
export const MINUTE_COUNT_COLUMNS = ['attempts', 'delivered', 'retries_scheduled', 'dead_lettered', 'first_attempts', 'first_attempt_successes'] as const;
/** `delivery_minutes`' latency bucket columns, `latency_00` on. */
export const LATENCY_COLUMNS: readonly string[] = Array.from({ length: LATENCY_BUCKETS }, (_, i) => `latency_${String(i).padStart(2, '0')}`);
/** Every additive column of `delivery_minutes`, counts then buckets: what an upsert adds and a series sums. */
export const MINUTE_COLUMNS: readonly string[] = [...MINUTE_COUNT_COLUMNS, ...LATENCY_COLUMNS];

/** An increment's values in `MINUTE_COLUMNS` order. */
export function minuteValuesOf(increment: DeliveryMinuteIncrement): number[] {
  return [...COUNT_FIELDS.map((field) => increment[field]), ...Array.from({ length: LATENCY_BUCKETS }, (_, i) => increment.latency[i] ?? 0)];
}

/** A summed row of `delivery_minutes` (`minute` and every `MINUTE_COLUMNS` column; a sum may arrive as text). */
export type DeliveryMinuteRow = Readonly<Record<string, number | string>>;

export function deliveryMinuteOf(row: DeliveryMinuteRow): DeliveryMinute {
  const counts = Object.fromEntries(COUNT_FIELDS.map((field, i) => [field, Number(row[MINUTE_COUNT_COLUMNS[i] as string])])) as Record<
    (typeof COUNT_FIELDS)[number],
    number
  >;
  return { minute: Number(row.minute), ...counts, latency: LATENCY_COLUMNS.map((column) => Number(row[column])) };
}

/** An endpoint's summed row of `delivery_minutes` (`endpoint_id` and every `MINUTE_COUNT_COLUMNS` column). */
export function deliveryTotalsOf(row: DeliveryMinuteRow): EndpointDeliveryTotals {
  const counts = Object.fromEntries(COUNT_FIELDS.map((field, i) => [field, Number(row[MINUTE_COUNT_COLUMNS[i] as string])])) as Record<
    (typeof COUNT_FIELDS)[number],
    number
  >;
  return { endpointId: String(row.endpoint_id), ...counts };
}

/** A row of `replay_jobs` (lib/dead-letters/replay-jobs.ts). */
export interface ReplayJobRow {
  id: string;
  filter: JsonColumn<ReplayJobFilter>;
  state: string;
  total: number;
  replayed: number;
  waiting: number;
  cursor: string | null;
  chunk_size: number;
  created_at: number;
  finished_at: number | null;
  error: string | null;
  owner: string | null;
  lease_until: number;
}

export function replayJobFromRow(row: ReplayJobRow): ReplayJobRecord {
  return {
    id: row.id,
    filter: fromJson(row.filter),
    state: row.state as ReplayJobState,
    total: Number(row.total),
    replayed: Number(row.replayed),
    waiting: Number(row.waiting),
    cursor: row.cursor,
    chunkSize: Number(row.chunk_size),
    createdAt: Number(row.created_at),
    finishedAt: row.finished_at === null ? null : Number(row.finished_at),
    error: row.error,
    owner: row.owner,
    leaseUntil: Number(row.lease_until),
  };
}

/** The job's values in the column order of `REPLAY_JOB_COLUMNS`, the filter as JSON text. */
export function replayJobValues(job: ReplayJobRecord): unknown[] {
  return [job.id, JSON.stringify(job.filter), job.state, job.total, job.replayed, job.waiting, job.cursor, job.chunkSize,
    job.createdAt, job.finishedAt, job.error, job.owner, job.leaseUntil];
}

export const REPLAY_JOB_COLUMNS = ['id', 'filter', 'state', 'total', 'replayed', 'waiting', 'cursor', 'chunk_size',
  'created_at', 'finished_at', 'error', 'owner', 'lease_until'] as const;
