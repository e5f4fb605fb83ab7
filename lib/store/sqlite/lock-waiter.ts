/**
 * Waits for SQLite's write lock on the clock instead of on the event loop.
 *
 * better-sqlite3 waits for a lock held by another connection inside the call,
 * on the calling thread: with a busy timeout of seconds, a producer holding
 * `BEGIN IMMEDIATE` would freeze every timer and socket of the process (health
 * probes, request timeouts, the admin API). So a call may block only for a
 * short first wait (the connection's busy timeout); an operation that still
 * finds the database locked queues here and is tried again on a timer, without
 * blocking, until it runs or has waited `waitLimitMs` in all.
 *
 *   free ──an operation finds the lock held──► contended
 *   contended: operations queue in arrival order (writes arriving meanwhile join
 *              the back without trying: they would only block; lease renewals
 *              join the front, so a lease does not lapse behind a backlog of
 *              settles); every
 *              `retryIntervalMs` the head is tried again; once it runs, the ones
 *              behind it run at once; any that waited `waitLimitMs` fail
 *   contended ──the queue empties──► free
 *
 * Every operation tried here must be safe to run again after it failed as busy:
 * SQLite reports busy before a statement or `BEGIN IMMEDIATE` has changed
 * anything, and each operation is at most one transaction.
 */
import { durationText, type Clock, type TimerHandle } from '../../clock.ts';
import { ClosedError } from '../../errors.ts';

export interface LockWaiterOptions {
  readonly clock: Clock;
  /** How long an operation may wait for the lock in all before it fails. */
  readonly waitLimitMs: number;
  /** How often the head of the queue is tried again while the lock is held. */
  readonly retryIntervalMs: number;
  /** Whether an error means "locked by another connection, nothing done". */
  readonly isBusy: (error: unknown) => boolean;
}

/** How an operation is tried: `blocking` is true on its first try only (it may wait the connection's busy timeout). */
export type LockedOperation<T> = (blocking: boolean) => T;

/**
 * `read`: tried at once even while writes wait (WAL readers never wait for the writer).
 * `write`: tried at once only when no write waits, else queued at the back.
 * `urgent`: a write queued at the front when others wait (lease renewals and heartbeats).
 */
export type LockAccess = 'read' | 'write' | 'urgent';

interface Waiter {
  readonly name: string;
  readonly urgent: boolean;
  readonly operation: LockedOperation<unknown>;
  readonly since: number;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** Thrown (as the cause of the store's error) when an operation waited `waitLimitMs` for the lock. */
export class LockWaitTimeout extends Error {
  readonly waitedMs: number;

  constructor(operation: string, waitedMs: number) {
    super(`${operation}: the database stayed locked by another connection for ${durationText(waitedMs)}`);
    this.name = 'LockWaitTimeout';
    this.waitedMs = waitedMs;
  }
}

export class LockWaiter {
  readonly #options: LockWaiterOptions;
  readonly #queue: Waiter[] = [];
  #timer: TimerHandle | undefined;
  #closed = false;

  constructor(options: LockWaiterOptions) {
    this.#options = options;
  }

  /** Runs `operation` now unless writes wait for the lock (see `LockAccess`), and queues it when it finds the database locked. */
  run<T>(name: string, operation: LockedOperation<T>, access: LockAccess): Promise<T> {
    if (this.#closed) return Promise.reject(new ClosedError('SqliteStore'));
    if (access === 'read' || this.#queue.length === 0) {
      try {
        return Promise.resolve(operation(true));
      } catch (error) {
        if (!this.#options.isBusy(error)) return Promise.reject(error);
      }
    }
    return new Promise<T>((resolve, reject) => {
      const urgent = access === 'urgent';
      const waiter: Waiter = { name, urgent, operation, since: this.#options.clock.now(), resolve: resolve as (value: unknown) => void, reject };
      // In arrival order among their kind: urgent ones after the urgent ones already waiting.
      const at = urgent ? this.#queue.findIndex((w) => !w.urgent) : -1;
      if (at === -1) this.#queue.push(waiter);
      else this.#queue.splice(at, 0, waiter);
      this.#schedule();
    });
  }

  /** Fails every waiting operation with a `ClosedError`. */
  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
    for (const waiter of this.#queue.splice(0)) waiter.reject(new ClosedError('SqliteStore'));
  }

  #schedule(): void {
    if (this.#timer !== undefined || this.#queue.length === 0) return;
    this.#timer = this.#options.clock.setTimeout(() => {
      this.#timer = undefined;
      this.#drain();
    }, this.#options.retryIntervalMs);
  }

  #drain(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0]!;
      try {
        const value = head.operation(false);
        this.#queue.shift();
        head.resolve(value);
      } catch (error) {
        if (!this.#options.isBusy(error)) {
          this.#queue.shift();
          head.reject(error);
          continue;
        }
        this.#expire();
        break;
      }
    }
    this.#schedule();
  }

  /** Fails the operations that have waited their limit. */
  #expire(): void {
    const now = this.#options.clock.now();
    const limit = this.#options.waitLimitMs;
    if (this.#queue.every((waiter) => now - waiter.since < limit)) return;
    const expired = this.#queue.filter((waiter) => now - waiter.since >= limit);
    this.#queue.splice(0, this.#queue.length, ...this.#queue.filter((waiter) => now - waiter.since < limit));
    for (const waiter of expired) waiter.reject(new LockWaitTimeout(waiter.name, now - waiter.since));
  }
}
