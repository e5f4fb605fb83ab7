/**
 * An endpoint's rate limit: a token bucket on the injected clock, and the
 * attempts waiting for its tokens, first come first served.
 *
 * State: `#tokens` as of `#at` — fractional, at most `burst`, full when the
 * bucket is made — refilled at `perSecond` as time passes (computed when read:
 * nothing runs while nobody waits). `#waiters`: a FIFO of attempts waiting for
 * a token; while it is not empty one clock timer is set, for when the first
 * waiter's token is due; it hands out the tokens in order and sets itself
 * again for the next.
 *
 *   tryTake() ─ a whole token, nobody waiting ─► taken (true)
 *   wait() ─► waiting ──timer: a token is due──► taken (resolves true)
 *                └──── reconfigure() / open() ──► woken without one (resolves false): look again
 *
 * A clock timer, not the node's timer wheel: the wheel's 100 ms resolution
 * would let a bucket of burst b start at most 10 × b attempts a second. The
 * timer is the clock's (unref'd), one per bucket with waiters, cancelled by
 * `open()`. Its millisecond resolution is the bucket's: a burst below
 * `perSecond / 1000` cannot be kept to by the waiters alone.
 */
import type { Clock, TimerHandle } from '../clock.ts';
import type { RateLimit } from '../model.ts';

/** Tokens short of a whole one by less than this count as whole: `n × 1000 / perSecond` ms of refill is not always exact in floating point. */
const EPSILON = 1e-9;

export class TokenBucket {
  readonly #clock: Clock;
  #perSecond: number;
  #burst: number;
  #tokens: number;
  #at: number;
  readonly #waiters: Array<(taken: boolean) => void> = [];
  #timer: TimerHandle | undefined;

  constructor(limit: RateLimit, clock: Clock) {
    this.#clock = clock;
    this.#perSecond = limit.perSecond;
    this.#burst = limit.burst;
    this.#tokens = limit.burst;
    this.#at = clock.now();
  }

  get limit(): RateLimit {
    return { perSecond: this.#perSecond, burst: this.#burst };
  }

  /** Attempts waiting for a token. */
  get waiting(): number {
    return this.#waiters.length;
  }

  /** Tokens held at `now` (fractional). */
  tokens(now: number): number {
    this.#refill(now);
    return this.#tokens;
  }

  /** Takes a token if a whole one is there and nobody waits for one. */
  tryTake(now: number): boolean {
    this.#refill(now);
    if (this.#waiters.length > 0 || this.#tokens < 1 - EPSILON) return false;
    this.#tokens = Math.max(0, this.#tokens - 1);
    return true;
  }

  /** How long one more attempt would wait for its token, behind those waiting (0: one is there now). */
  waitMs(now: number): number {
    this.#refill(now);
    return this.#msFor(this.#waiters.length + 1 - this.#tokens);
  }

  /** Attempts that could start within `horizonMs` of `now`: the tokens held and those refilled meanwhile, less those already waiting. */
  room(now: number, horizonMs: number): number {
    this.#refill(now);
    return Math.floor(this.#tokens + (this.#perSecond * horizonMs) / 1000 + EPSILON) - this.#waiters.length;
  }

  /** Waits in turn for a token: true once taken; false when woken without one (the limit changed, or the bucket was opened). */
  wait(): Promise<boolean> {
    return new Promise((resolve) => {
      this.#waiters.push(resolve);
      this.#arm();
    });
  }

  /**
   * A new limit, from now: the tokens held are kept up to the new burst. Those waiting are woken
   * without a token, to look again under the new rate.
   */
  reconfigure(limit: RateLimit, now: number): void {
    this.#refill(now);
    this.#perSecond = limit.perSecond;
    this.#burst = limit.burst;
    this.#tokens = Math.min(this.#tokens, this.#burst);
    this.open();
  }

  /** Wakes every waiter without a token and cancels the timer (the limit is lifted, or its actor closes). */
  open(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    for (const resolve of this.#waiters.splice(0)) resolve(false);
  }

  #refill(now: number, cap = this.#burst): void {
    if (now <= this.#at) return;
    this.#tokens = Math.min(cap, this.#tokens + ((now - this.#at) * this.#perSecond) / 1000);
    this.#at = now;
  }

  #arm(): void {
    if (this.#timer !== undefined || this.#waiters.length === 0) return;
    this.#refill(this.#clock.now());
    this.#timer = this.#clock.setTimeout(() => this.#grant(), this.#msFor(1 - this.#tokens));
  }

  /** Whole milliseconds until `short` more tokens have come (a hair of floating-point error is not a millisecond more). */
  #msFor(short: number): number {
    return short <= EPSILON ? 0 : Math.max(0, Math.ceil((short * 1000) / this.#perSecond - EPSILON));
  }

  #grant(): void {
    this.#timer = undefined;
    // The timer fires on the whole millisecond after the token came: what came meanwhile is the
    // next token's, not lost to a full bucket (someone was waiting for it all along).
    this.#refill(this.#clock.now(), this.#burst + this.#perSecond / 1000);
    while (this.#waiters.length > 0 && this.#tokens >= 1 - EPSILON) {
      this.#tokens = Math.max(0, this.#tokens - 1);
      this.#waiters.shift()!(true);
    }
    this.#tokens = Math.min(this.#tokens, this.#burst);
    this.#arm();
  }
}
