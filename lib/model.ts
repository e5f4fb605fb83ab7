/**
 * Herald's domain types. Times are epoch milliseconds; durations carry `Ms`.
 */

/** An event in the outbox. `id` is generated once and is the `webhook-id` of every attempt and replay. */
export interface OutboxEvent {
  readonly id: string;
  readonly tenantId: string;
  readonly type: string;
  /** The JSON payload, serialised once by the producer and sent byte for byte. */
  readonly payload: string;
  readonly createdAt: number;
  /** Set when the producer addressed one endpoint directly instead of fanning out. */
  readonly endpointId: string | null;
  /**
   * The producer's ordering key (1 to 200 characters), copied onto each of the event's deliveries;
   * `null` when it gave none. Events of one key go to a FIFO endpoint in order.
   */
  readonly orderingKey: string | null;
  /**
   * The producer's trace at publish (W3C Trace Context), continued by the attempt spans and sent
   * to the consumer as `traceparent`; `null` (or absent) when there was none: no OpenTelemetry SDK
   * registered. The stores read it back as `null` when none was stored.
   */
  readonly traceContext?: TraceContext | null;
}

/** A W3C Trace Context: the `traceparent` header's value, and `tracestate` when the trace has one. */
export interface TraceContext {
  /** `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`. */
  readonly traceparent: string;
  readonly tracestate?: string;
}

export const DeliveryMode = {
  /** Retried on the endpoint's schedule until delivered or exhausted. */
  AT_LEAST_ONCE: 'at-least-once',
  /** One attempt, never retried; a failure is dead-lettered all the same. */
  AT_MOST_ONCE: 'at-most-once',
} as const;
export type DeliveryMode = (typeof DeliveryMode)[keyof typeof DeliveryMode];

/**
 * The order an endpoint's deliveries are sent in. A *line* is an endpoint with an ordering key;
 * events without a key form the endpoint's one default line.
 */
export const EndpointOrdering = {
  /** Any order: deliveries go out in parallel, up to the endpoint's concurrency, each on its own retry schedule. */
  NONE: 'none',
  /**
   * Strict order per line: a delivery is sent only when every earlier one of its line (by
   * `sequence`) is delivered, dead or cancelled, so one at most is in flight per line. A failing
   * one holds its line through all its retries. Different lines go in parallel.
   */
  FIFO: 'fifo',
} as const;
export type EndpointOrdering = (typeof EndpointOrdering)[keyof typeof EndpointOrdering];

/** Why an endpoint was disabled. */
export const DisabledReason = {
  /** By hand: the admin API, the CLI or the dashboard. */
  OPERATOR: 'operator',
  /** Failing without a success for `health.disableAfterMs`. */
  FAILING: 'failing',
  /** It answered `410 Gone` (with `delivery.disableOnGone`, the default). */
  GONE: 'gone',
} as const;
export type DisabledReason = (typeof DisabledReason)[keyof typeof DisabledReason];

export const EndpointStatus = {
  ENABLED: 'enabled',
  /** Disabled by an operator, after failing continuously, or on a 410 Gone ({@link DisabledReason}); its deliveries wait. */
  DISABLED: 'disabled',
} as const;
export type EndpointStatus = (typeof EndpointStatus)[keyof typeof EndpointStatus];

/**
 * How a retry's wait is spread, so deliveries that failed together do not all
 * come back at the same instant (the formulas: docs/DELIVERY.md, "Jitter").
 */
export const JitterKind = {
  /** The wait moved uniformly within ±20 % of itself: the default. */
  PLUS_MINUS_20_PERCENT: '±20%',
  /** Uniform between 0 and the wait. */
  FULL: 'full',
  /** Half the wait, plus uniform between 0 and the other half. */
  EQUAL: 'equal',
  /** AWS's decorrelated jitter, `min(max, uniform(initial, previous × 3))`: a formula's only, it needs `initial` and `max`. */
  DECORRELATED: 'decorrelated',
} as const;
export type JitterKind = (typeof JitterKind)[keyof typeof JitterKind];
/** The jitter kinds a preset or an explicit schedule takes: all but `decorrelated`, which has no `initial` or `max` there. */
export type ScheduleJitterKind = Exclude<JitterKind, typeof JitterKind.DECORRELATED>;

export type RetryPresetName = 'aggressive' | 'default' | 'relaxed';

/**
 * Retry waits by formula: the wait after attempt n is `initial × multiplier^(n−1)`, at most `max`
 * (ISO-8601 durations), jittered. It stops after `attempts` attempts in all, or when the next
 * attempt would fall beyond `window` since the round's first attempt, whichever comes first: at
 * least one of the two is given. `decorrelated` jitter grows by its own factor, so it takes no
 * `multiplier`.
 */
export type RetryFormula = {
  readonly initial: string;
  readonly max: string;
} & (
  | { readonly attempts: number; readonly window?: string }
  | { readonly attempts?: undefined; readonly window: string }
) &
  (
    | { readonly multiplier: number; readonly jitter?: ScheduleJitterKind }
    | { readonly multiplier?: undefined; readonly jitter: typeof JitterKind.DECORRELATED }
  );

/**
 * An endpoint's retry policy: a named preset, explicit ISO-8601 durations between attempts, or a
 * formula. Stored whole, as given (after validation); `jitter` absent means `±20%`.
 */
export type RetrySpec =
  | { readonly preset: RetryPresetName; readonly jitter?: ScheduleJitterKind }
  | { readonly schedule: readonly string[]; readonly jitter?: ScheduleJitterKind }
  | RetryFormula;

/** A `whsec_` signing secret. During a rotation the old one keeps signing until `expiresAt`. */
/**
 * How an endpoint's key signs (Standard Webhooks): `hmac-sha256`, a shared `whsec_` secret, signatures
 * `v1,`; `ed25519`, a `whsk_` key pair whose public `whpk_` the consumer verifies with, signatures `v1a,`.
 */
export const SignatureScheme = {
  HMAC_SHA256: 'hmac-sha256',
  ED25519: 'ed25519',
} as const;
export type SignatureScheme = (typeof SignatureScheme)[keyof typeof SignatureScheme];

export interface SigningSecret {
  /**
   * As stored: sealed, `enc:v1:<keyId>:…` (lib/signing/secret-box.ts), or a plain `whsec_…`/`whsk_…`
   * one written before encryption existed or without a key. Only the signer opens it.
   */
  readonly secret: string;
  readonly createdAt: number;
  /** `null` for the current secret; set on the previous one when a rotation starts. */
  readonly expiresAt: number | null;
  /**
   * The `whpk_…` public key of an ed25519 key (public: kept plain, shown any time). Absent for a
   * `whsec_` HMAC secret, so every secret written before ed25519 keys existed reads as HMAC.
   */
  readonly publicKey?: string;
}

/**
 * A token bucket per endpoint: it holds at most `burst` tokens, refilled at `perSecond`, and every
 * attempt (first, retry, replay) takes one. Stored resolved: `burst` defaults to
 * `max(1, ceil(perSecond))` when the caller leaves it out (lib/endpoints/rate-limit.ts).
 */
export interface RateLimit {
  /** Tokens added per second, 0.01 to 10 000. */
  readonly perSecond: number;
  /** The most tokens held, so the most attempts started at once after a quiet spell, 1 to 10 000. */
  readonly burst: number;
}

/**
 * Adaptive concurrency (AIMD) for an endpoint: its requests in flight start at `initial` and
 * follow what it copes with, never above the endpoint's `concurrency` (lib/engine/adaptive-limit.ts).
 * Stored resolved: fields the caller leaves out take {@link ADAPTIVE_CONCURRENCY_DEFAULTS}.
 */
export interface AdaptiveConcurrency {
  /** The limit it starts at (and starts at again after a restart), 1 to 256; above `concurrency`, `concurrency`. */
  readonly initial: number;
  /** A response slower than this counts as a sign of overload, like a 503, 1 to 30 000 ms. */
  readonly targetLatencyMs: number;
}

export const ADAPTIVE_CONCURRENCY_DEFAULTS = Object.freeze({
  initial: 1,
  targetLatencyMs: 2_000,
} as const satisfies AdaptiveConcurrency);

/** A JSON value, as `JSON.parse` gives it. */
export type JsonValue = null | boolean | number | string | readonly JsonValue[] | { readonly [key: string]: JsonValue };

/**
 * Conditions on an event's `type` and JSON `payload`, keyed by dotted path (`payload.amount`) or
 * `$or`/`$and`, every one of which must hold for the endpoint to get the event. Stored as given,
 * after validation (grammar and semantics: lib/endpoints/payload-filter.ts, docs/FILTERS.md).
 */
export type PayloadFilter = { readonly [pathOrOperator: string]: JsonValue };

/**
 * A header every request to an endpoint carries (lib/endpoints/endpoint-headers.ts). A `secret`
 * one's `value` is sealed at rest like a signing secret (`enc:v1:…`) and never shown again.
 */
export interface EndpointHeader {
  /** As the caller wrote it (HTTP names are case-insensitive; two that differ only in case are refused). */
  readonly name: string;
  readonly value: string;
  readonly secret: boolean;
}

/**
 * How Herald authenticates to an endpoint, in its `authorization` header: a static bearer token,
 * HTTP Basic, or an OAuth 2.0 access token it obtains by the client credentials grant (RFC 6749
 * §4.4) from `tokenUrl`. The secret part (`token`, `password`, `clientSecret`) is sealed at rest
 * like a signing secret and never shown again.
 */
export type EndpointAuth =
  | { readonly type: 'bearer'; readonly token: string }
  | { readonly type: 'basic'; readonly username: string; readonly password: string }
  | {
      readonly type: 'oauth2';
      readonly tokenUrl: string;
      readonly clientId: string;
      readonly clientSecret: string;
      readonly scope?: string;
      readonly audience?: string;
    };

/**
 * An endpoint's client certificate for mutual TLS. The key and passphrase are sealed at rest like
 * signing secrets (lib/signing/secret-box.ts) and never shown; the rest is public and shown.
 */
export interface ClientTls {
  /** The certificate, then any intermediates, PEM. */
  readonly cert: string;
  /** The private key (PEM), sealed. */
  readonly key: string;
  /** The key's passphrase, sealed; `null` for a key that is not encrypted. */
  readonly passphrase: string | null;
  /** The certificate's subject and issuer, one `name=value` per line (node:crypto `X509Certificate`). */
  readonly subject: string;
  readonly issuer: string;
  /** SHA-256 of the certificate, colon-separated hex. */
  readonly fingerprint: string;
  /** When the certificate expires (epoch ms). */
  readonly notAfter: number;
}

export interface Endpoint {
  readonly id: string;
  readonly tenantId: string;
  readonly url: string;
  readonly description: string;
  /** Event-type filters: exact types, `prefix.*`, or `*`. Empty means every type. */
  readonly eventTypes: readonly string[];
  readonly retry: RetrySpec;
  readonly timeoutMs: number;
  readonly mode: DeliveryMode;
  /** `fifo`: strict order per ordering key, one in flight per key; `none` (the default): any order. */
  readonly ordering: EndpointOrdering;
  /** Requests in flight to this endpoint at once: the most, when `adaptiveConcurrency` is set. */
  readonly concurrency: number;
  /** Set: the requests in flight follow the endpoint's answers (AIMD), up to `concurrency`; absent: always `concurrency`. */
  readonly adaptiveConcurrency?: AdaptiveConcurrency;
  /** Attempts started per second at most, on top of `concurrency`; absent: no limit. */
  readonly rateLimit?: RateLimit;
  /** Only events matching it make a delivery for this endpoint; absent: every event its `eventTypes` take. */
  readonly filter?: PayloadFilter;
  /** Headers added to every request, in this order; absent: none. Herald's own `webhook-*` headers always win. */
  readonly headers?: readonly EndpointHeader[];
  /** The `authorization` Herald sends; absent: none. */
  readonly auth?: EndpointAuth;
  /** Its client certificate for mutual TLS; absent: none. */
  readonly clientTls?: ClientTls;
  readonly status: EndpointStatus;
  /**
   * Why it is disabled, when it is: `operator`, or a {@link DisabledReason} followed by a colon and
   * the detail (`failing: …`, `gone: HTTP 410 Gone for delivery dlv_…`).
   */
  readonly disabledReason: string | null;
  /** When the current run of failures without a success began; `null` when healthy. */
  readonly failingSince: number | null;
  /** The current secret first, then any still within their rotation overlap. */
  readonly secrets: readonly SigningSecret[];
  readonly createdAt: number;
  readonly updatedAt: number;
}

export const DeliveryStatus = {
  /** Waiting for `nextAttemptAt`. */
  PENDING: 'pending',
  /** Claimed by the holder of the slot's lease at `leaseEpoch`. */
  IN_FLIGHT: 'in_flight',
  DELIVERED: 'delivered',
  /** Exhausted or permanently failed: a dead letter holds it. */
  DEAD: 'dead',
  /** Its endpoint was deleted before it was delivered. */
  CANCELLED: 'cancelled',
} as const;
export type DeliveryStatus = (typeof DeliveryStatus)[keyof typeof DeliveryStatus];

/** One (event, endpoint) pair. Its id is derived from both, so fan-out is idempotent. */
export interface Delivery {
  readonly id: string;
  readonly eventId: string;
  readonly endpointId: string;
  readonly tenantId: string;
  readonly eventType: string;
  readonly slot: number;
  readonly status: DeliveryStatus;
  /** Attempts made in the current round (a replay starts a new round at 0). */
  readonly attempts: number;
  /** 0 for the delivery fan-out made; each replay of its dead letter adds one (so above 0: a replay). */
  readonly round: number;
  readonly nextAttemptAt: number;
  /** The lease epoch of the slot when it was last claimed. */
  readonly leaseEpoch: number;
  readonly lastError: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly deliveredAt: number | null;
  /**
   * The endpoint's number for this delivery (`webhook-sequence`): 1, 2, 3, … per endpoint in the
   * order fan-out created them, without gaps, never reused, kept by retries and replays. `null`
   * only on a delivery created before sequence numbers existed.
   */
  readonly sequence: number | null;
  /** Its event's ordering key, copied at fan-out; `null` when the event had none. */
  readonly orderingKey: string | null;
}

/** A claimed delivery with what is needed to send it. */
export interface DeliveryJob {
  readonly delivery: Delivery;
  readonly event: OutboxEvent;
  /**
   * Taken over: the claim found it in flight under an older epoch (the node that claimed it crashed,
   * or lost the slot, before settling it), so an attempt may already have reached the consumer.
   * Absent on a fresh claim.
   */
  readonly resumed?: true;
}

/** What happened when an attempt was made: facts only, classification comes later. */
export type Outcome =
  | {
      readonly kind: 'response';
      readonly status: number;
      /** `Location` header, recorded for 3xx (redirects are never followed). */
      readonly location: string | null;
      /** Raw `Retry-After` header, if any. */
      readonly retryAfter: string | null;
      /** The first bytes of the response body (at most `delivery.responseBodyMaxBytes`). */
      readonly body: string;
    }
  | { readonly kind: 'timeout'; readonly timeoutMs: number }
  | {
      readonly kind: 'network';
      /**
       * The system or undici error code, e.g. `ECONNREFUSED`, `ECONNRESET`, `ENOTFOUND`;
       * or Herald's own: `PROTOCOL` (the peer answered, but not in HTTP/1.1),
       * `ERR_INVALID_URL` (the URL cannot be sent to) and `TAKEN_OVER` (nothing was sent: an
       * at-most-once delivery taken over mid-attempt, whose one attempt may have been made).
       */
      readonly code: string;
      readonly message: string;
    }
  | { readonly kind: 'blocked'; readonly address: string; readonly message: string }
  | {
      /**
       * The egress proxy (`delivery.proxy`) did not open the tunnel: it refused or cut the
       * connection, answered the CONNECT with a non-2xx, or did not answer in time. Nothing reached
       * the endpoint, so it does not count against it.
       */
      readonly kind: 'proxy';
      /** The proxy's answer to the CONNECT (407, 502, …); `null` when it gave none. */
      readonly status: number | null;
      readonly message: string;
    };

/** One attempt in the delivery log. */
export interface Attempt {
  readonly deliveryId: string;
  /** 1-based number within the delivery's round. */
  readonly number: number;
  /** 0 for the first round, then one more per replay. */
  readonly round: number;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly outcome: Outcome;
  /** A short summary, e.g. `HTTP 503` or `timeout after 10 s`. */
  readonly error: string | null;
}

export interface DeadLetter {
  readonly id: string;
  readonly deliveryId: string;
  readonly eventId: string;
  readonly endpointId: string;
  readonly tenantId: string;
  readonly eventType: string;
  readonly payload: string;
  /** Why it died: `exhausted`, `permanent: HTTP 410`, `at-most-once: timeout`, … */
  readonly reason: string;
  readonly lastOutcome: Outcome;
  readonly attempts: readonly Attempt[];
  readonly createdAt: number;
  /** When it was replayed (then `triage.state` is `replayed` too), kept for compatibility. */
  readonly replayedAt: number | null;
  readonly triage: Triage;
}

/**
 * Where a dead letter stands in the operators' review. `new` and `acknowledged` are open (still in
 * the queue); `replayed` and `discarded` are closed. The rules are `lib/store/triage.ts`'s.
 */
export const TriageState = {
  /** Nobody has looked at it yet: what `deadLetters.reviewWithinMs` watches. */
  NEW: 'new',
  /** Someone looked at it and said why (`note`, `by`); it can still be replayed. */
  ACKNOWLEDGED: 'acknowledged',
  /** Replayed: its delivery is live again (a new dead letter holds a round that dies again). */
  REPLAYED: 'replayed',
  /** Someone decided it is not to be delivered; no replay by filter takes it. */
  DISCARDED: 'discarded',
} as const;
export type TriageState = (typeof TriageState)[keyof typeof TriageState];

export interface Triage {
  readonly state: TriageState;
  /** The note of the last acknowledgement or discard (a replay keeps it); `null` before any. */
  readonly note: string | null;
  /** Who wrote that note; `null` before any. */
  readonly by: string | null;
  /** When `state` was set: the dead letter's creation, its acknowledgement, discard or replay. */
  readonly at: number;
}

/**
 * A token that lets a tenant's own developers use the admin API on their tenant's data only
 * (lib/tenants/tenant-tokens.ts). The token itself is `<id>_<secret>`, shown once; only a
 * SHA-256 of its secret part is kept.
 */
export interface TenantToken {
  /** `htk_` and 32 hex digits: the start of the token, so a leaked token names its record. */
  readonly id: string;
  readonly tenantId: string;
  /** What the admin called it (who has it, what for); may be empty. */
  readonly name: string;
  /** SHA-256 of the secret part, 64 hex digits. */
  readonly secretHash: string;
  readonly createdAt: number;
  /** After this it is refused; `null`: until revoked. */
  readonly expiresAt: number | null;
}

/** Where a paced replay job is (lib/dead-letters/replay-jobs.ts). */
export const ReplayJobState = {
  RUNNING: 'running',
  DONE: 'done',
  CANCELLED: 'cancelled',
  FAILED: 'failed',
} as const;
export type ReplayJobState = (typeof ReplayJobState)[keyof typeof ReplayJobState];

/** The scope of a replay job: the dead-letter filter of a bulk replay, open dead letters only. */
export interface ReplayJobFilter {
  readonly endpointId?: string;
  readonly tenantId?: string;
  /** `createdAt >= since` */
  readonly since?: number;
  /** `createdAt < until`; a job never takes a dead letter created after it started. */
  readonly until?: number;
}

/**
 * A paced replay job as the store keeps it, so that it outlives the node that runs it: any node
 * answers its progress and can cancel it, and another (or the restarted one) resumes it from its
 * cursor when the runner's lease lapses.
 */
export interface ReplayJobRecord {
  /** `rpl_` and 32 hex digits. */
  readonly id: string;
  readonly filter: ReplayJobFilter;
  readonly state: ReplayJobState;
  /** The dead letters the filter matched when the job started (a dry run's count). */
  readonly total: number;
  /** Released so far: their deliveries are live again. */
  readonly replayed: number;
  /** Replayed deliveries still pending or in flight on the job's endpoints at its last look. */
  readonly waiting: number;
  /** Every open dead letter up to this one (in the page order) has been released or skipped; null: from the start. */
  readonly cursor: string | null;
  /** Dead letters read per look (1 to 1000). */
  readonly chunkSize: number;
  readonly createdAt: number;
  readonly finishedAt: number | null;
  /** Why it failed; null otherwise. */
  readonly error: string | null;
  /** The node running it; null when none does (new, or given back by a node closing). */
  readonly owner: string | null;
  /** The owner's lease ends then unless it renews it; after that any node may take the job. */
  readonly leaseUntil: number;
}
