/**
 * Stopping a process: without the event loop (`stopPidSync`), what a cleanup does on
 * SIGINT/SIGTERM, when no promise will settle again before the process exits; and with it
 * (`stopChild`), the orderly stop of a child the benches started.
 */
import type { ChildProcess } from 'node:child_process';
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

/**
 * Stops a child process with the event loop: `ask` it to go (a signal, a close message), wait
 * for its exit, and SIGKILL it if it has not gone after `killAfterMs`. Resolves at once when it
 * has exited already.
 */
export async function stopChild(child: ChildProcess, ask: () => void, killAfterMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
  ask();
  await exited;
  clearTimeout(timer);
}
