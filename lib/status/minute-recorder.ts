/**
 * Adds up this node's attempts per (endpoint, minute) in memory, from the engine's `attempt`
 * events, and writes the sums to the store as increments (`delivery-minutes.ts`): one batched
 * store call per flush, never a store write per attempt. An attempt counts in the minute it ended
 * (`startedAt + durationMs`); a fenced settle (not applied) changed nothing and is not counted.
 *
 *   idle ──attempt──► gathering: a flush is due at the next minute boundary or `flushIntervalMs`
 *                     from now, whichever comes first
 *   gathering ──flush──► writing: the rows gathered so far are taken (new attempts gather anew)
 *   writing ──written──► idle, or gathering when attempts came meanwhile
 *   writing ──failed──► the rows taken are added back to what gathered meanwhile (nothing is counted
 *                       twice: a failed write wrote nothing), at most `maxPendingRows` rows kept,
 *                       the oldest minutes dropped beyond; `onError` says how many attempts went
 *   any ──close()──► closed: the timer cancelled, a last flush written (or reported); later attempts ignored
 *
 * Flushes run one after another, never side by side. A crash loses what was not flushed yet (at most
 * `flushIntervalMs` of this node's counts, or more while the store refuses writes); the deliveries
 * themselves are in the store, never here.
 */
import type { EventEmitter } from 'node:events';
import type { Clock, TimerHandle } from '../clock.ts';
import type { AttemptEvent, EngineEvents } from '../engine/engine-events.ts';
import { ConfigError } from '../errors.ts';
import { emptyCounts, addCounts, latencyBucketOf, MINUTE_MS, minuteOf, type DeliveryMinuteIncrement, type MutableCounts } from '../store/delivery-minutes.ts';

export interface MinuteRecorderOptions {
  /** The longest the counts of an open minute wait before they are written. @default 10000 */
  readonly flushIntervalMs?: number;
  /** Rows (endpoint × minute) kept while the store refuses writes; the oldest minutes go beyond. @default 100000 */
  readonly maxPendingRows?: number;
}

export interface MinuteRecorderDeps {
  readonly clock: Clock;
  /** Adds the increments to the store, all or none (`store.addDeliveryMinutes`). */
  write(increments: readonly DeliveryMinuteIncrement[]): Promise<void>;
  /** A write failed; `droppedAttempts` of its counts did not fit in `maxPendingRows` and are lost. */
  onError(error: unknown, droppedAttempts: number): void;
}

export const MINUTE_RECORDER_DEFAULTS = Object.freeze({
  flushIntervalMs: 10_000,
  maxPendingRows: 100_000,
} satisfies Required<MinuteRecorderOptions>);

interface Row extends MutableCounts {
  readonly endpointId: string;
  readonly tenantId: string;
  readonly minute: number;
}

/** Rows by minute, then by endpoint id. */
type Rows = Map<number, Map<string, Row>>;

export class DeliveryMinuteRecorder {
  readonly #deps: MinuteRecorderDeps;
  readonly #flushIntervalMs: number;
  readonly #maxPendingRows: number;
  readonly #off: () => void;
  #rows: Rows = new Map();
  #rowCount = 0;
  /** The last minute written into, and its rows: attempts mostly end in the current minute. */
  #lastMinute = Number.NaN;
  #lastRows: Map<string, Row> | undefined;
  #timer: TimerHandle | undefined;
  /** The flushes queued or running, one after another; never rejects. */
  #tail: Promise<void> = Promise.resolve();
  #closed = false;

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) naming an option that breaks its rule. */
  constructor(events: EventEmitter<EngineEvents>, deps: MinuteRecorderDeps, options: MinuteRecorderOptions = {}) {
    const flushIntervalMs = options.flushIntervalMs ?? MINUTE_RECORDER_DEFAULTS.flushIntervalMs;
    if (!Number.isSafeInteger(flushIntervalMs) || flushIntervalMs < 1) {
      throw new ConfigError('flushIntervalMs', flushIntervalMs, 'must be a whole number of milliseconds ≥ 1');
    }
    const maxPendingRows = options.maxPendingRows ?? MINUTE_RECORDER_DEFAULTS.maxPendingRows;
    if (!Number.isSafeInteger(maxPendingRows) || maxPendingRows < 1) {
      throw new ConfigError('maxPendingRows', maxPendingRows, 'must be a whole number ≥ 1');
    }
    this.#deps = deps;
    this.#flushIntervalMs = flushIntervalMs;
    this.#maxPendingRows = maxPendingRows;
    const listener = (e: AttemptEvent): void => this.#record(e);
    events.on('attempt', listener);
    this.#off = () => events.off('attempt', listener);
  }

  /** Rows (endpoint × minute) gathered and not written yet. */
  get pendingRows(): number {
    return this.#rowCount;
  }

  /** Writes what has gathered now (after any flush already running); resolves when it is written or reported. */
  flush(): Promise<void> {
    const run = this.#tail.then(() => this.#write());
    this.#tail = run;
    return run;
  }

  /** Stops counting and writes what is left. Idempotent. */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#off();
      this.#timer?.cancel();
      this.#timer = undefined;
      void this.flush();
    }
    await this.#tail;
  }

  // The hot path: a few field increments per attempt, and a timer only when none is armed.
  #record(e: AttemptEvent): void {
    if (!e.applied || this.#closed) return;
    const minute = minuteOf(e.startedAt + e.durationMs);
    let byEndpoint = minute === this.#lastMinute ? this.#lastRows : this.#rows.get(minute);
    if (byEndpoint === undefined) {
      byEndpoint = new Map();
      this.#rows.set(minute, byEndpoint);
    }
    this.#lastMinute = minute;
    this.#lastRows = byEndpoint;
    let row = byEndpoint.get(e.endpointId);
    if (row === undefined) {
      row = { endpointId: e.endpointId, tenantId: e.tenantId, minute, ...emptyCounts() };
      byEndpoint.set(e.endpointId, row);
      this.#rowCount++;
    }
    row.attempts++;
    const kind = e.settlement.kind;
    if (kind === 'delivered') row.delivered++;
    else if (kind === 'retry') row.retriesScheduled++;
    else if (kind === 'dead') row.deadLettered++;
    if (e.attempt === 1) {
      row.firstAttempts++;
      if (kind === 'delivered') row.firstAttemptSuccesses++;
    }
    const bucket = latencyBucketOf(e.durationMs);
    row.latency[bucket] = (row.latency[bucket] ?? 0) + 1;
    if (this.#timer === undefined) this.#arm();
  }

  #arm(): void {
    const now = this.#deps.clock.now();
    const dueAt = Math.min(minuteOf(now) + MINUTE_MS, now + this.#flushIntervalMs);
    this.#timer = this.#deps.clock.setTimeout(() => {
      this.#timer = undefined;
      void this.flush();
    }, dueAt - now);
  }

  async #write(): Promise<void> {
    if (this.#rowCount === 0) return;
    const taken = this.#rows;
    this.#rows = new Map();
    this.#rowCount = 0;
    this.#lastMinute = Number.NaN;
    this.#lastRows = undefined;
    // In (minute, endpoint) order: nodes upserting the same rows take their locks in one order.
    const increments: DeliveryMinuteIncrement[] = [];
    for (const minute of [...taken.keys()].sort((a, b) => a - b)) {
      const byEndpoint = taken.get(minute) ?? new Map<string, Row>();
      for (const id of [...byEndpoint.keys()].sort()) increments.push(byEndpoint.get(id) as Row);
    }
    try {
      await this.#deps.write(increments);
    } catch (error) {
      this.#deps.onError(error, this.#restore(taken));
    }
    if (this.#rowCount > 0 && this.#timer === undefined && !this.#closed) this.#arm();
  }

  /** Adds rows a failed write took back into what gathered since; answers the attempts dropped to stay within bounds. */
  #restore(taken: Rows): number {
    for (const [minute, rows] of taken) {
      let byEndpoint = this.#rows.get(minute);
      if (byEndpoint === undefined) {
        byEndpoint = new Map();
        this.#rows.set(minute, byEndpoint);
      }
      for (const [endpointId, row] of rows) {
        const current = byEndpoint.get(endpointId);
        if (current === undefined) {
          byEndpoint.set(endpointId, row);
          this.#rowCount++;
        } else {
          addCounts(current, row);
        }
      }
    }
    this.#lastMinute = Number.NaN;
    this.#lastRows = undefined;
    let dropped = 0;
    for (const minute of [...this.#rows.keys()].sort((a, b) => a - b)) {
      if (this.#rowCount <= this.#maxPendingRows) break;
      const byEndpoint = this.#rows.get(minute) ?? new Map<string, Row>();
      for (const [endpointId, row] of byEndpoint) {
        if (this.#rowCount <= this.#maxPendingRows) break;
        byEndpoint.delete(endpointId);
        this.#rowCount--;
        dropped += row.attempts;
      }
      if (byEndpoint.size === 0) this.#rows.delete(minute);
    }
    return dropped;
  }
}
