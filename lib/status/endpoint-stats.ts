/**
 * Recent attempts per endpoint on this node (`GET /v1/status`'s `recent`,
 * `scope: 'node'`): attempts and failures over a rolling window (one hour by
 * default), counted in one-minute buckets from the engine's attempt events on
 * this node, at once. The cluster's figures, every node's, are
 * `cluster-stats.ts` (`GET /v1/stats`), read from the stored delivery minutes.
 *
 * A bucket is `[start, start + bucketMs)`; buckets older than the window are
 * dropped when an endpoint is read or written, so memory stays at most
 * `windowMs / bucketMs` buckets per endpoint seen within the window.
 */
import type { EventEmitter } from 'node:events';
import type { Clock } from '../clock.ts';
import type { AttemptEvent, EngineEvents } from '../engine/engine-events.ts';

export interface EndpointStatsOptions {
  /** @default 1 hour */
  readonly windowMs?: number;
  /** @default 1 minute */
  readonly bucketMs?: number;
}

const MINUTE = 60_000;
export const ENDPOINT_STATS_DEFAULTS = Object.freeze({ windowMs: 60 * MINUTE, bucketMs: MINUTE }) satisfies Required<EndpointStatsOptions>;

export interface EndpointRecent {
  readonly endpointId: string;
  readonly attempts: number;
  readonly failures: number;
  /** failures / attempts, 0 without attempts. */
  readonly failureRate: number;
  readonly lastFailureAt: number | null;
  readonly lastError: string | null;
}

interface Bucket {
  readonly start: number;
  attempts: number;
  failures: number;
}

interface Entry {
  readonly buckets: Bucket[];
  lastFailureAt: number | null;
  lastError: string | null;
}

export class EndpointStats {
  readonly #clock: Clock;
  readonly #windowMs: number;
  readonly #bucketMs: number;
  readonly #entries = new Map<string, Entry>();
  readonly #off: () => void;

  constructor(events: EventEmitter<EngineEvents>, clock: Clock, options: EndpointStatsOptions = {}) {
    this.#clock = clock;
    this.#windowMs = options.windowMs ?? ENDPOINT_STATS_DEFAULTS.windowMs;
    this.#bucketMs = options.bucketMs ?? ENDPOINT_STATS_DEFAULTS.bucketMs;
    const listener = (e: AttemptEvent): void => this.#record(e);
    events.on('attempt', listener);
    this.#off = () => events.off('attempt', listener);
  }

  get windowMs(): number {
    return this.#windowMs;
  }

  /** Every endpoint with an attempt within the window, by id. */
  snapshot(): EndpointRecent[] {
    const now = this.#clock.now();
    const out: EndpointRecent[] = [];
    for (const [endpointId, entry] of this.#entries) {
      this.#prune(entry, now);
      if (entry.buckets.length === 0) {
        this.#entries.delete(endpointId);
        continue;
      }
      let attempts = 0;
      let failures = 0;
      for (const b of entry.buckets) {
        attempts += b.attempts;
        failures += b.failures;
      }
      out.push({
        endpointId,
        attempts,
        failures,
        failureRate: attempts === 0 ? 0 : failures / attempts,
        lastFailureAt: entry.lastFailureAt,
        lastError: entry.lastError,
      });
    }
    return out.sort((a, b) => a.endpointId.localeCompare(b.endpointId));
  }

  close(): void {
    this.#off();
  }

  #record(e: AttemptEvent): void {
    if (!e.applied) return;
    let entry = this.#entries.get(e.endpointId);
    if (entry === undefined) {
      entry = { buckets: [], lastFailureAt: null, lastError: null };
      this.#entries.set(e.endpointId, entry);
    }
    const at = e.startedAt + e.durationMs;
    const start = at - (at % this.#bucketMs);
    let bucket = entry.buckets.at(-1);
    if (bucket === undefined || bucket.start !== start) {
      bucket = { start, attempts: 0, failures: 0 };
      entry.buckets.push(bucket);
    }
    bucket.attempts++;
    if (e.settlement.kind !== 'delivered') {
      bucket.failures++;
      entry.lastFailureAt = at;
      entry.lastError = e.settlement.kind === 'release' ? null : e.settlement.attempt.error;
    }
    this.#prune(entry, at);
  }

  #prune(entry: Entry, now: number): void {
    const horizon = now - this.#windowMs;
    while (entry.buckets.length > 0 && (entry.buckets[0]?.start ?? 0) + this.#bucketMs <= horizon) entry.buckets.shift();
  }
}
