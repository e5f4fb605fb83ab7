/**
 * Delivery minutes: what one endpoint's attempts came to in one minute of the clock — attempts,
 * their outcomes, first attempts and their successes, and a histogram of attempt durations — as
 * the engine adds them up (`minute-recorder.ts`), the store keeps them (`delivery_minutes`) and
 * the charts read them (`delivery-series.ts`).
 *
 * Every field is a count, so increments of one (endpoint, minute) add up field by field: several
 * nodes, and several flushes of one node, write into the same row without reading it first.
 *
 * Latency percentiles come from the histogram: an attempt of `d` ms is counted in the first bucket
 * whose bound is ≥ d, and a percentile is reported as the bound of the bucket it falls in. So the
 * reported value is never below the true one and, for attempts of 1 ms or more, at most 5/3 of
 * it (durations are whole milliseconds, and a bucket's bound is at most 5/3 of the shortest
 * duration it holds); attempts over the last bound (50 s, beyond any request timeout) are reported
 * as that bound.
 */

export const MINUTE_MS = 60_000;

/** The latency buckets' upper bounds, inclusive, in milliseconds; one more bucket holds longer attempts. */
export const LATENCY_BOUNDS_MS: readonly number[] = Object.freeze([
  1, 2, 3, 5, 8, 12, 20, 30, 50, 80, 120, 200, 300, 500, 800, 1_200, 2_000, 3_000, 5_000, 8_000, 12_000, 20_000, 30_000, 50_000,
]);

/** Buckets in a latency histogram: one per bound, and the overflow. */
export const LATENCY_BUCKETS = LATENCY_BOUNDS_MS.length + 1;

/** The counts of a minute (or of several added up). */
export interface DeliveryCounts {
  /** Attempts that ended (delivered, retry scheduled or dead-lettered). */
  readonly attempts: number;
  readonly delivered: number;
  /** Failed attempts after which a retry was scheduled. */
  readonly retriesScheduled: number;
  /** Deliveries that went to the dead-letter queue (exhausted, or failed for good). */
  readonly deadLettered: number;
  /** Attempts that were a delivery's first (of a round: a replay starts again at 1). */
  readonly firstAttempts: number;
  /** First attempts that delivered. */
  readonly firstAttemptSuccesses: number;
  /** Attempts per duration bucket ({@link LATENCY_BOUNDS_MS}), `LATENCY_BUCKETS` long. */
  readonly latency: readonly number[];
}

/** What a node adds to one endpoint's minute; the store adds it to what the row holds. */
export interface DeliveryMinuteIncrement extends DeliveryCounts {
  readonly endpointId: string;
  readonly tenantId: string;
  /** The minute's start, epoch milliseconds (a multiple of {@link MINUTE_MS}). */
  readonly minute: number;
}

/** One minute, summed over the endpoints a query covers. */
export interface DeliveryMinute extends DeliveryCounts {
  readonly minute: number;
}

/**
 * The endpoints a series may cover: every one (the admin), a tenant's, or the ones named. The
 * caller decides it from who asks; the store only applies it.
 */
export type SeriesScope =
  | { readonly kind: 'all' }
  | { readonly kind: 'tenant'; readonly tenantId: string }
  | { readonly kind: 'endpoints'; readonly endpointIds: readonly string[] };

/** Whether an endpoint (of that tenant) is among those the scope covers. */
export function isInScope(endpoint: { readonly id: string; readonly tenantId: string }, scope: SeriesScope): boolean {
  switch (scope.kind) {
    case 'all':
      return true;
    case 'tenant':
      return endpoint.tenantId === scope.tenantId;
    case 'endpoints':
      return scope.endpointIds.includes(endpoint.id);
  }
}

export interface DeliveryMinutesQuery {
  readonly scope: SeriesScope;
  /** The first minute, inclusive. */
  readonly from: number;
  /** The end, exclusive. */
  readonly to: number;
}

/**
 * One endpoint's minutes in a window, added up: its counts without the histogram (what a failure
 * rate needs). `attempts - delivered` attempts failed (a retry scheduled, or dead-lettered).
 */
export interface EndpointDeliveryTotals extends Omit<DeliveryCounts, 'latency'> {
  readonly endpointId: string;
}

/** Orders totals by endpoint id, by code unit (as every store must answer them, whatever its collation). */
export function byEndpointId(a: { readonly endpointId: string }, b: { readonly endpointId: string }): number {
  return a.endpointId < b.endpointId ? -1 : a.endpointId > b.endpointId ? 1 : 0;
}

/** The counts' fields other than the histogram, in the order the stores list their columns. */
export const COUNT_FIELDS = ['attempts', 'delivered', 'retriesScheduled', 'deadLettered', 'firstAttempts', 'firstAttemptSuccesses'] as const;
export type CountField = (typeof COUNT_FIELDS)[number];

export type MutableCounts = { -readonly [K in CountField]: number } & { readonly latency: number[] };

export function emptyCounts(): MutableCounts {
  return {
    attempts: 0,
    delivered: 0,
    retriesScheduled: 0,
    deadLettered: 0,
    firstAttempts: 0,
    firstAttemptSuccesses: 0,
    latency: new Array<number>(LATENCY_BUCKETS).fill(0),
  };
}

/** Adds `more` into `into`, field by field. */
export function addCounts(into: MutableCounts, more: DeliveryCounts): void {
  into.attempts += more.attempts;
  into.delivered += more.delivered;
  into.retriesScheduled += more.retriesScheduled;
  into.deadLettered += more.deadLettered;
  into.firstAttempts += more.firstAttempts;
  into.firstAttemptSuccesses += more.firstAttemptSuccesses;
  for (let i = 0; i < LATENCY_BUCKETS; i++) into.latency[i] = (into.latency[i] ?? 0) + (more.latency[i] ?? 0);
}

/** The bucket an attempt of `durationMs` is counted in (a binary search over the bounds). */
export function latencyBucketOf(durationMs: number): number {
  let low = 0;
  let high = LATENCY_BOUNDS_MS.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (durationMs <= (LATENCY_BOUNDS_MS[mid] ?? Infinity)) high = mid;
    else low = mid + 1;
  }
  return low;
}

/**
 * The `q` quantile (0 < q ≤ 1) of the histogram, as the bound of the bucket it falls in
 * (the overflow bucket as the last bound); `null` without attempts.
 */
export function latencyPercentile(latency: readonly number[], q: number): number | null {
  let total = 0;
  for (const n of latency) total += n;
  if (total === 0) return null;
  // The rank of the q-quantile among the sorted durations, 1-based (nearest rank).
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < latency.length; i++) {
    seen += latency[i] ?? 0;
    if (seen >= rank) return LATENCY_BOUNDS_MS[Math.min(i, LATENCY_BOUNDS_MS.length - 1)] ?? null;
  }
  return LATENCY_BOUNDS_MS.at(-1) ?? null;
}

/** The minute `epochMs` falls in: its start. */
export function minuteOf(epochMs: number): number {
  return epochMs - (((epochMs % MINUTE_MS) + MINUTE_MS) % MINUTE_MS);
}
