/**
 * The `execArgv` for Herald's worker threads (the signing pool, the SQLite
 * store thread): a worker must load its TypeScript file through tsx like the
 * main thread. Workers inherit `execArgv`, which carries tsx under
 * `tsx script.ts` and `node --import=tsx`; when tsx was registered another way
 * (its API), it is added. `--input-type` only applies to the process's own
 * entry (`-e`), and a worker given it fails to load any file, so it is dropped.
 */
export function workerExecArgv(): string[] {
  const inherited = process.execArgv.filter((arg) => !arg.startsWith('--input-type'));
  if (inherited.some((arg) => arg.includes('tsx'))) return inherited;
  return [...inherited, `--import=${import.meta.resolve('tsx')}`];
}
