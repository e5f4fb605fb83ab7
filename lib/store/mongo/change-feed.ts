/**
 * The MongoDB work signal: one change stream on the database, filtered on the
 * server to the changes that make work available (see
 * {@link changeFeedPipeline}), calling `onChange` for each.
 *
 *   stopped ──start()──► streaming ──error / invalidate──► restarting ──► streaming
 *                          │  ▲                                │
 *                          │  └──── setSlots() (reopen) ◄──────┘
 *                          └──stop()──► stopped (token flushed)
 *
 * The feed only accelerates: the engine's periodic sweep finds every due
 * delivery whether or not a signal came. So on any failure the feed calls
 * `onChange` (the engine sweeps, covering whatever the stream missed),
 * counts the restart, reports it through `onRestart`, and opens a new
 * stream: from the last resume token when the error is resumable, from now
 * (the token dropped) when the token is lost (ChangeStreamHistoryLost), the
 * stream was invalidated, or the error is anything else. The first restart
 * after a good batch is immediate; further consecutive ones back off.
 *
 * The stream is reached through {@link OpenStream}, which the driver's
 * `Db.watch()` satisfies, so this logic is tested against fakes.
 */
import type { Clock, TimerHandle } from '../../clock.ts';
import { isChangeStreamHistoryLost, isResumableChangeStreamError } from './mongo-errors.ts';
import type { ResumeTokenKeeper } from './resume-tokens.ts';
import { Collections } from './schema.ts';

/** What the feed needs of a change stream: the driver's `ChangeStream` has all three. */
export interface ChangeStreamLike {
  tryNext(): Promise<{ readonly operationType: string } | null>;
  readonly resumeToken: unknown;
  close(): Promise<void>;
}

/**
 * An aggregation stage, or a part of one: the driver's `Document`, written here so that the
 * declarations of the public `MongoStore` name no type of the driver.
 */
export type PipelineDocument = Record<string, unknown>;

export interface OpenStreamOptions {
  /** Resume after this token; absent: start from now. */
  readonly resumeAfter?: unknown;
  /** The pipeline to filter with ({@link changeFeedPipeline}). */
  readonly pipeline: PipelineDocument[];
}

export type OpenStream = (options: OpenStreamOptions) => ChangeStreamLike;

export const ChangeFeedRestartReason = {
  /** The stream reported `invalidate` (the database was dropped or renamed). */
  INVALIDATED: 'invalidated',
  /** The resume token is no longer in the oplog (error 286). */
  HISTORY_LOST: 'history-lost',
  /** Network trouble, an election: resumed from the last token. */
  RESUMABLE_ERROR: 'resumable-error',
  /** Anything else (an invalid token, a server error): started again from now. */
  ERROR: 'error',
} as const;
export type ChangeFeedRestartReason = (typeof ChangeFeedRestartReason)[keyof typeof ChangeFeedRestartReason];

export interface ChangeFeedRestart {
  readonly reason: ChangeFeedRestartReason;
  /** The error that ended the stream (absent for `invalidated`). */
  readonly error?: unknown;
  /** Restarts so far, this one included. */
  readonly restarts: number;
  /** True when the new stream resumes from the last token, false when it starts from now. */
  readonly resumed: boolean;
  /** How long the feed waits before opening the new stream. */
  readonly delayMs: number;
}

export interface ChangeFeedOptions {
  readonly open: OpenStream;
  readonly tokens: ResumeTokenKeeper;
  readonly clock: Clock;
  readonly onChange: () => void;
  readonly onRestart: (restart: ChangeFeedRestart) => void;
  /**
   * The store's own mark on the events and deliveries it inserts (`origin`): those are not
   * signalled, since this process already knows of them. Absent: every insert is.
   */
  readonly origin?: string;
  /** The delay before the second consecutive restart, doubling up to `maxRestartDelayMs`. */
  readonly restartDelayMs: number;
  readonly maxRestartDelayMs: number;
}

/** Thrown inside the feed when the stream reports `invalidate`. */
class StreamInvalidated extends Error {}

/** Why a stream ended, from the error it ended with. */
export function classifyChangeFeedError(error: unknown): ChangeFeedRestartReason {
  if (error instanceof StreamInvalidated) return ChangeFeedRestartReason.INVALIDATED;
  if (isChangeStreamHistoryLost(error)) return ChangeFeedRestartReason.HISTORY_LOST;
  if (isResumableChangeStreamError(error)) return ChangeFeedRestartReason.RESUMABLE_ERROR;
  return ChangeFeedRestartReason.ERROR;
}

/** The wait before restart number `consecutive` (1-based) in a row: none for the first, then doubling. */
export function restartDelay(consecutive: number, baseMs: number, maxMs: number): number {
  if (consecutive <= 1) return 0;
  return Math.min(maxMs, baseMs * 2 ** Math.min(30, consecutive - 2));
}

/**
 * The server-side filter. Passed: outbox inserts (every node fans out);
 * delivery inserts in `slots` (all slots when `undefined`), both only when
 * another process wrote them (their `origin` is not `origin`); delivery updates
 * that make work due now for whoever owns the slot (replay, resume: they set
 * `wokeAt`; retries and releases are the owner's own and need no signal);
 * an endpoint enabled again; and `invalidate`. Claims and settles, the bulk
 * of the writes, never reach the client. Only the fields the feed reads are
 * kept (the resume token `_id` always is).
 */
export function changeFeedPipeline(slots: readonly number[] | undefined, origin?: string): PipelineDocument[] {
  const notOurs: PipelineDocument = origin === undefined ? {} : { 'fullDocument.origin': { $ne: origin } };
  const deliveryInsert: PipelineDocument = { operationType: 'insert', 'ns.coll': Collections.DELIVERIES, ...notOurs };
  if (slots !== undefined) deliveryInsert['fullDocument.slot'] = { $in: [...slots] };
  return [
    {
      $match: {
        $or: [
          { operationType: 'insert', 'ns.coll': Collections.EVENTS, ...notOurs },
          deliveryInsert,
          {
            operationType: 'update',
            'ns.coll': Collections.DELIVERIES,
            'updateDescription.updatedFields.wokeAt': { $exists: true },
          },
          {
            operationType: 'update',
            'ns.coll': Collections.ENDPOINTS,
            'updateDescription.updatedFields.status': 'enabled',
          },
          { operationType: 'invalidate' },
        ],
      },
    },
    { $project: { operationType: 1, ns: 1 } },
  ];
}

interface Deferred {
  readonly promise: Promise<void>;
  resolve(): void;
}

/** A new deferred that also settles `previous`: whoever waits on a replaced one is not left hanging. */
function succeed(previous: Deferred): Deferred {
  const next = deferred();
  void next.promise.then(previous.resolve);
  return next;
}

function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

export class ChangeFeed {
  readonly #options: ChangeFeedOptions;
  #slots: readonly number[] | undefined;
  #slotsKey: string;
  #stream: ChangeStreamLike | undefined;
  #loop: Promise<void> | undefined;
  #stopped = true;
  /** The slots changed: close the stream and open one with the new filter, from the current token. */
  #reopen = false;
  #restarts = 0;
  #consecutiveFailures = 0;
  #ready = deferred();
  #sleepTimer: TimerHandle | undefined;
  #wake: (() => void) | undefined;

  constructor(options: ChangeFeedOptions, slots?: readonly number[]) {
    this.#options = options;
    this.#slots = slots === undefined ? undefined : normaliseSlots(slots);
    this.#slotsKey = slotsKey(this.#slots);
  }

  /** Restarts since the feed was created. */
  get restarts(): number {
    return this.#restarts;
  }

  get running(): boolean {
    return !this.#stopped;
  }

  /**
   * Resolves once the current stream has answered (changes committed from then on are signalled);
   * a wait begun before a reopen or restart resolves when the stream after it answers, or on `stop()`.
   */
  whenReady(): Promise<void> {
    return this.#ready.promise;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    this.#loop = this.#run();
  }

  /** Filters to these slots from now on (`undefined`: every slot). Reopens the stream only if they changed. */
  setSlots(slots: readonly number[] | undefined): void {
    const next = slots === undefined ? undefined : normaliseSlots(slots);
    const key = slotsKey(next);
    if (key === this.#slotsKey) return;
    this.#slots = next;
    this.#slotsKey = key;
    if (this.#stopped || this.#stream === undefined) return;
    this.#reopen = true;
    this.#ready = succeed(this.#ready);
    void this.#stream.close().catch(() => undefined);
  }

  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#ready.resolve();
    this.#sleepTimer?.cancel();
    this.#wake?.();
    await this.#stream?.close().catch(() => undefined);
    await this.#loop;
    this.#loop = undefined;
  }

  async #run(): Promise<void> {
    const { tokens, clock } = this.#options;
    let token: unknown;
    let loaded = false;
    while (!this.#stopped) {
      let stream: ChangeStreamLike | undefined;
      try {
        if (!loaded) {
          token = await tokens.load(clock.now());
          loaded = true;
          if (this.#stopped) break;
        }
        const pipeline = changeFeedPipeline(this.#slots, this.#options.origin);
        stream = this.#options.open(token === undefined ? { pipeline } : { pipeline, resumeAfter: token });
        this.#stream = stream;
        for (;;) {
          const change = await stream.tryNext();
          if (change?.operationType === 'invalidate') throw new StreamInvalidated('the change stream was invalidated');
          // Signalled before anything else: the stream's token is already past this change, and a
          // reopen (or a restart) resumes from that token, so a change not signalled now never is.
          if (change !== null) this.#signal();
          if (this.#stopped || this.#reopen) break;
          this.#consecutiveFailures = 0;
          this.#ready.resolve();
          token = stream.resumeToken ?? token;
          await tokens.offer(token, clock.now(), change === null);
        }
      } catch (error) {
        if (this.#stopped) break;
        // An invalidated stream cannot be resumed from its token, not even to reopen with new slots.
        if (error instanceof StreamInvalidated) this.#reopen = false;
        if (!this.#reopen) {
          const reason = classifyChangeFeedError(error);
          const resumed = reason === ChangeFeedRestartReason.RESUMABLE_ERROR;
          if (resumed) {
            token = stream?.resumeToken ?? token;
          } else {
            token = undefined;
            await tokens.forget().catch(() => undefined);
          }
          this.#restarts++;
          this.#consecutiveFailures++;
          const delayMs = restartDelay(this.#consecutiveFailures, this.#options.restartDelayMs, this.#options.maxRestartDelayMs);
          this.#ready = succeed(this.#ready);
          this.#report({
            reason,
            ...(reason === ChangeFeedRestartReason.INVALIDATED ? {} : { error }),
            restarts: this.#restarts,
            resumed,
            delayMs,
          });
          // The stream may have missed changes: let the engine sweep.
          this.#signal();
          if (delayMs > 0) await this.#sleep(delayMs);
        }
      } finally {
        this.#stream = undefined;
        await stream?.close().catch(() => undefined);
      }
      if (this.#reopen) {
        this.#reopen = false;
        token = stream?.resumeToken ?? token;
      }
    }
    await tokens.flush(clock.now()).catch(() => undefined);
  }

  #signal(): void {
    try {
      this.#options.onChange();
    } catch {
      // A listener's failure is its own; the feed goes on.
    }
  }

  #report(restart: ChangeFeedRestart): void {
    try {
      this.#options.onRestart(restart);
    } catch {
      // Reporting must not stop the feed.
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.#sleepTimer?.cancel();
        this.#sleepTimer = undefined;
        this.#wake = undefined;
        resolve();
      };
      this.#wake = done;
      this.#sleepTimer = this.#options.clock.setTimeout(done, ms);
    });
  }
}

function normaliseSlots(slots: readonly number[]): number[] {
  return [...new Set(slots)].sort((a, b) => a - b);
}

function slotsKey(slots: readonly number[] | undefined): string {
  return slots === undefined ? '*' : slots.join(',');
}
