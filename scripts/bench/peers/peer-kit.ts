/**
 * What the peer scenarios share: CPU read from `/proc/<pid>/stat`, the
 * delivery every peer worker performs (sign with
 * Herald's own Standard Webhooks code, POST with an undici `Pool` of 16
 * connections), a worker process forked and awaited until ready, the sink
 * watched until every id has arrived, and a cleanup list that also runs,
 * synchronously, on SIGINT/SIGTERM.
 *
 * The workload is the throughput scenario's: `events` bodies of 1 KiB JSON
 * over 100 endpoint paths of the bench's sink, event `n` to `/ep/${n % 100}`
 * with `webhook-id: evt_${n}` (Herald names its events itself: the sink
 * counts distinct ids either way).
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { computeSignature } from '../../../lib/signing/signature.ts';
import { stopChild, stopPidSync } from '../../../test-kit/process-stop.ts';
import { payloadOf, preciseNow, progress, type SinkProcess } from '../harness.ts';

export const ENDPOINTS = 100;
export const BODY_BYTES = 1024;
export const ENQUEUE_BATCH = 1_000;
/** Herald's default `connectionsPerOrigin`, and the throughput baseline's. */
export const CONNECTIONS = 16;
/** The signing key every peer uses (32 bytes, as Herald generates). */
export const SIGNING_KEY = Buffer.alloc(32, 7);

/** One job of the workload: what a producer enqueues and a worker delivers. */
export interface DeliveryJob {
  readonly id: string;
  readonly path: string;
  /** The JSON text, sent byte for byte. */
  readonly body: string;
}

export function workload(events: number): DeliveryJob[] {
  return Array.from({ length: events }, (_, n) => ({ id: `evt_${n}`, path: `/ep/${n % ENDPOINTS}`, body: JSON.stringify(payloadOf(BODY_BYTES, n)) }));
}

// Delivery (inside a peer's worker process) ------------------------------------

export interface Sender {
  deliver(job: DeliveryJob): Promise<void>;
  close(): Promise<void>;
}

/** Signs (`webhook-id`, `webhook-timestamp`, `webhook-signature`) and POSTs; throws on a non-2xx answer so the peer retries. */
export function createSender(origin: string): Sender {
  const pool = new Pool(origin, { connections: CONNECTIONS, pipelining: 1 });
  return {
    async deliver(job) {
      const timestamp = Math.floor(Date.now() / 1000);
      const { statusCode, body } = await pool.request({
        path: job.path,
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'webhook-id': job.id,
          'webhook-timestamp': String(timestamp),
          'webhook-signature': `v1,${computeSignature(SIGNING_KEY, job.id, timestamp, job.body)}`,
        },
        body: job.body,
      });
      await body.dump();
      if (statusCode < 200 || statusCode >= 300) throw new Error(`sink answered ${statusCode} for ${job.id}`);
    },
    close: () => pool.close(),
  };
}

/** The installed version of a dependency, from its package.json. */
export function packageVersion(name: string): string {
  try {
    const file = fileURLToPath(new URL(`../../../node_modules/${name}/package.json`, import.meta.url));
    return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

// CPU from /proc -----------------------------------------------------------------

let ticksPerSecond: number | undefined;

/** `getconf CLK_TCK` (normally 100), read once. */
export function clockTicksPerSecond(): number {
  ticksPerSecond ??= Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  return ticksPerSecond;
}

interface ProcStat {
  readonly ppid: number;
  /** utime + stime: this process, all its threads. */
  readonly ownTicks: number;
  /** cutime + cstime: children it has waited for. */
  readonly childTicks: number;
}

function readStat(pid: number, file = `/proc/${pid}/stat`): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  // The command name (field 2) may hold spaces and parentheses: fields start after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { ppid: Number(fields[1]), ownTicks: Number(fields[11]) + Number(fields[12]), childTicks: Number(fields[13]) + Number(fields[14]) };
}

/** CPU ticks of one process (all threads). */
export function processTicks(pid: number): number {
  return readStat(pid)?.ownTicks ?? 0;
}

/** CPU ticks of a process's main thread alone (its thread id is the process id). */
export function mainThreadTicks(pid: number): number {
  return readStat(pid, `/proc/${pid}/task/${pid}/stat`)?.ownTicks ?? 0;
}

/** CPU ticks of each live thread of a process, by OS thread id (an exited thread is no longer listed). */
export function threadTicks(pid: number): Map<number, number> {
  const ticks = new Map<number, number>();
  let tasks: string[];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return ticks;
  }
  for (const task of tasks) {
    const stat = readStat(pid, `/proc/${pid}/task/${task}/stat`);
    if (stat !== undefined) ticks.set(Number(task), stat.ownTicks);
  }
  return ticks;
}

/**
 * CPU ticks of a process and every live descendant, plus what its exited,
 * reaped children used (cutime + cstime): a Postgres postmaster with its
 * backends and background workers.
 */
export function treeTicks(rootPid: number): number {
  const stats = new Map<number, ProcStat>();
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    const stat = readStat(pid);
    if (stat !== undefined) stats.set(pid, stat);
  }
  let total = 0;
  const pending = [rootPid];
  while (pending.length > 0) {
    const pid = pending.pop()!;
    const stat = stats.get(pid);
    if (stat === undefined) continue;
    total += stat.ownTicks + stat.childTicks;
    for (const [child, s] of stats) if (s.ppid === pid) pending.push(child);
  }
  return total;
}

/** A system's processes by role, each read as cumulative ticks. */
export type TickReaders = Readonly<Record<string, () => number>>;

export function readTicks(readers: TickReaders): Record<string, number> {
  return Object.fromEntries(Object.entries(readers).map(([role, read]) => [role, read()]));
}

// Cleanup and worker processes ------------------------------------------------------

/**
 * What the scenario has to undo, newest first. `run()` on the normal path;
 * on SIGINT/SIGTERM every step runs synchronously (kill, wait, remove) and
 * the process exits, before any library's own signal hook can race it.
 */
export class Cleanup {
  readonly #steps: Array<{ readonly name: string; readonly sync: () => void; readonly async: () => Promise<void> }> = [];
  readonly #onSignal = (signal: NodeJS.Signals): void => {
    progress(`peers: ${signal}, stopping servers and workers`);
    this.runSync();
    process.exit(signal === 'SIGINT' ? 130 : 143);
  };

  constructor() {
    process.prependListener('SIGINT', this.#onSignal);
    process.prependListener('SIGTERM', this.#onSignal);
  }

  /** `sync` must do the job without the event loop; `async` defaults to it. */
  add(name: string, sync: () => void, async: () => Promise<void> = async () => sync()): void {
    this.#steps.push({ name, sync, async });
  }

  addDir(dir: string): void {
    this.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  }

  /** How many steps are registered: `undo(mark)` later undoes those added since (one round's processes). */
  mark(): number {
    return this.#steps.length;
  }

  async run(): Promise<void> {
    await this.undo(0);
  }

  async undo(mark: number): Promise<void> {
    while (this.#steps.length > mark) {
      const step = this.#steps.pop()!;
      try {
        await step.async();
      } catch (error) {
        progress(`peers: cleanup "${step.name}" failed (${String(error)}), forcing`);
        try {
          step.sync();
        } catch {
          // nothing more to do
        }
      }
    }
  }

  runSync(): void {
    while (this.#steps.length > 0) {
      const step = this.#steps.pop()!;
      try {
        step.sync();
      } catch {
        // keep going: the next step may still free something
      }
    }
  }

  dispose(): void {
    process.off('SIGINT', this.#onSignal);
    process.off('SIGTERM', this.#onSignal);
  }
}

/**
 * Forks a peer's worker entry (its own process, its own heap) and waits for
 * `{type: 'ready'}`. Registered with `cleanup`: asked to close, killed after 10 s.
 */
export async function forkWorker(file: string, config: unknown, cleanup: Cleanup): Promise<ChildProcess> {
  const child = fork(file, [JSON.stringify(config)], {
    execArgv: process.execArgv.filter((arg) => arg !== '--expose-gc' && !arg.startsWith('--cpu-prof')),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  cleanup.add(
    `worker ${child.pid}`,
    () => child.pid !== undefined && stopPidSync(child.pid, 'SIGKILL', 2_000),
    () => stopChild(child, () => (child.connected ? child.send({ type: 'close' }) : child.kill('SIGTERM')), 10_000),
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${file} not ready within 60 s`)), 60_000);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${file} exited with ${code} before it was ready`));
    });
    child.on('message', (message: { type: string; message?: string }) => {
      if (message.type === 'ready') {
        clearTimeout(timer);
        resolve();
      } else if (message.type === 'error') {
        clearTimeout(timer);
        reject(new Error(message.message));
      }
    });
  });
  child.removeAllListeners('exit');
  return child;
}

/** Inside a worker process: the config the scenario passed, and the IPC protocol's ready/close. */
export function workerProcess<Config>(start: (config: Config) => Promise<() => Promise<void>>): void {
  const config = JSON.parse(process.argv[2] ?? '{}') as Config;
  // The scenario went away (killed): never outlive it.
  process.on('disconnect', () => process.exit(0));
  // Ctrl-C reaches the whole process group: the scenario stops this process itself.
  process.on('SIGINT', () => {});
  start(config).then(
    (close) => {
      process.on('message', (message: { type: string }) => {
        if (message.type !== 'close') return;
        close().then(
          () => process.exit(0),
          () => process.exit(1),
        );
      });
      process.send?.({ type: 'ready' });
    },
    (error: unknown) => {
      process.send?.({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) }, () => process.exit(1));
    },
  );
}

// The measured window ------------------------------------------------------------------

export interface PeerMeasurement {
  readonly deliveredPerSec: number;
  readonly seconds: number;
  readonly distinct: number;
  readonly requests: number;
  readonly duplicates: number;
  readonly complete: boolean;
  /** CPU µs per delivered event (distinct ids), by process role, and their total. */
  readonly cpuUsPerEvent: Record<string, number>;
  readonly cpuUsPerEventTotal: number;
}

/**
 * Runs `produce` (which has a producer enqueue the events) while polling the sink for
 * ids, until every one of `events` distinct ids has arrived or `timeoutMs`
 * passes. Time runs from the producer's start to the arrival (sink clock,
 * the machine's monotonic one) of the request that completed the set; CPU is
 * read for every role at both ends of the window.
 */
export async function measure(name: string, sink: SinkProcess, events: number, produce: () => Promise<void>, readers: TickReaders, timeoutMs: number): Promise<PeerMeasurement> {
  await sink.take();
  const seen = new Set<string>();
  let requests = 0;
  let completedAt = 0;
  const before = readTicks(readers);
  const started = preciseNow();
  let produced = false;
  let produceError: unknown;
  const producing = produce().then(
    () => {
      produced = true;
    },
    (error: unknown) => {
      produceError = error;
    },
  );
  const deadline = started + timeoutMs;
  let reported = 0;
  while (seen.size < events && preciseNow() < deadline && produceError === undefined) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    const taken = await sink.take();
    requests += taken.ids.length;
    for (let i = 0; i < taken.ids.length; i++) {
      seen.add(taken.ids[i]!);
      if (completedAt === 0 && seen.size === events) completedAt = taken.times[i]!;
    }
    if (seen.size - reported >= events / 5) {
      reported = seen.size;
      progress(`${name}: ${seen.size}/${events} delivered${produced ? '' : ' (producer still enqueuing)'}`);
    }
  }
  const after = readTicks(readers);
  await producing;
  if (produceError !== undefined) throw produceError;
  const end = completedAt > 0 ? completedAt : preciseNow();
  const seconds = (end - started) / 1000;
  const usPerTick = 1e6 / clockTicksPerSecond();
  const perEvent = (ticks: number): number => (seen.size > 0 ? Math.round((ticks * usPerTick) / seen.size) : Number.NaN);
  const cpuUsPerEvent = Object.fromEntries(Object.keys(readers).map((role) => [role, perEvent(after[role]! - before[role]!)]));
  return {
    deliveredPerSec: Math.round(seen.size / seconds),
    seconds: Math.round(seconds * 100) / 100,
    distinct: seen.size,
    requests,
    duplicates: requests - seen.size,
    complete: seen.size >= events,
    cpuUsPerEvent,
    cpuUsPerEventTotal: perEvent(Object.keys(readers).reduce((sum, role) => sum + after[role]! - before[role]!, 0)),
  };
}

/** `/proc/self`'s ticks: the producer when it runs in the scenario process. */
export const selfTicks = (): number => processTicks(process.pid);
