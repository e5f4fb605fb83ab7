/**
 * Paces the claims that finished attempts ask for.
 *
 * A finished attempt frees one place in its actor's mailbox, and the
 * supervisor used to pump at once to fill it: one claim query per delivery.
 * A claim costs about the same for 1 row as for 100 (it walks the owned
 * slots and busy endpoints), so claiming per delivery capped Herald at a few
 * hundred deliveries per second (`npm run bench -- --only=throughput`). The pacer lets freed places accumulate:
 *
 *   freed(starving) ─┬─ the actor has nothing queued (`starving`) ─► pump now
 *                    ├─ `threshold` places freed since the last pump ─► pump now
 *                    └─ else, if no timer is set ─► one timer: pump within `maxDelayMs`
 *   pump (any way) ─► count back to 0, timer cancelled
 *
 * Mailboxes hold work beyond their concurrency (the supervisor claims up to
 * twice it), so while an actor still has work queued, waiting for a few freed
 * places leaves no sender idle; an actor whose queue ran dry is claimed for at
 * once, so progress never waits on the timer (nor, under a ManualClock, on a
 * test advancing time). The timer bounds the wait when little is finishing.
 * Other reasons to pump (a publish, another process's commit, a wake-up, the
 * sweep) are not paced.
 *
 * Lifecycle: open ──close()──► closed (the timer is cancelled; `freed()` does nothing).
 */
import type { Clock, TimerHandle } from '../clock.ts';
import { ConfigError } from '../errors.ts';

export interface ClaimPacerOptions {
  /** Places freed that make a claim worth it at once. @default 32 */
  readonly threshold?: number;
  /** The longest a freed place waits for its claim. @default 5 */
  readonly maxDelayMs?: number;
}

export interface ClaimPacerDeps {
  readonly clock: Clock;
  /** Runs the supervisor's pump (its coalescing `signal()`). */
  pump(): void;
}

const DEFAULTS = Object.freeze({
  threshold: 32,
  maxDelayMs: 5,
} satisfies Required<ClaimPacerOptions>);

export class ClaimPacer {
  readonly #deps: ClaimPacerDeps;
  readonly #threshold: number;
  readonly #maxDelayMs: number;
  #freed = 0;
  #timer: TimerHandle | undefined;
  #closed = false;

  /** @throws ConfigError (`HERALD_INVALID_CONFIG`) naming an option that breaks its rule. */
  constructor(deps: ClaimPacerDeps, options: ClaimPacerOptions = {}) {
    const threshold = options.threshold ?? DEFAULTS.threshold;
    const maxDelayMs = options.maxDelayMs ?? DEFAULTS.maxDelayMs;
    if (!Number.isSafeInteger(threshold) || threshold < 1) throw new ConfigError('threshold', threshold, 'must be a whole number ≥ 1');
    if (!Number.isFinite(maxDelayMs) || maxDelayMs < 0) throw new ConfigError('maxDelayMs', maxDelayMs, 'must be a number of milliseconds ≥ 0');
    this.#deps = deps;
    this.#threshold = threshold;
    this.#maxDelayMs = maxDelayMs;
  }

  /** Places freed and not yet claimed for. */
  get freedSinceClaim(): number {
    return this.#freed;
  }

  /**
   * One mailbox place was freed (an attempt finished).
   * @param starving the actor has nothing left queued: claim for it now.
   */
  freed(starving = false): void {
    if (this.#closed) return;
    this.#freed += 1;
    if (starving || this.#freed >= this.#threshold) this.#fire();
    else this.#timer ??= this.#deps.clock.setTimeout(() => this.#fire(), this.#maxDelayMs);
  }

  /** Cancels the timer; nothing is pumped after this. Idempotent. */
  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  #fire(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#freed = 0;
    if (!this.#closed) this.#deps.pump();
  }
}
