/**
 * The PostgreSQL work signal: one dedicated connection that runs
 * `LISTEN herald_work` ({@link WORK_CHANNEL}) and calls `onChange` for every
 * notification whose payload the store accepts. The PostgreSQL twin of the
 * MongoDB change feed (`lib/store/mongo/change-feed.ts`).
 *
 *   idle ──start()──► connecting ──LISTEN done──► listening
 *                       ▲    │                       │
 *                       │    └── connect / LISTEN ───┤ error / end
 *                       │        failed              ▼
 *                       └──── timer on the clock ── waiting
 *
 *   any state ──stop()──► stopped (client ended, timer cancelled; for good)
 *
 * The signal only accelerates: the engine's periodic sweep finds every due
 * delivery whether or not a notification came, and NOTIFY is fire-and-forget
 * (a notification sent while nobody listens is gone). So when a listening
 * connection fails the signal calls `onChange` (the engine sweeps, covering
 * whatever was lost), counts the restart, reports it through `onRestart`,
 * and connects again; and every time LISTEN is in place, the first time
 * included, it calls `onChange` once more, for whatever was committed before
 * it listened. A lost notification therefore costs at most one sweep, never
 * a delivery. The first reconnect after a good connection is immediate;
 * consecutive failures back off (see {@link reconnectDelay}).
 *
 * The connection is reached through {@link ClientLike}, which `pg.Client`
 * satisfies, so this logic is tested against fakes.
 */
import type { Clock, TimerHandle } from '../../clock.ts';
import { ClosedError, ValidationError } from '../../errors.ts';
import { WORK_CHANNEL } from './schema.ts';

/** A notification as the client reports it (`pg`'s `Notification` has these fields). */
export interface WorkNotification {
  readonly channel: string;
  readonly payload?: string | undefined;
}

/**
 * What the signal needs of a connection: `pg.Client` has all of it. A new,
 * unconnected client each time; the signal never reuses one.
 */
export interface ClientLike {
  connect(): Promise<unknown>;
  query(text: string): Promise<unknown>;
  end(): Promise<void>;
  on(event: 'notification', listener: (message: WorkNotification) => void): unknown;
  on(event: 'error', listener: (error: Error) => void): unknown;
  on(event: 'end', listener: () => void): unknown;
}

export const WorkSignalRestartReason = {
  /** Connecting or running LISTEN failed (the server is down, refuses us, or went away meanwhile). */
  CONNECT_FAILED: 'connect-failed',
  /** The listening connection reported an error (the backend was terminated, the socket broke). */
  ERROR: 'error',
  /** The listening connection ended without an error. */
  ENDED: 'ended',
} as const;
export type WorkSignalRestartReason = (typeof WorkSignalRestartReason)[keyof typeof WorkSignalRestartReason];

export interface WorkSignalRestart {
  readonly reason: WorkSignalRestartReason;
  /** The error the connection failed with (absent for `ended`). */
  readonly error?: unknown;
  /** Restarts so far, this one included. */
  readonly restarts: number;
  /** How long the signal waits before connecting again. */
  readonly delayMs: number;
}

export interface WorkSignalOptions {
  /** Makes a new, unconnected client: `() => new pg.Client(config)`. */
  readonly connect: () => ClientLike;
  /**
   * Whether a notification's payload concerns this store (the store's filter
   * drops other schemas and its own writes). A filter that throws counts as
   * accepting: a needless sweep is cheaper than a missed one.
   */
  readonly accept: (payload: string) => boolean;
  /** Work may be available: sweep. Called for accepted notifications, on a lost connection and on each LISTEN. */
  readonly onChange: () => void;
  /**
   * Called on every restart (a failed connection attempt included).
   * @default nothing
   */
  readonly onRestart?: (restart: WorkSignalRestart) => void;
  /** Schedules the reconnects. */
  readonly clock: Clock;
  /**
   * The wait before the second consecutive reconnect (the first is immediate), doubling up to `maxRetryDelayMs`.
   * @default 100
   */
  readonly retryDelayMs?: number;
  /** @default 5000 */
  readonly maxRetryDelayMs?: number;
}

const DEFAULTS = Object.freeze({
  onRestart: () => undefined,
  retryDelayMs: 100,
  maxRetryDelayMs: 5_000,
} satisfies Required<Omit<WorkSignalOptions, 'connect' | 'accept' | 'onChange' | 'clock'>>);

/**
 * The wait before reconnect number `consecutive` (1-based) in a row: none
 * for the first (a single drop is usually a restarted backend or a failover,
 * and the server is back), then `retryDelayMs` doubling up to the cap.
 */
export function reconnectDelay(consecutive: number, retryDelayMs: number, maxRetryDelayMs: number): number {
  if (consecutive <= 1) return 0;
  return Math.min(maxRetryDelayMs, retryDelayMs * 2 ** Math.min(30, consecutive - 2));
}

interface Waiter {
  resolve(): void;
  reject(error: Error): void;
}

export class PostgresWorkSignal {
  readonly #connect: () => ClientLike;
  readonly #accept: (payload: string) => boolean;
  readonly #onChange: () => void;
  readonly #onRestart: (restart: WorkSignalRestart) => void;
  readonly #clock: Clock;
  readonly #retryDelayMs: number;
  readonly #maxRetryDelayMs: number;

  #started = false;
  #stopped = false;
  /**
   * Which connection attempt is current. Bumped when an attempt fails and on
   * stop, so the late events of an old client (pg emits `error` then `end`
   * for one termination) are ignored, and one failure is handled once.
   */
  #attempt = 0;
  #client: ClientLike | undefined;
  #listening = false;
  #retryTimer: TimerHandle | undefined;
  #restarts = 0;
  #consecutiveFailures = 0;
  #waiters: Waiter[] = [];

  /** @throws ValidationError (`HERALD_INVALID_INPUT`) naming the option that is missing or out of range. */
  constructor(options: WorkSignalOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('PostgresWorkSignal options', 'must be an object with connect, accept, onChange and clock');
    }
    for (const name of ['connect', 'accept', 'onChange'] as const) {
      if (typeof options[name] !== 'function') throw new ValidationError(name, `must be a function (got ${typeof options[name]})`);
    }
    if (options.onRestart !== undefined && typeof options.onRestart !== 'function') {
      throw new ValidationError('onRestart', `must be a function (got ${typeof options.onRestart})`);
    }
    const clock = options.clock as Partial<Clock> | undefined;
    if (typeof clock?.setTimeout !== 'function') throw new ValidationError('clock', 'must be a Clock with setTimeout()');
    const retryDelayMs = options.retryDelayMs ?? DEFAULTS.retryDelayMs;
    const maxRetryDelayMs = options.maxRetryDelayMs ?? DEFAULTS.maxRetryDelayMs;
    if (!Number.isInteger(retryDelayMs) || retryDelayMs < 0) {
      throw new ValidationError('retryDelayMs', `must be an integer of at least 0 (got ${String(retryDelayMs)})`);
    }
    if (!Number.isInteger(maxRetryDelayMs) || maxRetryDelayMs < retryDelayMs) {
      throw new ValidationError('maxRetryDelayMs', `must be an integer of at least retryDelayMs, ${retryDelayMs} (got ${String(maxRetryDelayMs)})`);
    }
    this.#connect = options.connect;
    this.#accept = options.accept;
    this.#onChange = options.onChange;
    this.#onRestart = options.onRestart ?? DEFAULTS.onRestart;
    this.#clock = options.clock;
    this.#retryDelayMs = retryDelayMs;
    this.#maxRetryDelayMs = maxRetryDelayMs;
  }

  /** Restarts since the signal was created (failed connection attempts included). */
  get restarts(): number {
    return this.#restarts;
  }

  /** True while LISTEN is in place on a live connection. */
  get listening(): boolean {
    return this.#listening;
  }

  /**
   * Resolves once LISTEN is in place (at once if it is now); notifications
   * committed from then on are signalled.
   * @throws ClosedError (`HERALD_CLOSED`, as a rejection) when the signal is or gets stopped first.
   */
  whenListening(): Promise<void> {
    if (this.#stopped) return Promise.reject(new ClosedError('the PostgreSQL work signal'));
    if (this.#listening) return Promise.resolve();
    return new Promise<void>((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /**
   * Connects and listens, in the background: a failure, the first included,
   * is retried on the clock and reported through `onRestart`, never thrown.
   * Calling it again while running does nothing.
   * @throws ClosedError (`HERALD_CLOSED`) after `stop()`: a stopped signal stays stopped.
   */
  start(): void {
    if (this.#stopped) throw new ClosedError('the PostgreSQL work signal');
    if (this.#started) return;
    this.#started = true;
    void this.#open();
  }

  /** Ends the client and cancels a pending reconnect; nothing reconnects afterwards. Calling it again does nothing. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#attempt++;
    this.#listening = false;
    this.#retryTimer?.cancel();
    this.#retryTimer = undefined;
    const closed = new ClosedError('the PostgreSQL work signal');
    for (const waiter of this.#waiters.splice(0)) waiter.reject(closed);
    const client = this.#client;
    this.#client = undefined;
    await client?.end().catch(() => undefined);
  }

  async #open(): Promise<void> {
    const attempt = ++this.#attempt;
    let client: ClientLike;
    try {
      client = this.#connect();
    } catch (error) {
      this.#fail(attempt, WorkSignalRestartReason.CONNECT_FAILED, error);
      return;
    }
    this.#client = client;
    // Listeners go on before connecting: pg emits 'error' on the client when the server ends
    // the backend, and an 'error' with no listener would crash the process.
    client.on('error', (error) => this.#fail(attempt, WorkSignalRestartReason.ERROR, error));
    client.on('end', () => this.#fail(attempt, WorkSignalRestartReason.ENDED, undefined));
    client.on('notification', (message) => {
      if (attempt !== this.#attempt || message.channel !== WORK_CHANNEL) return;
      if (this.#accepts(message.payload ?? '')) this.#signal();
    });
    try {
      await client.connect();
      // Stopped while connecting: stop() has ended this client already.
      if (attempt !== this.#attempt) return;
      await client.query(`LISTEN ${WORK_CHANNEL}`);
    } catch (error) {
      this.#fail(attempt, WorkSignalRestartReason.CONNECT_FAILED, error);
      return;
    }
    // Stopped, or the connection failed by an event, while LISTEN was on its way.
    if (attempt !== this.#attempt) return;
    this.#listening = true;
    this.#consecutiveFailures = 0;
    for (const waiter of this.#waiters.splice(0)) waiter.resolve();
    // Whatever was committed before LISTEN took effect was signalled to nobody.
    this.#signal();
  }

  /** The connection of `attempt` failed: the first report of it restarts; later ones, and any after stop, are ignored. */
  #fail(attempt: number, reason: WorkSignalRestartReason, error: unknown): void {
    if (this.#stopped || attempt !== this.#attempt) return;
    this.#attempt++;
    const wasListening = this.#listening;
    this.#listening = false;
    const client = this.#client;
    this.#client = undefined;
    void client?.end().catch(() => undefined);
    this.#restarts++;
    this.#consecutiveFailures++;
    // A failed connect is counted as a drop would be: after a good connection the first
    // reconnect is immediate, and a server that stays down is retried ever more slowly.
    const delayMs = reconnectDelay(this.#consecutiveFailures, this.#retryDelayMs, this.#maxRetryDelayMs);
    this.#report({
      reason,
      ...(reason === WorkSignalRestartReason.ENDED ? {} : { error }),
      restarts: this.#restarts,
      delayMs,
    });
    // A notification may have been sent while the connection was failing: let the engine sweep.
    // (A failed attempt had nothing to lose; the next LISTEN signals anyway.)
    if (wasListening) this.#signal();
    // Even an immediate reconnect goes through the clock: never from inside the client's own
    // event handler, and stop() has one thing to cancel.
    this.#retryTimer = this.#clock.setTimeout(() => {
      this.#retryTimer = undefined;
      if (!this.#stopped) void this.#open();
    }, delayMs);
  }

  #accepts(payload: string): boolean {
    try {
      return this.#accept(payload);
    } catch {
      return true;
    }
  }

  #signal(): void {
    try {
      this.#onChange();
    } catch {
      // A listener's failure is its own; the signal goes on.
    }
  }

  #report(restart: WorkSignalRestart): void {
    try {
      this.#onRestart(restart);
    } catch {
      // Reporting must not stop the signal.
    }
  }
}
