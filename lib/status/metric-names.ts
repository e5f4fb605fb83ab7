/**
 * Every Prometheus metric Herald exposes on `GET /metrics`: its name, type,
 * labels and meaning, in one table. docs/OBSERVABILITY.md lists the same table; a spec
 * checks that each name here is scraped and documented.
 *
 * Labels are bounded: an endpoint id (as many as there are endpoints), an
 * outcome, a status class, an operational event type. Never an event id, a
 * delivery id or a URL.
 */

export const MetricName = {
  DELIVERIES: 'herald_deliveries_total',
  RETRIES: 'herald_delivery_retries_total',
  ATTEMPT_DURATION: 'herald_attempt_duration_seconds',
  FIRST_ATTEMPTS: 'herald_first_attempts_total',
  FIRST_ATTEMPT_SUCCESSES: 'herald_first_attempt_successes_total',
  FIRST_ATTEMPT_SUCCESS_RATIO: 'herald_first_attempt_success_ratio',
  ATTEMPTS_PER_DELIVERY: 'herald_attempts_per_delivery',
  DEAD_LETTERS: 'herald_dead_letters_total',
  EVENT_TO_DELIVERY: 'herald_event_to_delivery_seconds',
  OPERATIONAL_EVENTS: 'herald_operational_events_total',
  OPERATOR_WEBHOOK: 'herald_operator_webhook_total',
  BREAKER_STATE: 'herald_breaker_state',
  MAILBOX_DEPTH: 'herald_mailbox_depth',
  CONCURRENCY_LIMIT: 'herald_concurrency_limit',
  IN_FLIGHT: 'herald_in_flight_requests',
  SLOTS_OWNED: 'herald_slots_owned',
  CLOCK_OFFSET: 'herald_clock_offset_seconds',
  DELIVERIES_BY_STATUS: 'herald_deliveries_by_status',
  OUTBOX_UNFANNED: 'herald_outbox_unfanned_events',
  DEAD_LETTERS_UNREVIEWED: 'herald_dead_letters_unreviewed',
  OLDEST_UNREVIEWED_DEAD_LETTER: 'herald_dead_letter_oldest_unreviewed_seconds',
  STORE_UP: 'herald_store_up',
  CHANGE_FEED_RESTARTS: 'herald_change_feed_restarts_total',
  FENCED_WRITES: 'herald_fenced_writes_total',
} as const;
export type MetricName = (typeof MetricName)[keyof typeof MetricName];

/** The class of an attempt's outcome: the `status_class` label. */
export const StatusClass = {
  C2XX: '2xx',
  C3XX: '3xx',
  C4XX: '4xx',
  C5XX: '5xx',
  TIMEOUT: 'timeout',
  NETWORK: 'network',
  BLOCKED: 'blocked',
  /** The egress proxy did not open the tunnel: nothing reached the endpoint. */
  PROXY: 'proxy',
} as const;
export type StatusClass = (typeof StatusClass)[keyof typeof StatusClass];

/** The value of `herald_breaker_state`. */
export const BreakerStateValue = { closed: 0, 'half-open': 1, open: 2 } as const;

export interface MetricDoc {
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly labels: readonly string[];
  readonly help: string;
}

/** The help text of each metric (also its entry in docs/OBSERVABILITY.md). */
export const METRIC_DOCS: Readonly<Record<MetricName, MetricDoc>> = {
  [MetricName.DELIVERIES]: {
    type: 'counter',
    labels: ['outcome'],
    help: 'Deliveries that reached a final state on this node, by outcome (delivered, dead).',
  },
  [MetricName.RETRIES]: { type: 'counter', labels: [], help: 'Failed attempts that scheduled a retry.' },
  [MetricName.ATTEMPT_DURATION]: {
    type: 'histogram',
    labels: ['status_class'],
    help: 'Duration of each attempt, by status class (2xx, 3xx, 4xx, 5xx, timeout, network, blocked, proxy).',
  },
  [MetricName.FIRST_ATTEMPTS]: { type: 'counter', labels: [], help: 'First attempts of a delivery round.' },
  [MetricName.FIRST_ATTEMPT_SUCCESSES]: { type: 'counter', labels: [], help: 'First attempts that delivered.' },
  [MetricName.FIRST_ATTEMPT_SUCCESS_RATIO]: {
    type: 'gauge',
    labels: [],
    help: 'first_attempt_successes / first_attempts since this process started (1 before any attempt).',
  },
  [MetricName.ATTEMPTS_PER_DELIVERY]: {
    type: 'histogram',
    labels: ['outcome'],
    help: 'Attempts a delivery round took, observed when it reached a final state (delivered, dead).',
  },
  [MetricName.DEAD_LETTERS]: { type: 'counter', labels: [], help: 'Deliveries dead-lettered (exhausted or permanent failure).' },
  [MetricName.EVENT_TO_DELIVERY]: {
    type: 'histogram',
    labels: [],
    help: 'Time from the event entering the outbox to its successful delivery, replays included.',
  },
  [MetricName.OPERATIONAL_EVENTS]: {
    type: 'counter',
    labels: ['type'],
    help: 'Operational events: endpoint.failing, endpoint.disabled, endpoint.recovered, delivery.exhausted, deadletters.unreviewed.',
  },
  [MetricName.OPERATOR_WEBHOOK]: {
    type: 'counter',
    labels: ['outcome'],
    help: 'Operational events sent to the operator webhook, by outcome (delivered, failed, dropped).',
  },
  [MetricName.BREAKER_STATE]: {
    type: 'gauge',
    labels: ['endpoint'],
    help: 'Circuit breaker of each endpoint with a live actor: 0 closed, 1 half-open, 2 open.',
  },
  [MetricName.MAILBOX_DEPTH]: {
    type: 'gauge',
    labels: ['endpoint'],
    help: 'Deliveries waiting in the mailbox of each endpoint with a live actor (not running yet).',
  },
  [MetricName.CONCURRENCY_LIMIT]: {
    type: 'gauge',
    labels: ['endpoint'],
    help: 'Requests each endpoint with a live actor may have in flight now: its adaptive limit, or its fixed concurrency.',
  },
  [MetricName.IN_FLIGHT]: { type: 'gauge', labels: [], help: 'HTTP requests in flight on this node.' },
  [MetricName.SLOTS_OWNED]: { type: 'gauge', labels: [], help: 'Slot leases this node holds.' },
  [MetricName.CLOCK_OFFSET]: {
    type: 'gauge',
    labels: [],
    help: "This node's clock's measured offset to the store's (cluster time minus its own; negative: it runs ahead), corrected for in every time nodes compare.",
  },
  [MetricName.DELIVERIES_BY_STATUS]: {
    type: 'gauge',
    labels: ['status'],
    help: 'Deliveries in the store by status, all nodes together (pending is the backlog).',
  },
  [MetricName.OUTBOX_UNFANNED]: {
    type: 'gauge',
    labels: [],
    help: 'Events in the outbox not yet fanned out into deliveries, all nodes together, counted up to 100 000 (they wait there while the mailboxes are full).',
  },
  [MetricName.DEAD_LETTERS_UNREVIEWED]: {
    type: 'gauge',
    labels: [],
    help: 'Dead letters nobody has reviewed yet (triage state new: not acknowledged, discarded or replayed), all nodes together, counted up to 100 000.',
  },
  [MetricName.OLDEST_UNREVIEWED_DEAD_LETTER]: {
    type: 'gauge',
    labels: [],
    help: 'Age in seconds of the oldest dead letter nobody has reviewed yet (triage state new), all nodes together; 0 when there is none.',
  },
  [MetricName.STORE_UP]: { type: 'gauge', labels: [], help: '1 when the store answered the last scrape and takes writes (no call stuck on a lock, no recent store failure), else 0.' },
  [MetricName.CHANGE_FEED_RESTARTS]: {
    type: 'counter',
    labels: [],
    help: "Restarts of the store's change feed (always 0 with SQLite, which has none).",
  },
  [MetricName.FENCED_WRITES]: {
    type: 'counter',
    labels: [],
    help: 'Writes refused because this node no longer held the slot lease.',
  },
};
