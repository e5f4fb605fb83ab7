/**
 * The MongoDB work signal's settings, part of `MongoStoreOptions`: in a module of their own,
 * which names no driver type, so the public declarations reach no `mongodb` types.
 */
import type { ChangeFeedRestart } from './change-feed.ts';

/** The work signal's part of `MongoStoreOptions`. */
export interface MongoWorkSignalOptions {
  /**
   * The change feed's name, under which its resume token is kept in `meta`
   * (`resume_token:<key>`): each node its own, so nodes do not write one
   * document in turn nor resume from each other's position. Processes that
   * share a host give each its own key; a key not saved for a week is deleted.
   * @default the host name (`os.hostname()`)
   */
  readonly changeFeedKey?: string;
  /**
   * How long the server holds a change-stream `getMore` open waiting for changes.
   * @default 1000
   */
  readonly maxAwaitTimeMs?: number;
  /**
   * At most one resume-token write per this period after a change was signalled.
   * @default 1000
   */
  readonly resumeTokenSaveIntervalMs?: number;
  /**
   * At most one resume-token write per this period while nothing is signalled: the write is itself
   * a change the stream sees, so saving an idle token as often as a busy one writes once a second
   * forever. Keep it well inside the oplog's window.
   * @default 600000 (10 minutes)
   */
  readonly resumeTokenIdleSaveIntervalMs?: number;
  /**
   * Wait before the second consecutive change-feed restart, doubling up to `maxRestartDelayMs`.
   * @default 1000
   */
  readonly restartDelayMs?: number;
  /** @default 30000 */
  readonly maxRestartDelayMs?: number;
  /**
   * Called on every change-feed restart (after which the engine sweeps).
   * @default a process warning (`HERALD_CHANGE_FEED_RESTART`) on stderr
   */
  readonly onChangeFeedRestart?: (restart: ChangeFeedRestart) => void;
}
