/**
 * A preload (`--require ./scripts/bench/thread-roles.cjs`; CommonJS because `--require`
 * also runs in `eval` workers such as the SQLite store thread, and `--import` does not) for the CPU account
 * (`cpu-account.ts`): every thread that loads it (the main thread, and each
 * worker thread, which inherits the process's preload flags) appends one
 * line to the file named by `HERALD_BENCH_THREADS`: its role, its OS thread id
 * and its Node thread id. The OS id finds the thread's CPU in
 * `/proc/<pid>/task/<tid>/stat`; the Node id is in the name of the thread's
 * `--cpu-prof` file. Nothing is written without the variable.
 */
'use strict';
const { appendFileSync, readlinkSync } = require('node:fs');
const { isMainThread, threadId, workerData } = require('node:worker_threads');

const file = process.env.HERALD_BENCH_THREADS;
if (file !== undefined && file !== '') {
  const osThreadId = readlinkSync('/proc/thread-self').split('/').pop();
  appendFileSync(file, `${roleOf()} ${osThreadId} ${threadId}\n`);
}

/** What the thread is for, told by what it was started with. */
function roleOf() {
  if (isMainThread) return 'main';
  // The SQLite store thread is started with the store's options: the database file among them.
  if (typeof workerData?.path === 'string') return 'store';
  // Herald's only other worker threads are the signing pool's (piscina), started without data.
  if (workerData === undefined) return 'signing';
  return 'worker';
}
