/**
 * An actor's wake-up timers: its own wheel on the node's ticker, made at the
 * first wake-up it schedules. An endpoint whose deliveries all go through at
 * the first attempt never schedules one, and a wheel with its closures costs
 * about 2 KB, so most actors never pay for it.
 *
 *   no wheel ──schedule()──► wheel (each entry calls the listener's onWake at its time)
 *   no wheel | wheel ──close()──► closed: entries dropped, schedule() throws ClosedError
 */
import { ClosedError } from '../errors.ts';
import type { WakeListener, WakeTimers } from './actor.ts';
import type { Ticker } from './ticker.ts';
import type { TimerWheel } from './timer-wheel.ts';

export class TickerWakeTimers implements WakeTimers {
  readonly #ticker: Ticker;
  readonly #listener: WakeListener;
  #wheel: TimerWheel<null> | undefined;
  #closed = false;

  constructor(ticker: Ticker, listener: WakeListener) {
    this.#ticker = ticker;
    this.#listener = listener;
  }

  /** Wake-ups scheduled and not yet due. */
  get size(): number {
    return this.#wheel?.size ?? 0;
  }

  /** Whether the wheel has been made (at the first wake-up scheduled). */
  get hasWheel(): boolean {
    return this.#wheel !== undefined;
  }

  /**
   * Calls the listener's `onWake()` at `at` (within a tick after).
   * @throws ClosedError (`HERALD_CLOSED`) after `close()`.
   */
  schedule(at: number): void {
    if (this.#closed) throw new ClosedError('timer wheel');
    this.#wheel ??= this.#ticker.createWheel<null>(() => this.#listener.onWake());
    this.#wheel.schedule(at, null);
  }

  /** Drops every wake-up and refuses new ones. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#wheel?.close();
  }
}
