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
 *
 * The opossum circuit (about 7 KB with its window and listeners) is made at
 * the endpoint's first failure: a healthy endpoint never needs one, and a
 * breaker without it is closed. Until then the breaker counts only what
 * opossum's decision reads of the attempts that succeeded, their fires per
 * window bucket (a ten-number ring), and hands those counts to the circuit
 * when it makes it, so the circuit opens after exactly the attempts an
 * eagerly made one would have.
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

/** Told when a breaker changes state: its actor. */
export interface BreakerListener {
  onBreakerChange(state: BreakerState): void;
}

/**
 * An opossum circuit around one attempt's send: what the breaker uses of it. Written here rather
 * than taken from `@types/opossum`, so that Herald's published declarations, which reach this
 * module, need no type package of opossum.
 */
export interface Circuit {
  fire(send: () => Promise<Outcome>): Promise<Outcome>;
  readonly opened: boolean;
  /** The rolling window, newest bucket first; the breaker adjusts the counts of its buckets. */
  readonly status: { readonly window: { fires: number; failures: number }[] };
  on(event: 'open', listener: () => void): unknown;
  shutdown(): void;
  close(): void;
}

/** What an endpoint's breaker needs of its family: one object shared by every breaker of the node. */
export interface BreakerContext {
  readonly clock: Clock;
  readonly cooldownMs: number;
  /** How many times the window has rotated: names the bucket an attempt counted now falls in. */
  readonly rotations: number;
  /** A circuit on the node's breaker options, its window rotated with every other. */
  createCircuit(): Circuit;
}

const BUCKETS = 10;
/** opossum's own reset timer must never fire: the actor runs the cooldown on the injected clock. */
const NEVER_MS = 2 ** 31 - 1;

class BreakerTrip extends Error {
  constructor(readonly outcome: Outcome) {
    super('attempt counts against the breaker');
  }
}

/** The circuit's action: one function for every circuit, not a closure per endpoint. */
async function sendAndJudge(send: () => Promise<Outcome>): Promise<Outcome> {
  const outcome = await send();
  if (countsAgainstBreaker(outcome)) throw new BreakerTrip(outcome);
  return outcome;
}

/** Creates the breakers of one node and owns the one interval that rotates all their windows. */
export class BreakerFamily implements BreakerContext {
  readonly #rotate = new EventEmitter();
  readonly #options: BreakerOptions;
  readonly #clock: Clock;
  readonly #timer: TimerHandle;
  #rotations = 0;

  constructor(clock: Clock, options: BreakerOptions) {
    this.#clock = clock;
    this.#options = options;
    this.#rotate.setMaxListeners(0);
    this.#timer = clock.setInterval(() => {
      this.#rotations += 1;
      this.#rotate.emit('rotate');
    }, Math.max(1, Math.floor(options.windowMs / BUCKETS)));
  }

  get clock(): Clock {
    return this.#clock;
  }

  get cooldownMs(): number {
    return this.#options.cooldownMs;
  }

  get rotations(): number {
    return this.#rotations;
  }

  /** A closed breaker; its circuit is made at its first failure. */
  create(listener: BreakerListener): EndpointBreaker {
    return new EndpointBreaker(this, listener);
  }

  createCircuit(): Circuit {
    return new CircuitBreaker(sendAndJudge, {
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
  }

  close(): void {
    this.#timer.cancel();
    this.#rotate.removeAllListeners();
  }
}

export class EndpointBreaker {
  readonly #context: BreakerContext;
  readonly #listener: BreakerListener;
  #state: BreakerState = BreakerState.CLOSED;
  #probeAt = 0;
  /** Made at the first failure; until then the breaker is closed and counts fires below. */
  #circuit: Circuit | undefined;
  /**
   * Before the circuit exists: attempts started per window bucket, a ring indexed by rotation
   * (made at the first attempt). `#firesAt` is the rotation of the last count: the buckets of
   * the rotations after it have rotated in since, empty.
   */
  #fires: number[] | undefined;
  #firesAt = 0;

  constructor(context: BreakerContext, listener: BreakerListener) {
    this.#context = context;
    this.#listener = listener;
  }

  get state(): BreakerState {
    return this.#state;
  }

  /** When the next probe may go (meaningful while open). */
  get probeAt(): number {
    return this.#probeAt;
  }

  /** Whether the opossum circuit has been made (at the first failure). */
  get hasCircuit(): boolean {
    return this.#circuit !== undefined;
  }

  /** Decides whether the next delivery may go now; a `probe` permit moves the breaker to half-open. */
  permit(now: number): BreakerPermit {
    if (this.#state === BreakerState.CLOSED) return 'send';
    if (this.#state === BreakerState.OPEN && now >= this.#probeAt) {
      this.#state = BreakerState.HALF_OPEN;
      this.#listener.onBreakerChange(this.#state);
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
    const circuit = this.#circuit;
    if (circuit !== undefined) return fireOn(circuit, send);
    // No circuit yet: count the attempt where opossum would (its fire, when it starts), send it
    // directly, and only if it fails make the circuit and hand the failure to it.
    this.#countFire();
    let outcome: Outcome;
    try {
      outcome = await send();
    } catch (error) {
      // opossum counts an action that throws as a failure, then rethrows it.
      return this.#failLate(() => Promise.reject(error));
    }
    if (!countsAgainstBreaker(outcome)) return outcome;
    return this.#failLate(() => Promise.resolve(outcome));
  }

  shutdown(): void {
    this.#circuit?.shutdown();
  }

  /**
   * Gives the circuit (made now, if need be) the failure of an attempt that started before it
   * existed. That attempt's fire is already in the window, in the bucket where it started; the
   * circuit's `fire()` counts it again in the current bucket, so that bucket is given one less
   * first. While the circuit is open, `fire()` would reject without a look at the result: the
   * failure is only counted, as opossum counts the late failure of an attempt it let through.
   */
  #failLate(result: () => Promise<Outcome>): Promise<Outcome | undefined> {
    const circuit = this.#circuit ?? this.#createCircuit();
    const current = circuit.status.window[0]!;
    if (circuit.opened) {
      current.failures += 1;
      return result();
    }
    current.fires -= 1;
    return fireOn(circuit, result);
  }

  #createCircuit(): Circuit {
    const circuit = this.#context.createCircuit();
    const fires = this.#fires;
    if (fires !== undefined) {
      // window[k] is the bucket of rotation `rotations - k`; a ring slot holds a count only for
      // the BUCKETS rotations up to `#firesAt`.
      const window = circuit.status.window;
      const rotations = this.#context.rotations;
      for (let k = 0; k < window.length; k++) {
        const rotation = rotations - k;
        if (rotation <= this.#firesAt && rotation > this.#firesAt - BUCKETS && rotation >= 0) {
          window[k]!.fires += fires[rotation % BUCKETS]!;
        }
      }
      this.#fires = undefined;
    }
    circuit.on('open', () => this.#open());
    this.#circuit = circuit;
    return circuit;
  }

  #countFire(): void {
    const rotations = this.#context.rotations;
    let fires = this.#fires;
    if (fires === undefined) {
      fires = this.#fires = new Array<number>(BUCKETS).fill(0);
    } else {
      // Empty the buckets rotated in since the last count (all of them, after a whole window).
      const end = Math.min(rotations, this.#firesAt + BUCKETS);
      for (let rotation = this.#firesAt + 1; rotation <= end; rotation++) fires[rotation % BUCKETS] = 0;
    }
    this.#firesAt = rotations;
    fires[rotations % BUCKETS]! += 1;
  }

  #open(): void {
    this.#probeAt = this.#context.clock.now() + this.#context.cooldownMs;
    this.#state = BreakerState.OPEN;
    this.#listener.onBreakerChange(this.#state);
  }

  #close(): void {
    this.#state = BreakerState.CLOSED;
    this.#circuit?.close();
    this.#listener.onBreakerChange(this.#state);
  }
}

/** Runs one attempt through the circuit: a failure is an outcome, `undefined` when the circuit is open. */
async function fireOn(circuit: Circuit, send: () => Promise<Outcome>): Promise<Outcome | undefined> {
  try {
    return await circuit.fire(send);
  } catch (error) {
    if (error instanceof BreakerTrip) return error.outcome;
    if ((error as { code?: unknown }).code === 'EOPENBREAKER') return undefined;
    throw error;
  }
}
