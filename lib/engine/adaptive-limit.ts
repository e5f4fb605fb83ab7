/**
 * The adaptive concurrency of one endpoint: how many requests may be in flight
 * to it now, found by additive increase and multiplicative decrease (AIMD), as
 * TCP finds a connection's window, with a probe past the last trouble point
 * borrowed from TCP BIC. Pure: the actor feeds it each exchange's outcome and
 * sets its mailbox's concurrency to {@link AdaptiveLimit.limit}.
 *
 *   slow start ──congestion──► avoidance ──a clean round at the ceiling──► probe
 *                               ▲   └─┘ congestion                            │
 *                               └───────────────congestion────────────────────┘
 *
 * A round is `limit` fast 2xx counted since the last change: one round trip
 * with the limit in use.
 *
 * - slow start (until the first sign of congestion): +1 per fast 2xx, so the
 *   limit doubles each round trip from `initial` and a healthy endpoint reaches
 *   its `concurrency` within a few round trips;
 * - congestion (429, 502, 503, 504, a timeout, or any response slower than
 *   `targetLatencyMs`): the limit it happened at becomes the *ceiling*, the
 *   last known trouble point, and the limit halves (never below 1), once per
 *   generation. A generation starts at each halving; an exchange started before
 *   it was sent under the old limit, so what it says is already acted on and it
 *   is ignored: the burst of 503s that one overload brings halves the limit
 *   once, not once per 503;
 * - avoidance (below the ceiling): +1 per round. Near the trouble point the
 *   limit creeps up: growing per response (the slow start's rate) would
 *   overshoot a struggling consumer by half its capacity every time;
 * - probe (at or above the ceiling: a round at the ceiling came back clean, so
 *   the consumer now takes more than when it last struggled): the k-th round
 *   from the ceiling adds 2^(k-1) (1, 2, 4, 8, …), so the limit is
 *   `ceiling + 2^k - 1` after k clean rounds. A consumer whose capacity rose
 *   from the ceiling C to T is reached in ⌈log2(T - C + 1)⌉ rounds instead of
 *   T - C, and the first limit past T is at most T + (T - C) + 1: a probe step
 *   is never more than the distance already found clean past the ceiling, plus
 *   one. Congestion ends the probe (a new ceiling, half the limit, avoidance).
 *
 * The limit never goes above the endpoint's `concurrency`. A fast 2xx counts
 * towards an increase only when at least half the limit was in flight as it
 * came back: an endpoint that is sent little says nothing about how much more
 * it could take, and its limit (and the probe's step) stays where it is. Other
 * outcomes (a 4xx, a 500, a network error) change nothing: they say something
 * about the request or the endpoint's health (the breaker's business), not its
 * load. The state is in memory: a new instance (a restarted node, an evicted
 * actor) starts again from `initial`, in slow start.
 */
import type { AdaptiveConcurrency, Outcome } from '../model.ts';

/** Statuses by which a consumer says it has more than it can take now. */
export const CONGESTION_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** What one exchange says about the endpoint's load. */
export const LoadSignal = {
  /** A 2xx within the target latency: room for more. */
  FAST: 'fast',
  /** A congestion status, a timeout or a slow response: too much now. */
  CONGESTED: 'congested',
  /** Nothing about load. */
  NEUTRAL: 'neutral',
} as const;
export type LoadSignal = (typeof LoadSignal)[keyof typeof LoadSignal];

/** Reads an exchange's outcome and duration as a {@link LoadSignal}. */
export function loadSignalOf(outcome: Outcome, durationMs: number, targetLatencyMs: number): LoadSignal {
  if (outcome.kind === 'timeout') return LoadSignal.CONGESTED;
  if (outcome.kind !== 'response') return LoadSignal.NEUTRAL;
  if (CONGESTION_STATUSES.has(outcome.status) || durationMs > targetLatencyMs) return LoadSignal.CONGESTED;
  return outcome.status >= 200 && outcome.status <= 299 ? LoadSignal.FAST : LoadSignal.NEUTRAL;
}

/** One exchange, as the actor reports it when its answer (or timeout) has come. */
export interface ExchangeReport {
  readonly outcome: Outcome;
  readonly durationMs: number;
  /** {@link AdaptiveLimit.generation} when the request was sent. */
  readonly generation: number;
  /** Requests in flight to the endpoint as it came back, itself included. */
  readonly inFlight: number;
}

export class AdaptiveLimit {
  #settings: AdaptiveConcurrency;
  #max: number;
  #limit: number;
  #generation = 0;
  /** The limit at the last halving, the last known trouble point; none in slow start. */
  #ceiling: number | undefined;
  /** What the next clean round at or above the ceiling adds: 1, doubling each such round. */
  #probeStep = 1;
  /** Fast 2xx counted towards the next increase (avoidance and probe). */
  #fast = 0;

  /** @param max the endpoint's `concurrency`: the limit never goes above it. */
  constructor(settings: AdaptiveConcurrency, max: number) {
    this.#settings = settings;
    this.#max = max;
    this.#limit = Math.max(1, Math.min(settings.initial, max));
  }

  /** Requests that may be in flight now. */
  get limit(): number {
    return this.#limit;
  }

  /** The number of halvings so far: read when a request is sent, handed back in its report. */
  get generation(): number {
    return this.#generation;
  }

  get settings(): AdaptiveConcurrency {
    return this.#settings;
  }

  /** Takes one exchange into account; returns the limit after it. */
  record(report: ExchangeReport): number {
    if (report.generation !== this.#generation) return this.#limit;
    const signal = loadSignalOf(report.outcome, report.durationMs, this.#settings.targetLatencyMs);
    if (signal === LoadSignal.CONGESTED) {
      this.#ceiling = this.#limit;
      this.#limit = Math.max(1, Math.floor(this.#limit / 2));
      this.#generation += 1;
      this.#probeStep = 1;
      this.#fast = 0;
    } else if (signal === LoadSignal.FAST && report.inFlight * 2 >= this.#limit) {
      this.#fast += 1;
      if (this.#ceiling === undefined) this.#increase(1);
      else if (this.#fast >= this.#limit) this.#increase(this.#takeRoundStep(this.#ceiling));
    }
    return this.#limit;
  }

  /**
   * Takes the endpoint's edited settings: a new maximum caps the limit at once; the limit and what
   * it has learnt are kept otherwise (a new `initial` applies to the next start).
   */
  reconfigure(settings: AdaptiveConcurrency, max: number): void {
    this.#settings = settings;
    this.#max = max;
    this.#limit = Math.min(this.#limit, max);
  }

  /** What a clean round adds past slow start: 1 below the ceiling, else the probe's step, which it doubles. */
  #takeRoundStep(ceiling: number): number {
    if (this.#limit < ceiling) return 1;
    const step = this.#probeStep;
    // Bounded by the maximum, so that it stops growing once the limit sits at the maximum.
    this.#probeStep = Math.min(this.#probeStep * 2, this.#max);
    return step;
  }

  #increase(by: number): void {
    this.#fast = 0;
    this.#limit = Math.min(this.#max, this.#limit + by);
  }
}

/**
 * The adaptive limit an endpoint's actor should have: none for a fixed endpoint, a new one for an
 * endpoint made adaptive, the current one (reconfigured) for one that stays adaptive.
 */
export function adaptiveLimitFor(
  endpoint: { readonly adaptiveConcurrency?: AdaptiveConcurrency; readonly concurrency: number },
  current: AdaptiveLimit | undefined,
): AdaptiveLimit | undefined {
  const settings = endpoint.adaptiveConcurrency;
  if (settings === undefined) return undefined;
  if (current === undefined) return new AdaptiveLimit(settings, endpoint.concurrency);
  current.reconfigure(settings, endpoint.concurrency);
  return current;
}
