/**
 * What only the PostgreSQL store writes in its own way: an endpoint's values
 * in column order (JSON for its \`jsonb\` columns), and the delivery columns a
 * statement names. The rows and the mappers from rows both SQL stores share
 * live in \`../sql-rows.ts\` (the store's pool parses int8 into numbers, and
 * \`jsonb\` columns arrive parsed).
 */
import type { Endpoint } from '../../model.ts';

/** The delivery columns, qualified, for statements that join or return them. */
export const DELIVERY_COLUMNS = ['id', 'event_id', 'endpoint_id', 'tenant_id', 'event_type', 'slot', 'status', 'attempts',
  'round', 'next_attempt_at', 'lease_epoch', 'last_error', 'created_at', 'updated_at', 'delivered_at', 'sequence', 'ordering_key'];

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
    endpoint.rateLimit === undefined ? null : JSON.stringify(endpoint.rateLimit),
    endpoint.adaptiveConcurrency === undefined ? null : JSON.stringify(endpoint.adaptiveConcurrency),
    endpoint.ordering,
    endpoint.headers === undefined ? null : JSON.stringify(endpoint.headers),
    endpoint.auth === undefined ? null : JSON.stringify(endpoint.auth),
    endpoint.filter === undefined ? null : JSON.stringify(endpoint.filter),
    endpoint.clientTls === undefined ? null : JSON.stringify(endpoint.clientTls),
  ];
}
