/**
 * The engine's typed events: what happened, for logs, metrics, tests and the
 * demo. Nothing listens back into the engine.
 */
import type { DisabledReason, Outcome } from '../model.ts';
import type { Settlement } from '../store/port.ts';
import type { BreakerState } from './breaker.ts';

export const OperationalEventType = {
  /** More than `health.failingThreshold` failures within `health.failingWindowMs`. */
  ENDPOINT_FAILING: 'endpoint.failing',
  /**
   * Disabled by the engine, its deliveries wait: failing continuously for `health.disableAfterMs`,
   * or it answered 410 Gone (`delivery.disableOnGone`). The event's `reason` says which.
   */
  ENDPOINT_DISABLED: 'endpoint.disabled',
  /** A success after `endpoint.failing`. */
  ENDPOINT_RECOVERED: 'endpoint.recovered',
  /** A delivery was dead-lettered. */
  DELIVERY_EXHAUSTED: 'delivery.exhausted',
  /**
   * The oldest dead letter nobody has reviewed (state `new`) is older than `deadLetters.reviewWithinMs`;
   * once per crossing (lib/dead-letters/review-watch.ts). Not about one endpoint: no `endpointId`.
   */
  DEAD_LETTERS_UNREVIEWED: 'deadletters.unreviewed',
} as const;
export type OperationalEventType = (typeof OperationalEventType)[keyof typeof OperationalEventType];

interface OperationalEventFields {
  readonly endpointId: string;
  readonly tenantId: string;
  readonly at: number;
  readonly detail: string;
  readonly deliveryId?: string;
}

/** The dead-letter queue has waited too long for a review: how many wait, and the oldest one's age. */
export interface UnreviewedDeadLettersEvent {
  readonly type: typeof OperationalEventType.DEAD_LETTERS_UNREVIEWED;
  readonly at: number;
  readonly detail: string;
  /** Dead letters in state `new`, counted up to 100 000. */
  readonly count: number;
  readonly oldestAgeMs: number;
  readonly oldestCreatedAt: number;
  readonly reviewWithinMs: number;
}

/**
 * An operational event; `endpoint.disabled` also names why, as the endpoint's `disabledReason`
 * begins, and `endpoint.failing` its window in milliseconds. All but `deadletters.unreviewed`
 * concern one endpoint. `detail` is for people: durations in it are in human units
 * (`1 h 30 min`, lib/clock.ts `durationText`); machines read the `…Ms` fields.
 */
export type OperationalEvent =
  | (OperationalEventFields & {
      readonly type: typeof OperationalEventType.ENDPOINT_RECOVERED | typeof OperationalEventType.DELIVERY_EXHAUSTED;
    })
  | (OperationalEventFields & {
      readonly type: typeof OperationalEventType.ENDPOINT_FAILING;
      /** The window the failures fell within (`health.failingWindowMs`); `detail` says it in human units. */
      readonly windowMs: number;
    })
  | (OperationalEventFields & {
      readonly type: typeof OperationalEventType.ENDPOINT_DISABLED;
      readonly reason: Exclude<DisabledReason, typeof DisabledReason.OPERATOR>;
    })
  | UnreviewedDeadLettersEvent;

export interface AttemptEvent {
  readonly endpointId: string;
  /** The endpoint's tenant (the delivery charts are kept per endpoint and read per tenant). */
  readonly tenantId: string;
  readonly eventId: string;
  /** When the event entered the outbox (for the event-to-delivery latency). */
  readonly eventCreatedAt: number;
  readonly deliveryId: string;
  readonly attempt: number;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly outcome: Outcome;
  /** One line for people: `delivered`, `retry in 30 s: HTTP 500`, `dead: permanent: HTTP 410` */
  readonly summary: string;
  readonly settlement: Settlement;
  /** False when the write was refused because the lease moved on. */
  readonly applied: boolean;
}

export interface EngineEvents {
  attempt: [AttemptEvent];
  breaker: [{ readonly endpointId: string; readonly state: BreakerState; readonly probeAt: number | null }];
  paused: [{ readonly endpointId: string; readonly until: number }];
  operational: [OperationalEvent];
  /** A delivery given back without an attempt (breaker open, paused, disabled, shutdown). */
  released: [{ readonly endpointId: string; readonly deliveryId: string; readonly until: number; readonly why: string }];
  /** This node's leases after a renewal round (the slots it believes it owns). */
  leases: [{ readonly slots: readonly number[]; readonly liveNodes: readonly string[] }];
  /**
   * The store's change feed was restarted (a lost resume token, a dropped
   * cursor). A hook for stores with a feed (MongoDB); SQLite never emits it.
   */
  feedRestart: [{ readonly reason: string }];
  /**
   * At start, a dead Herald process recorded beside the same data on this host
   * (lib/cluster/local-nodes.ts): its leases were released and its node row
   * removed, so this node takes its slots at once (at the next epoch).
   */
  predecessorReaped: [{ readonly nodeId: string; readonly pid: number; readonly slots: readonly number[]; readonly why: string }];
  /**
   * This node's clock is off the cluster's (the store's) by more than `thresholdMs`, either way
   * (`skewed`), or came back within it: once per crossing, not per heartbeat
   * (lib/cluster/cluster-clock.ts). The node works on, on the corrected clock.
   */
  clockSkew: [{ readonly offsetMs: number; readonly skewed: boolean; readonly thresholdMs: number }];
  /** An unexpected failure inside the engine (store unreachable…); the engine keeps going. */
  failure: [{ readonly where: string; readonly error: unknown }];
}

export type EmitEngineEvent = <K extends keyof EngineEvents>(name: K, ...args: EngineEvents[K]) => void;
