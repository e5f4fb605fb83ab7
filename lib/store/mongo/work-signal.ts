/**
 * The MongoDB store's work signal: a change stream (`change-feed.ts`) whose resume token is kept
 * in `meta` (`resume-tokens.ts`), and the slots its delivery inserts are filtered to.
 *
 *   idle ──first watch()──► running ──last unwatch──► idle (the feed stops in the background)
 *   any ──stop()──► idle, the feeds stopped
 *
 * The slot filter is the slots given to `setOwnedSlots`, else those granted to owners through
 * the store's `acquireLeases` and not released, else every slot.
 */
import { hostname } from 'node:os';
import type { Document, Filter } from 'mongodb';
import type { Clock } from '../../clock.ts';
import { messageOf, ValidationError } from '../../errors.ts';
import { ChangeFeed } from './change-feed.ts';
import type { ChangeFeedRestart, ChangeStreamLike } from './change-feed.ts';
import type { OpenState } from './connection.ts';
import { redactMongoUri } from './mongo-uri.ts';
import { ResumeTokenKeeper } from './resume-tokens.ts';
import type { MongoWorkSignalOptions } from './work-signal-options.ts';
import { MetaKeys, type MetaDoc } from './schema.ts';

const MINUTE = 60 * 1_000;
const DAY = 24 * 60 * MINUTE;

const DEFAULTS = Object.freeze({
  changeFeedKey: hostname() || 'default',
  maxAwaitTimeMs: 1_000,
  resumeTokenSaveIntervalMs: 1_000,
  resumeTokenIdleSaveIntervalMs: 10 * MINUTE,
  restartDelayMs: 1_000,
  maxRestartDelayMs: 30_000,
  onChangeFeedRestart: warnRestart,
} satisfies Required<MongoWorkSignalOptions>);

/** Resume-token documents of other keys not saved for this long are deleted (their feeds are gone). */
const STALE_RESUME_TOKEN_MS = 7 * DAY;

/** The change stream's documents after the feed's `$project`. */
interface FeedChange extends Document {
  readonly _id: unknown;
  readonly operationType: string;
}

export class MongoWorkSignal {
  readonly #clock: Clock;
  /** The store's mark on what it inserts: its own inserts are not signalled back to it. */
  readonly #origin: string;
  readonly #changeFeedKey: string;
  readonly #maxAwaitTimeMs: number;
  readonly #resumeTokenSaveIntervalMs: number;
  readonly #resumeTokenIdleSaveIntervalMs: number;
  readonly #restartDelayMs: number;
  readonly #maxRestartDelayMs: number;
  readonly #onChangeFeedRestart: (restart: ChangeFeedRestart) => void;

  readonly #listeners = new Set<() => void>();
  #feed: ChangeFeed | undefined;
  #feedStopping: Promise<void> | undefined;
  #restarts = 0;
  /** Slots granted to each owner through the store and not released: the feed's default filter. */
  readonly #granted = new Map<string, ReadonlySet<number>>();
  /** Slots given to setOwnedSlots(), overriding `#granted`. */
  #pinnedSlots: readonly number[] | undefined;

  /** @throws ValidationError (`HERALD_INVALID_INPUT`) naming the option. */
  constructor(options: MongoWorkSignalOptions & { readonly clock: Clock; readonly origin: string }) {
    const positive = (field: string, value: number | undefined, fallback: number, min = 1): number => {
      const v = value ?? fallback;
      if (!Number.isInteger(v) || v < min) throw new ValidationError(field, `must be an integer of at least ${min} (got ${String(v)})`);
      return v;
    };
    const key = options.changeFeedKey ?? DEFAULTS.changeFeedKey;
    if (typeof key !== 'string' || key === '') throw new ValidationError('changeFeedKey', `must be a non-empty string (got ${JSON.stringify(key)})`);
    this.#clock = options.clock;
    this.#origin = options.origin;
    this.#changeFeedKey = key;
    this.#maxAwaitTimeMs = positive('maxAwaitTimeMs', options.maxAwaitTimeMs, DEFAULTS.maxAwaitTimeMs);
    this.#resumeTokenSaveIntervalMs = positive('resumeTokenSaveIntervalMs', options.resumeTokenSaveIntervalMs, DEFAULTS.resumeTokenSaveIntervalMs, 0);
    this.#resumeTokenIdleSaveIntervalMs = positive(
      'resumeTokenIdleSaveIntervalMs',
      options.resumeTokenIdleSaveIntervalMs,
      DEFAULTS.resumeTokenIdleSaveIntervalMs,
      0,
    );
    this.#restartDelayMs = positive('restartDelayMs', options.restartDelayMs, DEFAULTS.restartDelayMs, 0);
    this.#maxRestartDelayMs = positive('maxRestartDelayMs', options.maxRestartDelayMs, DEFAULTS.maxRestartDelayMs, 0);
    this.#onChangeFeedRestart = options.onChangeFeedRestart ?? DEFAULTS.onChangeFeedRestart;
  }

  /** Change-feed restarts so far (lost tokens, invalidations, errors). */
  get restarts(): number {
    return this.#restarts;
  }

  /** Resolves once the change stream is open (changes committed from then on are signalled). */
  whenReady(): Promise<void> {
    return this.#feed?.whenReady() ?? Promise.resolve();
  }

  /** Calls `listener` on changes; the first listener starts the feed, the last one gone stops it. */
  watch(state: Pick<OpenState, 'db' | 'meta'>, listener: () => void): () => void {
    this.#listeners.add(listener);
    if (this.#feed === undefined) {
      const tokens = new ResumeTokenKeeper(
        {
          read: async (id) => (await state.meta.findOne({ _id: id }))?.token,
          write: async (id, token, savedAt) => {
            await state.meta.updateOne({ _id: id }, { $set: { token, savedAt } }, { upsert: true });
          },
          remove: async (id) => {
            await state.meta.deleteOne({ _id: id });
          },
          prune: async (savedBefore, keep) => {
            await state.meta.deleteMany(staleResumeTokensFilter(savedBefore, keep));
          },
        },
        {
          key: this.#changeFeedKey,
          saveIntervalMs: this.#resumeTokenSaveIntervalMs,
          idleSaveIntervalMs: this.#resumeTokenIdleSaveIntervalMs,
          staleAfterMs: STALE_RESUME_TOKEN_MS,
        },
      );
      const feed = new ChangeFeed(
        {
          open: ({ pipeline, resumeAfter }): ChangeStreamLike =>
            state.db.watch<Document, FeedChange>(pipeline, {
              maxAwaitTimeMS: this.#maxAwaitTimeMs,
              ...(resumeAfter === undefined ? {} : { resumeAfter }),
            }),
          tokens,
          clock: this.#clock,
          origin: this.#origin,
          onChange: () => {
            for (const l of [...this.#listeners]) l();
          },
          onRestart: (restart) => {
            this.#restarts++;
            this.#onChangeFeedRestart(restart);
          },
          restartDelayMs: this.#restartDelayMs,
          maxRestartDelayMs: this.#maxRestartDelayMs,
        },
        this.#feedSlots(),
      );
      this.#feed = feed;
      feed.start();
    }
    return () => {
      if (!this.#listeners.delete(listener) || this.#listeners.size > 0) return;
      const feed = this.#feed;
      this.#feed = undefined;
      if (feed !== undefined) this.#feedStopping = Promise.all([this.#feedStopping, feed.stop()]).then(() => undefined);
    };
  }

  /** Forgets every listener and stops the feed; resolves once every feed started has stopped. */
  async stop(): Promise<void> {
    this.#listeners.clear();
    const feed = this.#feed;
    this.#feed = undefined;
    await feed?.stop();
    await this.#feedStopping;
  }

  /** Pins the slot filter (`undefined` unpins it); a running feed reopens from its token when it changes. */
  setOwnedSlots(slots: readonly number[] | undefined): void {
    this.#pinnedSlots = slots === undefined ? undefined : [...slots];
    this.#feed?.setSlots(this.#feedSlots());
  }

  /** `owner` asked for (or released) `slots` and now holds `held` of them. */
  granted(owner: string, slots: readonly number[], held: readonly number[]): void {
    const granted = new Set(this.#granted.get(owner) ?? []);
    for (const slot of slots) granted.delete(slot);
    for (const slot of held) granted.add(slot);
    this.#granted.set(owner, granted);
    this.#feed?.setSlots(this.#feedSlots());
  }

  /** The feed's slot filter: pinned slots, else those granted to owners through the store, else all. */
  #feedSlots(): readonly number[] | undefined {
    if (this.#pinnedSlots !== undefined) return this.#pinnedSlots;
    if (this.#granted.size === 0) return undefined;
    const union = new Set<number>();
    for (const slots of this.#granted.values()) for (const slot of slots) union.add(slot);
    return [...union];
  }
}

/** The resume-token documents of other feeds not saved since `savedBefore`. */
export function staleResumeTokensFilter(savedBefore: number, keep: string): Filter<MetaDoc> {
  return { _id: { $regex: `^${MetaKeys.RESUME_TOKEN_PREFIX}`, $ne: keep }, savedAt: { $lt: savedBefore } };
}

function warnRestart(restart: ChangeFeedRestart): void {
  const why = restart.error === undefined ? '' : `: ${redactMongoUri(messageOf(restart.error))}`;
  process.emitWarning(
    `mongodb change feed restarted (${restart.reason}, restart ${restart.restarts}, ${restart.resumed ? 'resuming from its token' : 'from now, after a sweep'})${why}`,
    { code: 'HERALD_CHANGE_FEED_RESTART' },
  );
}
