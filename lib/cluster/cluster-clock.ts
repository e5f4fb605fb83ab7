/**
 * The cluster's clock: this node's clock corrected by its measured offset to
 * the store's, so that the times nodes write and compare (lease `until`,
 * heartbeats, liveness, claims' `now`, due times) are read on one clock. Each
 * node's own clock drifts and jumps; the database's is the one they share.
 *
 * A measurement reads the store's time between two readings of this node's
 * clock, `t0` and `t1`, and takes the store's answer to have been read at the
 * midpoint (the round trip halved): offset = serverTime − (t0 + t1) / 2. Its
 * error is at most half the round trip; it is kept in whole milliseconds, since
 * the stores keep times as integers (PostgreSQL's `bigint` refuses a fraction).
 * A store without a clock of its own
 * (SQLite: one file is on one host) answers `undefined`: offset 0.
 *
 *   unmeasured (offset 0) ──measure() answers──► measured (the new offset)
 *   measured ──measure() fails, or its read is no measure──► measured (the last offset kept)
 *
 *   within ──|offset| > skewWarnMs──► skewed ──|offset| ≤ skewWarnMs──► within
 *   (`onSkewChange` hears each crossing once, not each measurement)
 *
 * Timers pass through to the base clock: a delay is a duration, which the
 * offset does not change.
 */
import type { Clock, TimerHandle } from '../clock.ts';
import { ConfigError, StoreError } from '../errors.ts';

export interface ClusterClockOptions {
  /**
   * An offset larger than this (either way) is reported through `onSkewChange`, and again when it
   * comes back under: the node's clock should be fixed (NTP), though the cluster works on.
   * @default 1000
   */
  readonly skewWarnMs?: number;
  /**
   * A read whose round trip took longer than this (a store slow to answer) replaces the offset
   * only when the offset moved by more than that read's own uncertainty (half its round trip);
   * otherwise the last, more precise, offset is kept.
   * @default 1000
   */
  readonly slowReadMs?: number;
}

const DEFAULTS = Object.freeze({
  skewWarnMs: 1_000,
  slowReadMs: 1_000,
} satisfies Required<ClusterClockOptions>);

/** An offset crossing `skewWarnMs`, either way. */
export interface ClockSkewChange {
  /** Cluster time − this node's time, in ms. */
  readonly offsetMs: number;
  /** True when it crossed above the threshold, false when it came back under. */
  readonly skewed: boolean;
  readonly thresholdMs: number;
}

export interface ClusterClockDeps {
  /** This node's own clock: where the time to correct and every timer come from. */
  readonly base: Clock;
  /** The store's clock (`Store.serverTime`); `undefined` when it has none apart from this host's. */
  serverTime(): Promise<number | undefined>;
  onSkewChange(change: ClockSkewChange): void;
}

export class ClusterClock implements Clock {
  readonly #base: Clock;
  readonly #deps: ClusterClockDeps;
  readonly #skewWarnMs: number;
  readonly #slowReadMs: number;
  #offsetMs = 0;
  #skewed = false;

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) naming an option that breaks its rule. */
  constructor(deps: ClusterClockDeps, options: ClusterClockOptions = {}) {
    this.#base = deps.base;
    this.#deps = deps;
    this.#skewWarnMs = positive(options.skewWarnMs ?? DEFAULTS.skewWarnMs, 'skewWarnMs');
    this.#slowReadMs = positive(options.slowReadMs ?? DEFAULTS.slowReadMs, 'slowReadMs');
  }

  /** Cluster time − this node's time, in ms, as last measured (0 before the first measurement). */
  get offsetMs(): number {
    return this.#offsetMs;
  }

  now(): number {
    return this.#base.now() + this.#offsetMs;
  }

  setTimeout(fn: () => void, delayMs: number): TimerHandle {
    return this.#base.setTimeout(fn, delayMs);
  }

  setInterval(fn: () => void, periodMs: number): TimerHandle {
    return this.#base.setInterval(fn, periodMs);
  }

  /**
   * Reads the store's time and updates the offset (see the module comment).
   * @throws whatever the store's read threw, or StoreError (`HERALD_STORE`) when it answered
   *   something that is not a time; the last offset is kept either way.
   */
  async measure(): Promise<void> {
    const t0 = this.#base.now();
    const server = await this.#deps.serverTime();
    const t1 = this.#base.now();
    if (server === undefined) {
      this.#set(0);
      return;
    }
    if (!Number.isFinite(server)) throw new StoreError(`serverTime: the store answered ${String(server)}, not a time in epoch ms`);
    const roundTripMs = t1 - t0;
    // This node's clock was set back during the read: the midpoint means nothing. The next round measures again.
    if (roundTripMs < 0) return;
    const offsetMs = server - (t0 + t1) / 2;
    if (roundTripMs > this.#slowReadMs && Math.abs(offsetMs - this.#offsetMs) <= roundTripMs / 2) return;
    this.#set(offsetMs);
  }

  #set(measuredMs: number): void {
    // `+ 0`: -0 rounds to -0, which would show as such.
    const offsetMs = Math.round(measuredMs) + 0;
    this.#offsetMs = offsetMs;
    const skewed = Math.abs(offsetMs) > this.#skewWarnMs;
    if (skewed === this.#skewed) return;
    this.#skewed = skewed;
    this.#deps.onSkewChange({ offsetMs, skewed, thresholdMs: this.#skewWarnMs });
  }
}

function positive(value: number, key: string): number {
  if (!Number.isFinite(value) || value <= 0) throw new ConfigError(key, value, 'must be a positive number of milliseconds');
  return value;
}
