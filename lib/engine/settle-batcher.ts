/**
 * Coalesces settlements into few store transactions.
 *
 * Each finished attempt settles one delivery. One `store.settle([one])` per
 * attempt is one SQLite transaction per delivery, which caps throughput far
 * below what HTTP allows: a commit's cost is mostly fixed, so rows written in
 * batches of 100 go several times faster than one per commit. The batcher gathers the settlements issued
 * before its flush runs — by default, within three turns of the event loop — and
 * writes them with one `settle()` call, resolving each caller with its own
 * result: applied, or fenced.
 *
 *   settle() ─► batch ─┬─ batch reaches maxBatch ─► flush now
 *                      ├─ the delivery is already in the batch ─► flush, start a new batch
 *                      └─ first of a batch ─► flush deferred (`defer`)
 *   flush ─┬─ a write slot free (`maxFlushesInFlight`) ─► store.settle(batch)
 *          └─ none ─► the batch keeps filling; written when a write returns
 *   store.settle(batch) ─┬─ resolves: each caller gets `applied` (not fenced)
 *                        └─ rejects: every caller of that batch gets the error
 *
 * With one write at a time, a batch holds what settled while the previous write ran: batches
 * grow with the store's latency (a PostgreSQL round trip, a busy store thread) instead of
 * writes multiplying, and a write's cost is mostly per statement and per commit.
 *
 * A second settlement of the same delivery in one batch would make the
 * store's applied/fenced lists ambiguous, so it starts a new batch; batches
 * reach the store in the order they were filled, so per-delivery order holds.
 *
 * Lifecycle: open ──close()──► closed. `close()` flushes what is queued and
 * resolves when every flush has settled; `settle()` after it rejects with
 * ClosedError.
 */
import { ClosedError, ConfigError } from '../errors.ts';
import type { SettleResult, Settlement } from '../store/port.ts';

export interface SettleBatcherOptions {
  /** Most settlements in one store call (one transaction). @default 256 */
  readonly maxBatch?: number;
  /**
   * Runs the flush later. `setImmediate` gathers a whole turn
   * of the event loop: every response read from every socket in one poll
   * phase. `queueMicrotask` gathers only what settles before the current
   * microtasks finish, and each socket's response resolves in its own I/O
   * callback, so under load it made batches of one (one flush per settlement,
   * where `setImmediate` gathers several). The default waits three turns
   * (`setImmediate` thrice): about twice the settlements per flush again, and
   * less store time per delivery, since a commit's cost is mostly fixed
   * (`npm run bench -- --only=throughput`). Not a timer: no time passes, so a ManualClock needs no advancing.
   * @default three turns of the event loop
   */
  readonly defer?: (flush: () => void) => void;
  /**
   * Most store calls in flight at once. While they are, new settlements gather into the next
   * batch, so batches grow with the store's latency instead of its statements multiplying:
   * a statement's and a commit's cost is mostly fixed.
   * @default 1
   */
  readonly maxFlushesInFlight?: number;
}

export interface SettleBatcherDeps {
  /** The store's `settle`, bound. */
  settle(settlements: readonly Settlement[], now: number): Promise<SettleResult>;
  /** The time to write (`clock.now()`), read once per flush. */
  now(): number;
}

const DEFAULTS = Object.freeze({
  maxBatch: 256,
  maxFlushesInFlight: 1,
  defer: (flush: () => void) => void setImmediate(() => setImmediate(() => setImmediate(flush))),
} satisfies Required<SettleBatcherOptions>);

interface Waiter {
  readonly settlement: Settlement;
  readonly resolve: (applied: boolean) => void;
  readonly reject: (error: unknown) => void;
}

/** How many settlements went through, in how many store calls; a snapshot. */
export interface SettleBatcherStats {
  readonly settlements: number;
  readonly flushes: number;
}

export class SettleBatcher {
  readonly #deps: SettleBatcherDeps;
  readonly #maxBatch: number;
  readonly #defer: (flush: () => void) => void;
  readonly #maxFlushesInFlight: number;
  /** Filled batches waiting for a flush slot, oldest first; the last is the one filling. */
  readonly #queued: Waiter[][] = [];
  #batch: Waiter[] = [];
  #ids = new Set<string>();
  #flushQueued = false;
  readonly #running = new Set<Promise<void>>();
  #closed = false;
  #settlements = 0;
  #flushes = 0;

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) naming an option that breaks its rule. */
  constructor(deps: SettleBatcherDeps, options: SettleBatcherOptions = {}) {
    const maxBatch = options.maxBatch ?? DEFAULTS.maxBatch;
    if (!Number.isSafeInteger(maxBatch) || maxBatch < 1) throw new ConfigError('maxBatch', maxBatch, 'must be a whole number ≥ 1');
    const defer = options.defer ?? DEFAULTS.defer;
    if (typeof defer !== 'function') throw new ConfigError('defer', typeof defer, 'must be a function');
    if (typeof deps?.settle !== 'function' || typeof deps.now !== 'function') {
      throw new ConfigError('deps', typeof deps, 'must hold settle() and now()');
    }
    const maxFlushesInFlight = options.maxFlushesInFlight ?? DEFAULTS.maxFlushesInFlight;
    if (!Number.isSafeInteger(maxFlushesInFlight) || maxFlushesInFlight < 1) {
      throw new ConfigError('maxFlushesInFlight', maxFlushesInFlight, 'must be a whole number ≥ 1');
    }
    this.#deps = deps;
    this.#maxBatch = maxBatch;
    this.#maxFlushesInFlight = maxFlushesInFlight;
    this.#defer = defer;
  }

  get stats(): SettleBatcherStats {
    return { settlements: this.#settlements, flushes: this.#flushes };
  }

  /** Settlements waiting for their flush. */
  get pending(): number {
    return this.#batch.length + this.#queued.reduce((sum, batch) => sum + batch.length, 0);
  }

  /**
   * Queues one settlement; resolves true when it was written, false when it
   * was fenced (the lease moved on or the delivery is no longer in flight).
   *
   * @throws ClosedError (`HERALD_CLOSED`, as a rejection) after `close()`.
   * @throws the store's error (as a rejection) when the batch's write failed.
   */
  settle(settlement: Settlement): Promise<boolean> {
    if (this.#closed) return Promise.reject(new ClosedError('settle batcher'));
    if (this.#ids.has(settlement.deliveryId)) this.#flush(true);
    return new Promise<boolean>((resolve, reject) => {
      this.#batch.push({ settlement, resolve, reject });
      this.#ids.add(settlement.deliveryId);
      if (this.#batch.length >= this.#maxBatch) this.#flush(true);
      else if (!this.#flushQueued) {
        this.#flushQueued = true;
        this.#defer(() => {
          this.#flushQueued = false;
          this.#flush();
        });
      }
    });
  }

  /** Flushes what is queued, refuses new settlements, and resolves when every write has settled. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#flush(true);
    while (this.#running.size > 0) await Promise.all(this.#running);
  }

  /**
   * Closes the batch being filled when a flush slot is free (or `force`: it is full, or names a
   * delivery twice), and writes the oldest closed batches while slots are free. With none free the
   * batch keeps filling until a write comes back.
   */
  #flush(force = false): void {
    if (this.#batch.length > 0 && (force || this.#running.size < this.#maxFlushesInFlight)) {
      this.#queued.push(this.#batch);
      this.#batch = [];
      this.#ids = new Set();
    }
    while (this.#running.size < this.#maxFlushesInFlight && this.#queued.length > 0) this.#write(this.#queued.shift()!);
  }

  #write(batch: Waiter[]): void {
    this.#settlements += batch.length;
    this.#flushes += 1;
    const settlements = batch.map((waiter) => waiter.settlement);
    let write: Promise<SettleResult>;
    try {
      write = this.#deps.settle(settlements, this.#deps.now());
    } catch (error) {
      // A store that throws instead of rejecting.
      write = Promise.reject(error);
    }
    // The slot frees, and what gathered meanwhile goes as one batch, before this batch's callers resume.
    const done = (): void => {
      this.#running.delete(running);
      this.#flush();
    };
    const running: Promise<void> = write.then(
      (result) => {
        done();
        const fenced = result.fenced.length === 0 ? undefined : new Set(result.fenced);
        for (const waiter of batch) waiter.resolve(fenced === undefined || !fenced.has(waiter.settlement.deliveryId));
      },
      (error: unknown) => {
        done();
        for (const waiter of batch) waiter.reject(error);
      },
    );
    this.#running.add(running);
  }
}
