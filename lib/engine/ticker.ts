/**
 * The node-wide ticker: one interval advances every timer wheel.
 *
 * Wheels are made by {@link Ticker.createWheel}, which links them back: a
 * wheel calls the ticker when it gets its first entry. The ticker holds only
 * wheels that have entries, so an actor's empty wheel needs no unregistering
 * and is garbage once its actor is; `wheel.close()` empties it for good.
 *
 *   idle (no interval) ──a wheel gets its first entry──► ticking (one interval)
 *   ticking ──a tick leaves every wheel empty──► idle
 *   idle | ticking ──close()──► closed (its wheels refuse new entries)
 *
 * Each tick calls `wheel.advance(clock.now())`: intervals are coalesced (by
 * ManualClock, and by a busy event loop), so ticks are never counted.
 */
import type { Clock, TimerHandle } from '../clock.ts';
import { ClosedError, ConfigError } from '../errors.ts';
import { TimerWheel } from './timer-wheel.ts';

export interface TickerOptions {
  /** Where time and the interval come from. */
  readonly clock: Clock;
  /** The interval, and so every wheel's resolution. @default 100 */
  readonly tickMs?: number;
  /** Slots per wheel revolution; 3 600 × 100 ms = 6 minutes. @default 3600 */
  readonly slotCount?: number;
  /**
   * Receives what a wheel's callback threw; the other wheels are advanced
   * regardless. @default undefined: the first error is rethrown after the
   * tick, so a bug surfaces instead of being swallowed
   */
  readonly onError?: ((error: unknown) => void) | undefined;
}

const DEFAULTS = Object.freeze({
  tickMs: 100,
  slotCount: 3_600,
} satisfies Required<Pick<TickerOptions, 'tickMs' | 'slotCount'>>);

/** What the ticker needs of a wheel, whatever its item type. */
type DrivenWheel = Pick<TimerWheel<unknown>, 'advance' | 'size' | 'close'>;

export class Ticker {
  readonly #clock: Clock;
  readonly #tickMs: number;
  readonly #slotCount: number;
  readonly #onError: ((error: unknown) => void) | undefined;
  /** Every wheel that has entries (and, until the next tick, some that just emptied). */
  readonly #active = new Set<DrivenWheel>();
  #interval: TimerHandle | undefined;
  #closed = false;

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) naming an option that breaks its rule. */
  constructor(options: TickerOptions) {
    const tickMs = options.tickMs ?? DEFAULTS.tickMs;
    const slotCount = options.slotCount ?? DEFAULTS.slotCount;
    if (options.clock === undefined) throw new ConfigError('clock', options.clock, 'is required');
    // TimerWheel checks these too, but only when the first wheel is made.
    if (!Number.isSafeInteger(tickMs) || tickMs < 1) {
      throw new ConfigError('tickMs', tickMs, 'must be a whole number of milliseconds ≥ 1');
    }
    if (!Number.isSafeInteger(slotCount) || slotCount < 1) {
      throw new ConfigError('slotCount', slotCount, 'must be a whole number ≥ 1');
    }
    this.#clock = options.clock;
    this.#tickMs = tickMs;
    this.#slotCount = slotCount;
    this.#onError = options.onError;
  }

  /** Whether the interval is running (some wheel has entries). */
  get running(): boolean {
    return this.#interval !== undefined;
  }

  /**
   * A wheel driven by this ticker: its entries fire within one tick after
   * their deadline. Scheduling into it after `close()` throws ClosedError.
   */
  createWheel<T>(onExpire: (item: T) => void): TimerWheel<T> {
    if (this.#closed) throw new ClosedError('ticker');
    return new TimerWheel<T>({
      tickMs: this.#tickMs,
      slotCount: this.#slotCount,
      onExpire,
      startAt: this.#clock.now(),
      onActive: (wheel) => this.#activate(wheel),
    });
  }

  /** Stops the interval and closes the wheels that still hold entries. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#interval?.cancel();
    this.#interval = undefined;
    for (const wheel of this.#active) wheel.close();
    this.#active.clear();
  }

  #activate(wheel: DrivenWheel): void {
    if (this.#closed) throw new ClosedError('ticker');
    this.#active.add(wheel);
    this.#interval ??= this.#clock.setInterval(() => this.#tick(), this.#tickMs);
  }

  #tick(): void {
    const now = this.#clock.now();
    let firstError: { error: unknown } | undefined;
    // A copy: callbacks may schedule into other wheels and so add to the set.
    for (const wheel of [...this.#active]) {
      try {
        wheel.advance(now);
      } catch (error) {
        if (this.#onError !== undefined) this.#onError(error);
        else firstError ??= { error };
      }
      if (wheel.size === 0) this.#active.delete(wheel);
    }
    if (this.#active.size === 0) {
      this.#interval?.cancel();
      this.#interval = undefined;
    }
    if (firstError !== undefined) throw firstError.error;
  }
}
