/**
 * One circuit breaker per endpoint.
 *
 * opossum decides when to open: it keeps the rolling failure ratio (buckets
 * rotated by one shared controller on the injected clock, no timers per
 * breaker) and opens past `errorThresholdPercentage` once `volumeThreshold`
 * attempts are in the window. The cooldown and the probe are ours, because
 * opossum's reset timer reads the real clock:
 *
 *   closed ──opossum opens──► open(probeAt) ──now ≥ probeAt, one attempt──► half-open
 *     ▲                                ▲                                     │
 *     └──────── probe succeeds ────────┼─────────────────────────────────────┤
 *                                      └──── probe fails (new cooldown) ─────┘
 *
 * While open nothing is sent and no attempt is spent: the actor gives its
 * queued deliveries back to the store, due at `probeAt`.
 */
import { EventEmitter } from 'node:events';
import CircuitBreaker from 'opossum';
import type { Clock, TimerHandle } from '../clock.ts';
import type { Outcome } from '../model.ts';
import { countsAgainstBreaker } from '../policy/classify.ts';

export const BreakerState = {
  CLOSED: 'closed',
  OPEN: 'open',
  HALF_OPEN: 'half-open',
} as const;
export type BreakerState = (typeof BreakerState)[keyof typeof BreakerState];

export interface BreakerOptions {
  /** Failure percentage in the window that opens the breaker. @default 50 */
  readonly errorThresholdPercentage: number;
  /** Attempts in the window before the ratio counts. @default 10 */
  readonly volumeThreshold: number;
  /** Length of the rolling window. @default 60 s */
  readonly windowMs: number;
  /** Time open before one probe goes. @default 60 s */
  readonly cooldownMs: number;
}

/** What the actor may do with its next delivery. */
export type BreakerPermit = 'send' | 'probe' | 'wait';

const BUCKETS = 10;
/** opossum's own reset timer must never fire: the actor runs the cooldown on the injected clock. */
const NEVER_MS = 2 ** 31 - 1;

class BreakerTrip extends Error {
  constructor(readonly outcome: Outcome) {
    super('attempt counts against the breaker');
  }
}

/** Creates the breakers of one node and owns the one interval that rotates all their windows. */
export class BreakerFamily {
  readonly #rotate = new EventEmitter();
  readonly #options: BreakerOptions;
  readonly #clock: Clock;
  readonly #timer: TimerHandle;

  constructor(clock: Clock, options: BreakerOptions) {
    this.#clock = clock;
    this.#options = options;
    this.#rotate.setMaxListeners(0);
    this.#timer = clock.setInterval(() => this.#rotate.emit('rotate'), Math.max(1, Math.floor(options.windowMs / BUCKETS)));
  }

  create(onChange: (state: BreakerState) => void): EndpointBreaker {
    const circuit = new CircuitBreaker(async (send: () => Promise<Outcome>) => {
      const outcome = await send();
      if (countsAgainstBreaker(outcome)) throw new BreakerTrip(outcome);
      return outcome;
    }, {
      timeout: false,
      resetTimeout: NEVER_MS,
      errorThresholdPercentage: this.#options.errorThresholdPercentage,
      volumeThreshold: this.#options.volumeThreshold,
      rollingCountTimeout: this.#options.windowMs,
      rollingCountBuckets: BUCKETS,
      rollingPercentilesEnabled: false,
      enableSnapshots: false,
      rotateBucketController: this.#rotate,
    });
    return new EndpointBreaker(circuit, this.#clock, this.#options.cooldownMs, onChange);
  }

  close(): void {
    this.#timer.cancel();
    this.#rotate.removeAllListeners();
  }
}

export class EndpointBreaker {
  readonly #circuit: CircuitBreaker<[() => Promise<Outcome>], Outcome>;
  readonly #clock: Clock;
  readonly #cooldownMs: number;
  readonly #onChange: (state: BreakerState) => void;
  #state: BreakerState = BreakerState.CLOSED;
  #probeAt = 0;

  constructor(
    circuit: CircuitBreaker<[() => Promise<Outcome>], Outcome>,
    clock: Clock,
    cooldownMs: number,
    onChange: (state: BreakerState) => void,
  ) {
    this.#circuit = circuit;
    this.#clock = clock;
    this.#cooldownMs = cooldownMs;
    this.#onChange = onChange;
    circuit.on('open', () => this.#open());
  }

  get state(): BreakerState {
    return this.#state;
  }

  /** When the next probe may go (meaningful while open). */
  get probeAt(): number {
    return this.#probeAt;
  }

  /** Decides whether the next delivery may go now; a `probe` permit moves the breaker to half-open. */
  permit(now: number): BreakerPermit {
    if (this.#state === BreakerState.CLOSED) return 'send';
    if (this.#state === BreakerState.OPEN && now >= this.#probeAt) {
      this.#state = BreakerState.HALF_OPEN;
      this.#onChange(this.#state);
      return 'probe';
    }
    return 'wait';
  }

  /**
   * Runs an attempt under the permit given and returns its outcome; a failed
   * delivery is an outcome, not a rejection. `undefined` means nothing was
   * sent: the breaker opened between the permit and the send.
   */
  async run(permit: 'send' | 'probe', send: () => Promise<Outcome>): Promise<Outcome | undefined> {
    if (permit === 'probe') {
      const outcome = await send();
      if (countsAgainstBreaker(outcome)) this.#open();
      else this.#close();
      return outcome;
    }
    try {
      return await this.#circuit.fire(send);
    } catch (error) {
      if (error instanceof BreakerTrip) return error.outcome;
      if ((error as { code?: unknown }).code === 'EOPENBREAKER') return undefined;
      throw error;
    }
  }

  shutdown(): void {
    this.#circuit.shutdown();
  }

  #open(): void {
    this.#probeAt = this.#clock.now() + this.#cooldownMs;
    this.#state = BreakerState.OPEN;
    this.#onChange(this.#state);
  }

  #close(): void {
    this.#state = BreakerState.CLOSED;
    this.#circuit.close();
    this.#onChange(this.#state);
  }
}
