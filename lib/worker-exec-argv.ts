/**
 * The `execArgv` for Herald's worker threads (the signing pool, the SQLite
 * store thread): a worker must load its TypeScript file through tsx like the
 * main thread. Workers inherit `execArgv`, which carries tsx under
 * `tsx script.ts` and `node --import=tsx`; when tsx was registered another way
 * (its API), it is added. Dropped: `--input-type`, which only applies to the
 * process's own entry (`-e`) and makes a worker fail to load any file, and the
 * per-process flags a worker refuses outright (ERR_WORKER_INVALID_EXEC_ARGV),
 * such as `--expose-gc` (the benchmarks that read the heap run with it).
 */
const NOT_FOR_WORKERS = ['--input-type', '--expose-gc', '--expose_gc'];

export function workerExecArgv(): string[] {
  const inherited = process.execArgv.filter((arg) => !NOT_FOR_WORKERS.some((flag) => arg === flag || arg.startsWith(`${flag}=`)));
  if (inherited.some((arg) => arg.includes('tsx'))) return inherited;
  return [...inherited, `--import=${import.meta.resolve('tsx')}`];
}
