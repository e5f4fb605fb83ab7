/**
 * The SQLite store's work signal: `PRAGMA data_version`, which changes on this connection
 * whenever another connection commits, polled on the clock. A poll costs a few microseconds.
 */
import type { Clock, TimerHandle } from '../../clock.ts';
import type { Statement } from './sql.ts';

/** Calls `listener` after each poll that finds the data version changed; cancel the timer to stop. */
export function pollDataVersion(dataVersion: Statement<number>, clock: Clock, pollIntervalMs: number, listener: () => void): TimerHandle {
  let seen = dataVersion.get();
  return clock.setInterval(() => {
    let version: number | undefined;
    try {
      version = dataVersion.get();
    } catch {
      // Closed under us: close() is about to cancel this timer.
      return;
    }
    if (version === seen) return;
    seen = version;
    listener();
  }, pollIntervalMs);
}
