/**
 * A hashed timing wheel: many deadlines, one timer source.
 *
 * State:
 * - `#buckets`: slot → entries, for occupied slots only. Slots are created
 *   lazily and dropped when they empty, so an idle wheel costs one empty Map
 *   (each actor owns a wheel; 3 600 arrays each would not do).
 * - `#cursor`: the tick (counted from `startAt`) that `advance()` last
 *   reached. Its slot is visited again by the next advance, because only the
 *   part of that tick up to `now` was due.
 * - `#size`: entries scheduled and neither fired nor cancelled.
 *
 * An entry keeps its absolute deadline (ms after `startAt`, rounded up) and
 * sits in the slot of its tick, or of the cursor's tick if that has passed.
 * A visit fires only the entries already due, so those for later revolutions
 * stay where they are. `advance(now)` visits the slots of the ticks from the
 * cursor to `now` — or every occupied slot once, when that is fewer (always
 * so after more than a revolution) — then fires what is due in deadline order.
 *
 * An entry: waiting (in a slot) ──advance──► due ──fires──► done
 *              └──────────── cancel() / close() ───────────────┘
 */
import { ClosedError, ConfigError, ValidationError } from '../errors.ts';

const MS = 1;
const HOUR = 3_600_000 * MS;

/** A scheduled entry; cancelling it after it fired, or twice, does nothing. */
export interface WheelTimer {
  cancel(): void;
}

export interface TimerWheelOptions<T> {
  /** The resolution: an entry fires at the first `advance()` at or after its deadline. @default 100 */
  readonly tickMs?: number;
  /** Slots per revolution; 3 600 × 100 ms = one revolution per 6 minutes. @default 3600 */
  readonly slotCount?: number;
  /** Called with each item whose deadline has come, from `advance()`. */
  readonly onExpire: (item: T) => void;
  /** Epoch ms the wheel starts from, normally `clock.now()`. */
  readonly startAt: number;
  /**
   * Called when the wheel goes from empty to holding an entry, before the
   * entry is added: the link that lets a ticker run only while there is work.
   * If it throws, nothing is scheduled.
   */
  readonly onActive?: (wheel: TimerWheel<T>) => void;
}

const DEFAULTS = Object.freeze({
  tickMs: 100 * MS,
  slotCount: 3_600,
} satisfies Required<Pick<TimerWheelOptions<unknown>, 'tickMs' | 'slotCount'>>);

/** Upper bounds that catch unit mistakes (seconds for ms, a count for a size). */
const MAX_TICK_MS = 1 * HOUR;
const MAX_SLOT_COUNT = 1_000_000;

/** Lets an entry remove itself without the wheel exposing a public method for it. */
const kRemove = Symbol('remove');

/** Not exported: the public face is {@link WheelTimer}. Few fields, since a million may be pending. */
class WheelEntry<T> implements WheelTimer {
  /** Deadline in ms after the wheel's `startAt`: relative, so a small integer (no boxed number per entry) within ~24 days. */
  readonly due: number;
  readonly item: T;
  /** `null` once fired or cancelled. */
  wheel: TimerWheel<T> | null;
  readonly slot: number;
  /** Position in its slot's array; -1 once taken out to fire. */
  index: number;

  constructor(due: number, item: T, wheel: TimerWheel<T>, slot: number, index: number) {
    this.due = due;
    this.item = item;
    this.wheel = wheel;
    this.slot = slot;
    this.index = index;
  }

  cancel(): void {
    this.wheel?.[kRemove](this);
  }
}

export class TimerWheel<T> {
  readonly #tickMs: number;
  readonly #slotCount: number;
  readonly #onExpire: (item: T) => void;
  readonly #onActive: ((wheel: TimerWheel<T>) => void) | undefined;
  readonly #origin: number;
  readonly #buckets = new Map<number, WheelEntry<T>[]>();
  #cursor = 0;
  #size = 0;
  /** The entries an advance is firing, so `close()` from a callback can stop the rest. */
  #firing: WheelEntry<T>[] | undefined;
  #closed = false;

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) naming an option that breaks its rule. */
  constructor(options: TimerWheelOptions<T>) {
    const tickMs = options.tickMs ?? DEFAULTS.tickMs;
    const slotCount = options.slotCount ?? DEFAULTS.slotCount;
    if (!Number.isSafeInteger(tickMs) || tickMs < 1 || tickMs > MAX_TICK_MS) {
      throw new ConfigError('tickMs', tickMs, `must be a whole number of milliseconds from 1 to ${MAX_TICK_MS}`);
    }
    if (!Number.isSafeInteger(slotCount) || slotCount < 1 || slotCount > MAX_SLOT_COUNT) {
      throw new ConfigError('slotCount', slotCount, `must be a whole number from 1 to ${MAX_SLOT_COUNT}`);
    }
    if (typeof options.onExpire !== 'function') throw new ConfigError('onExpire', typeof options.onExpire, 'must be a function');
    if (!Number.isFinite(options.startAt)) throw new ConfigError('startAt', options.startAt, 'must be epoch milliseconds');
    this.#tickMs = tickMs;
    this.#slotCount = slotCount;
    this.#onExpire = options.onExpire;
    this.#onActive = options.onActive;
    this.#origin = options.startAt;
  }

  /** Live entries: scheduled, not yet fired, not cancelled. */
  get size(): number {
    return this.#size;
  }

  /**
   * Schedules `item` to expire at epoch ms `at`. A deadline already past
   * fires at the next `advance()`, never from inside `schedule()`.
   *
   * @throws ClosedError (`HERALD_CLOSED`) after `close()`.
   * @throws ValidationError (`HERALD_INVALID_INPUT`) when `at` is not a finite number.
   */
  schedule(at: number, item: T): WheelTimer {
    if (this.#closed) throw new ClosedError('timer wheel');
    if (!Number.isFinite(at)) throw new ValidationError('at', `must be finite epoch milliseconds (got ${at})`);
    if (this.#size === 0) this.#onActive?.(this);
    // Rounded up, so an entry never fires before its deadline.
    const due = Math.ceil(at - this.#origin);
    const tick = Math.max(Math.floor(due / this.#tickMs), this.#cursor);
    const slot = tick % this.#slotCount;
    let bucket = this.#buckets.get(slot);
    if (bucket === undefined) {
      bucket = [];
      this.#buckets.set(slot, bucket);
    }
    const entry = new WheelEntry(due, item, this, slot, bucket.length);
    bucket.push(entry);
    this.#size += 1;
    return entry;
  }

  /**
   * Fires, in deadline order, every entry whose deadline is ≤ `now`. Reads
   * `now` rather than counting calls, so coalesced or late ticks lose nothing.
   * Entries scheduled by a callback fire at a later advance; a nested
   * `advance()` from a callback does nothing.
   *
   * @throws the error of a callback that threw (an AggregateError if several
   *   did), after every due entry has fired.
   */
  advance(now: number): void {
    if (this.#firing !== undefined) return;
    const nowDue = now - this.#origin;
    const nowTick = Math.max(this.#cursor, Math.floor(nowDue / this.#tickMs));
    if (this.#size === 0) {
      this.#cursor = nowTick;
      return;
    }
    const due: WheelEntry<T>[] = [];
    const ticks = nowTick - this.#cursor + 1;
    if (ticks >= this.#buckets.size) {
      // Every due entry lies in a visited tick, so visiting more slots than
      // those is still correct, and cheaper when few slots are occupied.
      for (const [slot, bucket] of this.#buckets) this.#collect(slot, bucket, nowDue, due);
    } else {
      for (let tick = this.#cursor; tick <= nowTick; tick++) {
        const slot = tick % this.#slotCount;
        const bucket = this.#buckets.get(slot);
        if (bucket !== undefined) this.#collect(slot, bucket, nowDue, due);
      }
    }
    this.#cursor = nowTick;
    if (due.length === 0) return;
    due.sort((a, b) => a.due - b.due);
    this.#fire(due);
  }

  /** The earliest pending deadline (epoch ms, rounded up to whole ms), if any. O(entries): for status and tests. */
  nextDeadline(): number | undefined {
    let best: number | undefined;
    for (const bucket of this.#buckets.values()) {
      for (const entry of bucket) if (best === undefined || entry.due < best) best = entry.due;
    }
    for (const entry of this.#firing ?? []) {
      if (entry.wheel !== null && (best === undefined || entry.due < best)) best = entry.due;
    }
    return best === undefined ? undefined : this.#origin + best;
  }

  /** Cancels every entry and refuses new ones (ClosedError). Idempotent. */
  close(): void {
    this.#closed = true;
    for (const bucket of this.#buckets.values()) {
      for (const entry of bucket) this.#retire(entry);
    }
    for (const entry of this.#firing ?? []) this.#retire(entry);
    this.#buckets.clear();
    this.#size = 0;
  }

  /** Called by {@link WheelEntry.cancel}. */
  [kRemove](entry: WheelEntry<T>): void {
    const { index } = entry;
    this.#retire(entry);
    this.#size -= 1;
    if (index < 0) return; // already taken out to fire; the firing loop skips it
    // Swap-remove: O(1), and frees the entry now rather than at its slot's next visit.
    const bucket = this.#buckets.get(entry.slot)!;
    const last = bucket.pop()!;
    if (last !== entry) {
      bucket[index] = last;
      last.index = index;
    }
    if (bucket.length === 0) this.#buckets.delete(entry.slot);
  }

  /** Moves the due entries of one slot into `due`, compacting the rest in place. */
  #collect(slot: number, bucket: WheelEntry<T>[], nowDue: number, due: WheelEntry<T>[]): void {
    let kept = 0;
    for (let i = 0; i < bucket.length; i++) {
      const entry = bucket[i]!;
      if (entry.due <= nowDue) {
        entry.index = -1;
        due.push(entry);
      } else {
        if (kept !== i) {
          bucket[kept] = entry;
          entry.index = kept;
        }
        kept += 1;
      }
    }
    if (kept === 0) this.#buckets.delete(slot);
    else bucket.length = kept;
  }

  #fire(due: WheelEntry<T>[]): void {
    this.#firing = due;
    let errors: unknown[] | undefined;
    try {
      for (const entry of due) {
        // Cancelled, or the wheel closed, by an earlier callback.
        if (entry.wheel === null) continue;
        this.#retire(entry);
        this.#size -= 1;
        try {
          this.#onExpire(entry.item);
        } catch (error) {
          (errors ??= []).push(error);
        }
      }
    } finally {
      this.#firing = undefined;
    }
    if (errors !== undefined) {
      throw errors.length === 1 ? errors[0] : new AggregateError(errors, `${errors.length} timer wheel callbacks threw`);
    }
  }

  #retire(entry: WheelEntry<T>): void {
    entry.wheel = null;
    entry.index = -1;
  }
}
