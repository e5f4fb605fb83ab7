/**
 * SIGSTOPs a Herald process at a moment it holds no write transaction on its
 * SQLite file. A process stopped inside one keeps SQLite's only write lock
 * until it is continued, and every other process waits for it
 * (`busyTimeoutMs`, then fails): a property of SQLite (see the README's
 * cluster notes), not what a lease-takeover test is about.
 *
 * So the lock is taken here first (`BEGIN IMMEDIATE`, waiting for it like any
 * writer), the process is stopped while it cannot be inside a write, and the
 * lock is let go only once the kernel shows every thread of the process
 * stopped, when it can no longer start one.
 *
 * Why not stop first and then probe the lock, as this did before: `kill()`
 * returns before the stop lands. A thread inside a system call finishes it
 * first, and on a loaded machine a thread preempted there may not run again
 * for milliseconds; a probe made in that gap finds the lock free, and the
 * process then takes it and freezes holding it, so the other node waits for
 * the lock instead of taking over the slots (the takeover test then hangs).
 */
import { readdirSync, readFileSync } from 'node:fs';
import Database from 'better-sqlite3';

/** Long enough for any write transaction of a test to end; the wait ends as soon as the lock is free. */
const LOCK_WAIT_MS = 10_000;

export async function pauseOutsideAWrite(pid: number | undefined, dbPath: string): Promise<void> {
  // Never 0 or negative: kill() would stop a whole process group, or every process it may signal.
  if (pid === undefined || !Number.isInteger(pid) || pid <= 0) throw new Error(`no process to pause (pid ${pid})`);
  const lock = new Database(dbPath, { timeout: LOCK_WAIT_MS });
  try {
    lock.prepare('BEGIN IMMEDIATE').run();
    try {
      process.kill(pid, 'SIGSTOP');
      while (!allThreadsStopped(pid)) await new Promise(setImmediate);
    } finally {
      lock.prepare('ROLLBACK').run();
    }
  } finally {
    lock.close();
  }
}

/** True once every thread of `pid` is in the stopped state (`T` in /proc); throws if the process is gone. */
function allThreadsStopped(pid: number): boolean {
  return readdirSync(`/proc/${pid}/task`).every((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    // The state follows the command name, which is in parentheses and may itself contain them.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    if (state === 'Z' || state === 'X') throw new Error(`process ${pid} exited while it was being paused`);
    return state === 'T';
  });
}
