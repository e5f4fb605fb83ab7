/**
 * The SQLite store's work signal: `PRAGMA data_version`, which changes on this connection
 * whenever another connection commits. A check costs a few microseconds.
 *
 * It is checked every `pollIntervalMs` on the clock, and, where the file system reports writes
 * (inotify on Linux, kqueue on macOS), whenever the write-ahead log is written. A producer in
 * another process (the outbox pattern beside `herald start`) commits into the WAL, so its events
 * are seen within a millisecond instead of after half a poll interval on average (25 ms at the
 * default 50). The poll stays as the guarantee: a file system that reports nothing (a network
 * mount), a watch that cannot be set up or fails later, an in-memory database. Herald's own
 * commits write the WAL too; their checks find the version unchanged (a connection's own commits
 * do not change its `data_version`) and call nobody.
 */
import { watch, type FSWatcher } from 'node:fs';
import type { Clock, TimerHandle } from '../../clock.ts';
import type { Statement } from './sql.ts';

export interface DataVersionWatch {
  readonly dataVersion: Statement<number>;
  readonly clock: Clock;
  readonly pollIntervalMs: number;
  /** The write-ahead log to watch for writes (`<database>-wal`); none: the poll alone. */
  readonly walPath: string | undefined;
}

/** Calls `listener` after each check that finds the data version changed; cancel the handle to stop. */
export function watchDataVersion(options: DataVersionWatch, listener: () => void): TimerHandle {
  const { dataVersion, clock, pollIntervalMs, walPath } = options;
  let seen = dataVersion.get();
  const check = (): void => {
    let version: number | undefined;
    try {
      version = dataVersion.get();
    } catch {
      // Closed under us: close() is about to cancel this watch.
      return;
    }
    if (version === seen) return;
    seen = version;
    listener();
  };
  const timer = clock.setInterval(check, pollIntervalMs);
  const watcher = walPath === undefined ? undefined : watchWrites(walPath, check);
  return {
    cancel() {
      timer.cancel();
      watcher?.close();
    },
  };
}

/** A watch on `path` calling `onWrite` for its changes, or none where the file system cannot watch it. */
function watchWrites(path: string, onWrite: () => void): FSWatcher | undefined {
  try {
    // Not persistent: the watch never keeps the process alive (as the clock's timers are unref'd).
    const watcher = watch(path, { persistent: false }, onWrite);
    // A watch that fails later (the file replaced, the watch limit reached) leaves the poll.
    watcher.on('error', () => watcher.close());
    return watcher;
  } catch {
    return undefined;
  }
}
