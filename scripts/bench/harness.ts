/**
 * What every benchmark scenario shares: the sink in its own process, a Herald
 * on a throwaway data folder, percentiles, progress lines, bounded waits.
 *
 * Benchmarks use real time (they are not tests): Herald runs on systemClock,
 * may reach 127.0.0.0/8 only, logs nothing.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import type { EventInput } from '../../lib/producer/validate-event.ts';
import type { ProducerJob } from './producer-process.ts';

/** Milliseconds with sub-millisecond resolution, comparable across processes on this machine. */
export { machineNowMs as preciseNow } from './machine-clock.ts';

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A progress line for the runner (over IPC when forked, else on stderr). */
export function progress(text: string): void {
  if (process.send !== undefined) process.send({ type: 'progress', text });
  else process.stderr.write(`  … ${text}\n`);
}

export interface ScenarioOptions {
  readonly quick: boolean;
}

export type ScenarioResult = Record<string, unknown>;

// The sink ------------------------------------------------------------------

export interface SinkConfig {
  readonly status?: number;
  readonly delayMs?: number;
  readonly record?: 'count' | 'times' | 'ids';
  /** Requests held at once at most: one more is answered 503 at once (`null`: no limit). */
  readonly capacity?: number | null;
}

export interface SinkTake {
  readonly count: number;
  readonly times: number[];
  readonly ids: string[];
  /** With a `capacity`: requests accepted and refused (503), and the time integral of those held over `spanMs`. */
  readonly load: { readonly accepted: number; readonly refused: number; readonly heldMs: number; readonly spanMs: number };
}

export interface SinkProcess {
  readonly url: string;
  readonly port: number;
  configure(config: SinkConfig): void;
  /** What arrived since the last take (and forgets it). */
  take(): Promise<SinkTake>;
  close(): Promise<void>;
}

const SINK_FILE = fileURLToPath(new URL('./sink-process.ts', import.meta.url));

/** Forks the sink (node:http on 127.0.0.1, a free port) and waits until it listens. */
export async function startSinkProcess(config: SinkConfig = {}): Promise<SinkProcess> {
  const child: ChildProcess = fork(SINK_FILE, [JSON.stringify(config)], {
    execArgv: process.execArgv.filter((arg) => arg !== '--expose-gc' && !arg.startsWith('--cpu-prof')),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('sink did not start within 20 s')), 20_000);
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`sink exited with ${code}`)));
    child.on('message', (message: { type: string; port?: number }) => {
      if (message.type === 'listening') {
        clearTimeout(timer);
        resolve(message.port ?? 0);
      }
    });
  });
  child.removeAllListeners('exit');
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    configure: (next) => void child.send({ type: 'configure', ...next }),
    take: () =>
      new Promise<SinkTake>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('sink did not answer take within 30 s')), 30_000);
        const onMessage = (message: { type: string } & SinkTake): void => {
          if (message.type !== 'taken') return;
          clearTimeout(timer);
          child.off('message', onMessage);
          resolve(message);
        };
        child.on('message', onMessage);
        child.send({ type: 'take' });
      }),
    close: () => closeChild(child, 5_000),
  };
}

const PRODUCER_FILE = fileURLToPath(new URL('./producer-process.ts', import.meta.url));

export interface ProducerProcess {
  /** Its CPU is read from /proc by this pid. */
  readonly pid: number;
  /** Publishes events `from` to `to` (exclusive); resolves once all are committed. */
  publish(from: number, to: number): Promise<void>;
  close(): Promise<void>;
}

/** Forks an application that enqueues into `job.target` from its own process and connection (producer-process.ts). */
export async function startProducer(job: ProducerJob): Promise<ProducerProcess> {
  const child: ChildProcess = fork(PRODUCER_FILE, [JSON.stringify(job)], {
    execArgv: process.execArgv.filter((arg) => arg !== '--expose-gc' && !arg.startsWith('--cpu-prof')),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise<void>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`producer exited with ${code}`)));
    child.once('message', (message: { type: string; message?: string }) => (message.type === 'ready' ? resolve() : reject(new Error(`producer: ${message.message}`))));
  });
  child.removeAllListeners('exit');
  return {
    pid: child.pid!,
    publish: (from, to) =>
      new Promise<void>((resolve, reject) => {
        child.once('message', (message: { type: string; message?: string }) => (message.type === 'published' ? resolve() : reject(new Error(`producer: ${message.message}`))));
        child.send({ type: 'publish', from, to });
      }),
    close: () => closeChild(child, 5_000),
  };
}

const CLUSTER_NODE_FILE = fileURLToPath(new URL('./cluster-node.ts', import.meta.url));

/** A Herald node in its own process (scripts/bench/cluster-node.ts), as its IPC reports tell it. */
export interface ClusterNode {
  /** Slots it holds now. */
  slots: number;
  /** Every change of the slots it holds: when (machine clock, ms) and how many. */
  readonly slotHistory: Array<{ readonly at: number; readonly slots: number }>;
  /** When it called `herald.start()` (machine clock, ms; 0 until then). */
  startedAt: number;
  delivered: number;
  /** When its last delivery was settled (machine clock, ms). */
  deliveredAt: number;
  readonly child: ChildProcess;
  close(): Promise<void>;
}

/** Forks a cluster node with these config overrides; it starts at once and reports over IPC. */
export function startClusterNode(overrides: object): ClusterNode {
  const child = fork(CLUSTER_NODE_FILE, [JSON.stringify(overrides)], {
    execArgv: process.execArgv.filter((arg) => !arg.startsWith('--cpu-prof') && arg !== '--expose-gc'),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const node: ClusterNode = {
    slots: 0,
    slotHistory: [],
    startedAt: 0,
    delivered: 0,
    deliveredAt: 0,
    child,
    close: () => closeChild(child, 10_000),
  };
  child.on('message', (message: { type: string; count: number; at?: number }) => {
    if (message.type === 'starting') node.startedAt = message.at ?? 0;
    else if (message.type === 'slots') {
      node.slots = message.count;
      node.slotHistory.push({ at: message.at ?? 0, slots: message.count });
    } else if (message.type === 'delivered') {
      node.delivered = message.count;
      node.deliveredAt = message.at ?? 0;
    }
  });
  return node;
}

/** Asks a forked child to close (`{type: 'close'}`) and waits for it to exit; kills it after `graceMs`. */
export function closeChild(child: ChildProcess, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (child.exitCode !== null) return resolve();
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      resolve();
    }, graceMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.send({ type: 'close' });
  });
}

// Herald ----------------------------------------------------------------------

export interface BenchHerald {
  readonly herald: Herald;
  readonly dbPath: string;
  /** A producer's own connection to the same file (the outbox pattern). */
  readonly producerDb: Database.Database;
  close(): Promise<void>;
}

/**
 * Set to `1`, `openBenchHerald` drops the partial index of waiting events by tenant (SQLite
 * migration 9) once the schema is made: the same run without the index's cost, to measure it
 * (`HERALD_BENCH_DROP_TENANT_INDEX=1 npm run bench -- --only=throughput`). The fan-out past a busy
 * tenant's backlog still works without it, walking the outbox instead.
 */
export const DROP_TENANT_INDEX_ENV = 'HERALD_BENCH_DROP_TENANT_INDEX';

/** A Herald on a temp data folder: systemClock, 127.0.0.0/8 allowed, silent. Not started. */
export async function openBenchHerald(overrides: ConfigOverrides = {}): Promise<BenchHerald> {
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-bench-'));
  const dbPath = join(dataDir, 'herald.db');
  const config = resolveConfig(
    { store: `sqlite:${dbPath}`, dataDir, port: 0, allowNetworks: ['127.0.0.0/8'], logLevel: 'silent' },
    overrides,
  );
  const herald = await Herald.open(config);
  herald.events.on('failure', (e) => progress(`engine failure in ${e.where}: ${String(e.error)}`));
  const producerDb = new Database(dbPath);
  producerDb.pragma('busy_timeout = 5000');
  if (process.env[DROP_TENANT_INDEX_ENV] === '1') {
    producerDb.exec('DROP INDEX events_unfanned_tenant');
    progress('without the index events_unfanned_tenant');
  }
  return {
    herald,
    dbPath,
    producerDb,
    async close() {
      await herald.close();
      producerDb.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** A JSON payload of about `bytes` bytes. */
export function payloadOf(bytes: number, n: number): Record<string, unknown> {
  const head = { n, kind: 'bench', at: 0 };
  const pad = Math.max(0, bytes - JSON.stringify({ ...head, pad: '' }).length);
  return { ...head, pad: 'x'.repeat(pad) };
}

/**
 * Events `from` to `to` (exclusive) of a backlog spread round-robin over `endpointIds`, each
 * addressed to its endpoint, with a `bodyBytes` payload numbered `n`.
 */
export function backlogBatch(from: number, to: number, endpointIds: readonly string[], bodyBytes: number): EventInput[] {
  const batch: EventInput[] = [];
  for (let n = from; n < to; n++) {
    batch.push({ tenantId: 'bench', type: 'bench.event', endpointId: endpointIds[n % endpointIds.length]!, payload: payloadOf(bodyBytes, n) });
  }
  return batch;
}

// Numbers -------------------------------------------------------------------

/** Nearest-rank percentile of unsorted values; NaN when empty. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export const round = (value: number, digits = 2): number => {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
};

export const MB = 1024 * 1024;

export function memory(): { rssMB: number; heapUsedMB: number; heapTotalMB: number; externalMB: number } {
  const m = process.memoryUsage();
  return { rssMB: round(m.rss / MB, 1), heapUsedMB: round(m.heapUsed / MB, 1), heapTotalMB: round(m.heapTotal / MB, 1), externalMB: round(m.external / MB, 1) };
}

export function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect !== undefined) {
    collect();
    collect();
  }
}

/** Polls `done` every `everyMs` until it is true or `timeoutMs` passes; returns whether it became true. */
export async function waitFor(done: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await done()) return true;
    await sleep(everyMs);
  }
  return done();
}

/** The machine a run happened on, for the results file: runs are only comparable on the same one. */
export interface MachineInfo {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly memoryGB: number;
  readonly node: string;
  readonly platform: string;
  readonly loadAverage: readonly number[];
}

export function describeMachine(): MachineInfo {
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryGB: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    platform: `${os.platform()} ${os.release()}`,
    loadAverage: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}
