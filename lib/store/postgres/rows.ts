/**
 * Rows of the PostgreSQL schema and their domain values. Times are `bigint`
 * columns, read as numbers (the store's pool parses int8 into Number: epoch
 * milliseconds and counters stay far below 2^53); `jsonb` columns arrive parsed.
 */
import type { Attempt, Delivery, DeliveryStatus, Endpoint, OutboxEvent, Outcome } from '../../model.ts';
import { EndpointStatus } from '../../model.ts';
import type { SlotLease } from '../port.ts';

export interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string;
  event_types: string[];
  retry: Endpoint['retry'];
  timeout_ms: number;
  mode: string;
  concurrency: number;
  status: string;
  disabled_reason: string | null;
  failing_since: number | null;
  secrets: Endpoint['secrets'];
  created_at: number;
  updated_at: number;
}

export interface EventRow {
  id: string;
  tenant_id: string;
  type: string;
  payload: string;
  created_at: number;
  endpoint_id: string | null;
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
}

export interface AttemptRow {
  delivery_id: string;
  number: number;
  round: number;
  started_at: number;
  duration_ms: number;
  outcome: Outcome;
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
  last_outcome: Outcome;
  round: number;
  created_at: number;
  replayed_at: number | null;
}

export interface LeaseRow {
  slot: number;
  owner: string;
  until: number;
  epoch: number;
}

/** The delivery columns, qualified, for statements that join or return them. */
export const DELIVERY_COLUMNS = ['id', 'event_id', 'endpoint_id', 'tenant_id', 'event_type', 'slot', 'status', 'attempts',
  'round', 'next_attempt_at', 'lease_epoch', 'last_error', 'created_at', 'updated_at', 'delivered_at'];

export function deliveryColumns(alias: string): string {
  return DELIVERY_COLUMNS.map((column) => `${alias}.${column}`).join(', ');
}

/** The endpoint's values in column order (see `EndpointQueries`); JSON columns serialised for `::jsonb`. */
export function endpointValues(endpoint: Endpoint): unknown[] {
  return [
    endpoint.id,
    endpoint.tenantId,
    endpoint.url,
    endpoint.description,
    JSON.stringify(endpoint.eventTypes),
    JSON.stringify(endpoint.retry),
    endpoint.timeoutMs,
    endpoint.mode,
    endpoint.concurrency,
    endpoint.status,
    endpoint.disabledReason,
    endpoint.failingSince,
    JSON.stringify(endpoint.secrets),
    endpoint.createdAt,
    endpoint.updatedAt,
  ];
}

export function endpointFromRow(row: EndpointRow): Endpoint {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    url: row.url,
    description: row.description,
    eventTypes: row.event_types,
    retry: row.retry,
    timeoutMs: row.timeout_ms,
    mode: row.mode as Endpoint['mode'],
    concurrency: row.concurrency,
    status: row.status === EndpointStatus.ENABLED ? EndpointStatus.ENABLED : EndpointStatus.DISABLED,
    disabledReason: row.disabled_reason,
    failingSince: row.failing_since,
    secrets: row.secrets,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export function eventFromRow(row: EventRow): OutboxEvent {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    type: row.type,
    payload: row.payload,
    createdAt: row.created_at,
    endpointId: row.endpoint_id,
  };
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
    nextAttemptAt: row.next_attempt_at,
    leaseEpoch: row.lease_epoch,
    lastError: row.last_error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    deliveredAt: row.delivered_at,
  };
}

export function attemptFromRow(row: AttemptRow): Attempt {
  return {
    deliveryId: row.delivery_id,
    number: row.number,
    round: row.round,
    startedAt: row.started_at,
    durationMs: row.duration_ms,
    outcome: row.outcome,
    error: row.error,
  };
}

export function leaseFromRow(row: LeaseRow): SlotLease {
  return { slot: row.slot, owner: row.owner, until: row.until, epoch: row.epoch };
}
