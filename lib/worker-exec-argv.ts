import { isTypeScriptModule } from './worker-module.ts';

/**
 * The `execArgv` for a Herald worker thread (the signing pool, the SQLite store thread)
 * that runs `workerFile`. A TypeScript worker loads through tsx like the main thread:
 * workers inherit `execArgv`, which carries tsx under `tsx script.ts` and
 * `node --import=tsx`; when tsx was registered another way (its API), it is added. A
 * compiled (`.js`) worker gets no tsx: it needs none, and tsx is a development dependency
 * only. Dropped: `--input-type`, which only applies to the process's own entry (`-e`) and
 * makes a worker fail to load any file, and the V8 heap, GC and code flags an operator or a
 * benchmark sets on the process (`--max-old-space-size`, `--max-semi-space-size`,
 * `--expose-gc`, `--trace-gc`, …): a worker refuses every V8 flag outright
 * (ERR_WORKER_INVALID_EXEC_ARGV), and V8 flags are the whole process's, so its threads run
 * under them anyway (a worker's own heap limits are `resourceLimits`).
 */
const NOT_FOR_WORKERS = ['--input-type'];
const V8_FLAG =
  /^--(no-)?(max-old-space-size|min-semi-space-size|max-semi-space-size|max-heap-size|heap-growing-percent|huge-max-old-generation-size|optimize-for-size|expose-gc|trace-gc\S*|gc-interval|single-threaded-gc|stack-size|stack-trace-limit|jitless|perf-basic-prof\S*|perf-prof\S*|interpreted-frames-native-stack|abort-on-uncaught-exception|disallow-code-generation-from-strings)(=|$)/;

/** Whether `arg` is a V8 flag (a worker refuses those); V8 takes `_` for `-` in its flag names. */
function isV8Flag(arg: string): boolean {
  const eq = arg.indexOf('=');
  const name = (eq === -1 ? arg : arg.slice(0, eq)).replaceAll('_', '-');
  return V8_FLAG.test(eq === -1 ? name : `${name}=`);
}

export function workerExecArgv(workerFile: URL): string[] {
  const inherited = process.execArgv.filter((arg) => !isV8Flag(arg) && !NOT_FOR_WORKERS.some((flag) => arg === flag || arg.startsWith(`${flag}=`)));
  if (!isTypeScriptModule(workerFile) || inherited.some((arg) => arg.includes('tsx'))) return inherited;
  return [...inherited, `--import=${import.meta.resolve('tsx')}`];
}
