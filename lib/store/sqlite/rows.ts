/**
 * Rows of the SQLite schema and their domain values. Times are epoch
 * milliseconds (INTEGER); structured values (event types, retry, secrets,
 * outcomes) are JSON text, parsed here. Events' rows live with the schema
 * (`schema.ts`): producers publishing from their own connection use them too.
 */
import type { Attempt, Delivery, DeliveryStatus, Endpoint, Outcome } from '../../model.ts';
import { EndpointStatus } from '../../model.ts';
import type { SlotLease } from '../port.ts';

export interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string;
  event_types: string;
  retry: string;
  timeout_ms: number;
  mode: string;
  concurrency: number;
  status: string;
  disabled_reason: string | null;
  failing_since: number | null;
  secrets: string;
  created_at: number;
  updated_at: number;
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
  outcome: string;
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
  last_outcome: string;
  round: number;
  created_at: number;
  replayed_at: number | null;
}

export interface NodeRow {
  id: string;
  started_at: number;
  seen_at: number;
}

export interface LeaseRow {
  slot: number;
  owner: string;
  until: number;
  epoch: number;
}

/** A delivery row's columns, each named with its table: RETURNING allows no table.* wildcard. */
export const DELIVERY_COLUMNS = `deliveries.id, deliveries.event_id, deliveries.endpoint_id, deliveries.tenant_id, deliveries.event_type,
  deliveries.slot, deliveries.status, deliveries.attempts, deliveries.round, deliveries.next_attempt_at,
  deliveries.lease_epoch, deliveries.last_error, deliveries.created_at, deliveries.updated_at, deliveries.delivered_at`;

export function endpointToRow(endpoint: Endpoint): EndpointRow {
  return {
    id: endpoint.id,
    tenant_id: endpoint.tenantId,
    url: endpoint.url,
    description: endpoint.description,
    event_types: JSON.stringify(endpoint.eventTypes),
    retry: JSON.stringify(endpoint.retry),
    timeout_ms: endpoint.timeoutMs,
    mode: endpoint.mode,
    concurrency: endpoint.concurrency,
    status: endpoint.status,
    disabled_reason: endpoint.disabledReason,
    failing_since: endpoint.failingSince,
    secrets: JSON.stringify(endpoint.secrets),
    created_at: endpoint.createdAt,
    updated_at: endpoint.updatedAt,
  };
}

export function endpointFromRow(row: EndpointRow): Endpoint {
  return {
    id: row.id,
    tenantId: row.tenant_id,
    url: row.url,
    description: row.description,
    eventTypes: JSON.parse(row.event_types) as string[],
    retry: JSON.parse(row.retry) as Endpoint['retry'],
    timeoutMs: row.timeout_ms,
    mode: row.mode as Endpoint['mode'],
    concurrency: row.concurrency,
    status: row.status === EndpointStatus.ENABLED ? EndpointStatus.ENABLED : EndpointStatus.DISABLED,
    disabledReason: row.disabled_reason,
    failingSince: row.failing_since,
    secrets: JSON.parse(row.secrets) as Endpoint['secrets'],
    createdAt: row.created_at,
    updatedAt: row.updated_at,
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
    outcome: JSON.parse(row.outcome) as Outcome,
    error: row.error,
  };
}

export function leaseFromRow(row: LeaseRow): SlotLease {
  return { slot: row.slot, owner: row.owner, until: row.until, epoch: row.epoch };
}
