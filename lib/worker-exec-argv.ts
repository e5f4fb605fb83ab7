import { isTypeScriptModule } from './worker-module.ts';

/**
 * The `execArgv` for a Herald worker thread (the signing pool, the SQLite store thread)
 * that runs `workerFile`. A TypeScript worker loads through tsx like the main thread:
 * workers inherit `execArgv`, which carries tsx under `tsx script.ts` and
 * `node --import=tsx`; when tsx was registered another way (its API), it is added. A
 * compiled (`.js`) worker gets no tsx: it needs none, and tsx is a development dependency
 * only. Dropped: `--input-type`, which only applies to the process's own entry (`-e`) and
 * makes a worker fail to load any file, and the per-process flags a worker refuses outright
 * (ERR_WORKER_INVALID_EXEC_ARGV), such as `--expose-gc` (the benchmarks that read the heap
 * run with it).
 */
const NOT_FOR_WORKERS = ['--input-type', '--expose-gc', '--expose_gc'];

export function workerExecArgv(workerFile: URL): string[] {
  const inherited = process.execArgv.filter((arg) => !NOT_FOR_WORKERS.some((flag) => arg === flag || arg.startsWith(`${flag}=`)));
  if (!isTypeScriptModule(workerFile) || inherited.some((arg) => arg.includes('tsx'))) return inherited;
  return [...inherited, `--import=${import.meta.resolve('tsx')}`];
}
