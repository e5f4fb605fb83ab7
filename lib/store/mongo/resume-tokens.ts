/**
 * Where the change feed keeps its resume token: one `meta` document per feed
 * key (`resume_token:<key>`), so a restarted process resumes where it stopped.
 *
 * The token is saved after the changes up to it have been signalled, at most
 * once per `saveIntervalMs` (a busy stream would otherwise write once per
 * change), and always on `flush()` (when the feed stops). Tokens from empty
 * batches (the server's `postBatchResumeToken`) are saved too, so an idle
 * feed's token keeps up with the oplog and does not fall off its end, but only
 * once per `idleSaveIntervalMs`: the save is itself a write to the database
 * the stream watches, so it advances the token again, and saving idle tokens
 * as often as changed ones would have an idle node write once a second forever.
 *
 * Each feed key has its own document (by default the store keys it by host);
 * `load()` also deletes the documents of other keys not saved for
 * `staleAfterMs` (feeds that are gone: a live feed saves at least once per
 * `idleSaveIntervalMs`), so keys of hosts that come and go do not pile up.
 *
 * The keeper knows MongoDB only through {@link TokenDocuments}, three
 * operations on one collection, so its logic is tested against a fake.
 */
import { MetaKeys } from './schema.ts';

/** The storage the keeper needs. */
export interface TokenDocuments {
  /** The token stored under `id`, or undefined. */
  read(id: string): Promise<unknown>;
  /** Stores `token` under `id` (upsert). */
  write(id: string, token: unknown, savedAt: number): Promise<void>;
  remove(id: string): Promise<void>;
  /** Deletes the token documents, other than `keep`, saved before `savedBefore`. */
  prune?(savedBefore: number, keep: string): Promise<void>;
}

export interface ResumeTokenKeeperOptions {
  /** The feed's key; processes that want separate resume positions use separate keys. */
  readonly key: string;
  /** At most one save per this many milliseconds, except on `flush()`. */
  readonly saveIntervalMs: number;
  /**
   * At most one save of a token from an empty batch (nothing signalled since the last save) per this many milliseconds.
   * @default saveIntervalMs
   */
  readonly idleSaveIntervalMs?: number;
  /**
   * `load()` deletes other keys' documents not saved for this long.
   * @default never
   */
  readonly staleAfterMs?: number;
}

export class ResumeTokenKeeper {
  readonly #documents: TokenDocuments;
  readonly #id: string;
  readonly #saveIntervalMs: number;
  readonly #idleSaveIntervalMs: number;
  readonly #staleAfterMs: number | undefined;
  /** A token offered after a change is not stored yet: idle offers save it at the busy pace. */
  #changeUnsaved = false;
  /** The latest token offered, and whether it is stored. */
  #latest: unknown;
  #latestKey: string | undefined;
  #savedKey: string | undefined;
  #lastSaveAt = Number.NEGATIVE_INFINITY;
  #saving: Promise<void> | undefined;

  constructor(documents: TokenDocuments, options: ResumeTokenKeeperOptions) {
    this.#documents = documents;
    this.#id = `${MetaKeys.RESUME_TOKEN_PREFIX}${options.key}`;
    this.#saveIntervalMs = options.saveIntervalMs;
    this.#idleSaveIntervalMs = options.idleSaveIntervalMs ?? options.saveIntervalMs;
    this.#staleAfterMs = options.staleAfterMs;
  }

  /** The `meta` document id. */
  get documentId(): string {
    return this.#id;
  }

  /**
   * The stored token, if there is a usable one (an object; anything else is ignored). Given `now`,
   * first deletes other keys' stale documents (best effort).
   */
  async load(now?: number): Promise<unknown> {
    if (now !== undefined && this.#staleAfterMs !== undefined) {
      await this.#documents.prune?.(now - this.#staleAfterMs, this.#id).catch(() => undefined);
    }
    const token = await this.#documents.read(this.#id);
    if (!isUsableToken(token)) return undefined;
    this.#latest = token;
    this.#latestKey = tokenKey(token);
    this.#savedKey = this.#latestKey;
    return token;
  }

  /**
   * Records the stream's current token (null or undefined before the stream
   * has one) and saves it if it changed and the last save is old enough:
   * `saveIntervalMs` after a change, `idleSaveIntervalMs` when `idle` (an
   * empty batch) and every change so far is stored. Returns whether it wrote.
   */
  async offer(token: unknown, now: number, idle = false): Promise<boolean> {
    if (!isUsableToken(token)) return false;
    const key = tokenKey(token);
    this.#latest = token;
    this.#latestKey = key;
    if (!idle) this.#changeUnsaved = true;
    const interval = this.#changeUnsaved ? this.#saveIntervalMs : this.#idleSaveIntervalMs;
    if (key === this.#savedKey || now - this.#lastSaveAt < interval) return false;
    await this.#save(now);
    return true;
  }

  /** Saves the latest token if it is not stored yet. */
  async flush(now: number): Promise<void> {
    if (this.#latestKey === undefined || this.#latestKey === this.#savedKey) return;
    await this.#save(now);
  }

  /** Forgets the token (it is lost or invalid): the next stream starts from now. */
  async forget(): Promise<void> {
    this.#latest = undefined;
    this.#latestKey = undefined;
    this.#savedKey = undefined;
    this.#changeUnsaved = false;
    await this.#saving?.catch(() => undefined);
    await this.#documents.remove(this.#id);
  }

  /** The latest token known (stored or not). */
  get latest(): unknown {
    return this.#latest;
  }

  async #save(now: number): Promise<void> {
    const token = this.#latest;
    const key = this.#latestKey;
    this.#lastSaveAt = now;
    const changeUnsaved = this.#changeUnsaved;
    this.#changeUnsaved = false;
    const saving = this.#documents.write(this.#id, token, now);
    this.#saving = saving;
    try {
      await saving;
      this.#savedKey = key;
    } catch (error) {
      this.#changeUnsaved ||= changeUnsaved;
      throw error;
    } finally {
      if (this.#saving === saving) this.#saving = undefined;
    }
  }
}

/** A resume token is a document (`{ _data: … }`); anything else cannot be one. */
export function isUsableToken(token: unknown): boolean {
  return typeof token === 'object' && token !== null && !Array.isArray(token);
}

/** A comparable form of a token, to tell whether it changed. */
export function tokenKey(token: unknown): string {
  return JSON.stringify(token);
}
