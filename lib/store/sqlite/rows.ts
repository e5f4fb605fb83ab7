/**
 * What only the SQLite store writes in its own way: an endpoint as a row of
 * JSON text columns, and the delivery columns a RETURNING names. The rows
 * and the mappers from rows both SQL stores share live in `../sql-rows.ts`.
 */
import type { Endpoint } from '../../model.ts';
import type { EndpointRow } from '../sql-rows.ts';

/** A delivery row's columns, each named with its table: RETURNING allows no table.* wildcard. */
export const DELIVERY_COLUMNS = `deliveries.id, deliveries.event_id, deliveries.endpoint_id, deliveries.tenant_id, deliveries.event_type,
  deliveries.slot, deliveries.status, deliveries.attempts, deliveries.round, deliveries.next_attempt_at,
  deliveries.lease_epoch, deliveries.last_error, deliveries.created_at, deliveries.updated_at, deliveries.delivered_at,
  deliveries.sequence, deliveries.ordering_key`;

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
    ordering: endpoint.ordering,
    concurrency: endpoint.concurrency,
    rate_limit: endpoint.rateLimit === undefined ? null : JSON.stringify(endpoint.rateLimit),
    adaptive_concurrency: endpoint.adaptiveConcurrency === undefined ? null : JSON.stringify(endpoint.adaptiveConcurrency),
    payload_filter: endpoint.filter === undefined ? null : JSON.stringify(endpoint.filter),
    headers: endpoint.headers === undefined ? null : JSON.stringify(endpoint.headers),
    auth: endpoint.auth === undefined ? null : JSON.stringify(endpoint.auth),
    client_tls: endpoint.clientTls === undefined ? null : JSON.stringify(endpoint.clientTls),
    status: endpoint.status,
    disabled_reason: endpoint.disabledReason,
    failing_since: endpoint.failingSince,
    secrets: JSON.stringify(endpoint.secrets),
    created_at: endpoint.createdAt,
    updated_at: endpoint.updatedAt,
  };
}
