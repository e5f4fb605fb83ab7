/**
 * Stopping a process without the event loop: what a cleanup does on SIGINT/SIGTERM, when no
 * promise will settle again before the process exits.
 */
import { readFileSync } from 'node:fs';

const sleeper = new Int32Array(new SharedArrayBuffer(4));
/** Blocks the thread: only for cleanup on a signal, where the event loop will not run again. */
function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}

/** Whether `pid` still runs: an exited child not yet reaped (a zombie, state Z) counts as gone. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return text[text.lastIndexOf(')') + 2] !== 'Z';
  } catch {
    return false;
  }
}

/** Sends `signal` to `pid` if it is alive; waits (blocking) up to `graceMs`, then SIGKILLs it. */
export function stopPidSync(pid: number, signal: NodeJS.Signals, graceMs: number): void {
  if (!isAlive(pid)) return;
  try {
    process.kill(pid, signal);
  } catch {
    return;
  }
  const deadline = Date.now() + graceMs;
  while (isAlive(pid) && Date.now() < deadline) sleepSync(20);
  if (isAlive(pid)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone in between
    }
  }
}
