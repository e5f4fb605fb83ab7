/**
 * Every span Herald makes and every attribute it sets, in one table: OpenTelemetry's semantic
 * conventions where they name the thing (`http.request.method`, `url.full`, `server.address`, …),
 * `herald.*` for the rest. docs/OBSERVABILITY.md ("Traces") lists the same table; a spec checks
 * that each name here is documented.
 */

export const SpanName = {
  /** A publish call: the producer's (SQLite, PostgreSQL, MongoDB) or Herald's (`POST /v1/events`, `Herald.publish()`). */
  PUBLISH: 'herald publish',
  /** One fan-out batch: events read from the outbox, their deliveries written in one store call. */
  FAN_OUT: 'herald fan-out',
  /** One HTTP attempt of one delivery (SpanKind.CLIENT). */
  ATTEMPT: 'herald attempt',
} as const;

export const SpanAttribute = {
  // OpenTelemetry semantic conventions.
  HTTP_REQUEST_METHOD: 'http.request.method',
  HTTP_RESPONSE_STATUS_CODE: 'http.response.status_code',
  /** The endpoint's URL, without its query string or user info (they may carry credentials). */
  URL_FULL: 'url.full',
  SERVER_ADDRESS: 'server.address',
  SERVER_PORT: 'server.port',
  /** Why it failed: the HTTP status (`503`), `timeout`, the network code (`ECONNREFUSED`), `blocked`. */
  ERROR_TYPE: 'error.type',
  // Herald's own.
  /** Where a publish came in: `sqlite`, `postgres`, `mongodb` (the producer's transaction) or `herald` (the API, `Herald.publish()`). */
  PUBLISH_PATH: 'herald.publish.path',
  EVENT_ID: 'herald.event.id',
  /** The events of a publish or fan-out batch (at most {@link MAX_LISTED_IDS}). */
  EVENT_IDS: 'herald.event.ids',
  EVENT_COUNT: 'herald.event.count',
  /** Set when every event of the span has this type. */
  EVENT_TYPE: 'herald.event.type',
  /** Set when every event of the span belongs to this tenant. */
  TENANT_ID: 'herald.tenant.id',
  ENDPOINT_ID: 'herald.endpoint.id',
  DELIVERY_ID: 'herald.delivery.id',
  /** Deliveries a fan-out batch wrote. */
  DELIVERY_COUNT: 'herald.delivery.count',
  /** Of those, the ones claimed as they were written (handed to their actors at once). */
  DELIVERY_CLAIMED: 'herald.delivery.claimed',
  /** The attempt's number within its delivery (1 for the first). */
  ATTEMPT_NUMBER: 'herald.attempt.number',
  /** The delivery's round: 0, then 1, 2, … for each replay. */
  ATTEMPT_ROUND: 'herald.attempt.round',
  /** The failure kind, as failures are grouped (`http-503`, `timeout`, `refused`, `tls`, …); absent on success. */
  FAILURE_KIND: 'herald.failure.kind',
} as const;

/** Ids listed in one span attribute at most; `herald.event.count` gives the whole count. */
export const MAX_LISTED_IDS = 100;
