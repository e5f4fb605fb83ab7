/**
 * Request deadlines on one clock timer.
 *
 * A timer per request costs a timer and its cancellation per delivery, and the
 * AbortController it would fire costs more (undici then listens on its signal).
 * Requests instead add their deadline here: one timer is armed for the
 * earliest live deadline; when it fires, every expired entry's `onExpire`
 * runs and the timer is armed for the next live one.
 *
 *   add(at, onExpire) ─► heap; timer re-armed if `at` is the earliest
 *   cancel()          ─► entry marked done, its callback dropped (left in the heap, skipped later);
 *                        the last live entry cancelled ─► heap cleared, timer cancelled
 *   timer fires       ─► pop expired: live ones expire, done ones are dropped ─► re-arm
 *
 * Entries are a binary min-heap by deadline (endpoints have different
 * timeouts, so deadlines do not arrive in order). Lifecycle: open ──close()──►
 * closed (the timer is cancelled, entries never expire, `add` is refused).
 */
import type { Clock, TimerHandle } from '../clock.ts';
import { ClosedError } from '../errors.ts';

export interface Deadline {
  /** The request ended first: it will not expire. Idempotent. */
  cancel(): void;
}

interface Entry extends Deadline {
  readonly at: number;
  /** Dropped once done: a cancelled entry waits in the heap until its turn and must not hold on to its request. */
  onExpire: (() => void) | undefined;
  done: boolean;
}

export class Deadlines {
  readonly #clock: Clock;
  readonly #heap: Entry[] = [];
  #live = 0;
  #timer: TimerHandle | undefined;
  /** The deadline the timer is armed for. */
  #armedAt = Number.POSITIVE_INFINITY;
  #closed = false;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Deadlines added and neither expired nor cancelled. */
  get live(): number {
    return this.#live;
  }

  /**
   * Calls `onExpire` once the clock reaches `at`, unless cancelled first.
   * @throws ClosedError (`HERALD_CLOSED`) after `close()`.
   */
  add(at: number, onExpire: () => void): Deadline {
    if (this.#closed) throw new ClosedError('deadlines');
    const entry: Entry = {
      at,
      onExpire,
      done: false,
      cancel: () => {
        if (entry.done) return;
        entry.done = true;
        entry.onExpire = undefined;
        if (--this.#live === 0) this.#clear();
      },
    };
    this.#push(entry);
    this.#live += 1;
    if (at < this.#armedAt) this.#arm(at);
    return entry;
  }

  /** Cancels the timer; nothing expires after this. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#clear();
  }

  #clear(): void {
    this.#heap.length = 0;
    this.#live = 0;
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#armedAt = Number.POSITIVE_INFINITY;
  }

  #arm(at: number): void {
    this.#timer?.cancel();
    this.#armedAt = at;
    this.#timer = this.#clock.setTimeout(() => this.#fire(), Math.max(0, at - this.#clock.now()));
  }

  #fire(): void {
    this.#timer = undefined;
    this.#armedAt = Number.POSITIVE_INFINITY;
    const now = this.#clock.now();
    const expired: Entry[] = [];
    for (let top = this.#heap[0]; top !== undefined && (top.done || top.at <= now); top = this.#heap[0]) {
      this.#pop();
      if (top.done) continue;
      top.done = true;
      this.#live -= 1;
      expired.push(top);
    }
    const next = this.#heap[0];
    if (next !== undefined) this.#arm(next.at);
    for (const entry of expired) {
      const onExpire = entry.onExpire;
      entry.onExpire = undefined;
      onExpire?.();
    }
  }

  #push(entry: Entry): void {
    const heap = this.#heap;
    heap.push(entry);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent]!.at <= entry.at) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = entry;
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop();
    if (last === undefined || heap.length === 0) return;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child = right < heap.length && heap[right]!.at < heap[left]!.at ? right : left;
      if (heap[child]!.at >= last.at) break;
      heap[i] = heap[child]!;
      i = child;
    }
    heap[i] = last;
  }
}
