/**
 * SIGSTOPs a Herald process at a moment it holds no write transaction on its
 * SQLite file. A process stopped inside one keeps SQLite's only write lock
 * until it is continued, and every other process waits for it
 * (`busyTimeoutMs`, then fails): a property of SQLite (see the README's
 * cluster notes), not what a lease-takeover test is about. Renewals, sweeps
 * and settles write for a millisecond or so at a time, so a pause lands inside
 * one now and then (often under load): then the process is continued, given a
 * moment to commit, and paused again.
 */
import Database from 'better-sqlite3';

export async function pauseOutsideAWrite(signal: (signal: 'SIGSTOP' | 'SIGCONT') => void, dbPath: string, maxTries = 50): Promise<void> {
  const probe = new Database(dbPath, { timeout: 0 });
  try {
    for (let tries = 1; ; tries++) {
      signal('SIGSTOP');
      try {
        // Free only if nobody holds the write lock; let go of it at once.
        probe.prepare('BEGIN IMMEDIATE').run();
        probe.prepare('ROLLBACK').run();
        return;
      } catch (error) {
        if (tries >= maxTries) throw new Error(`the process held the write lock at each of ${tries} pauses`, { cause: error });
        signal('SIGCONT');
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
  } finally {
    probe.close();
  }
}
