/**
 * Open-loop latency, as users run Herald: the compiled service (`herald start`,
 * scripts/bench/herald-service.ts, default settings) and an application
 * publishing from its own process (scripts/bench/open-loop-producer.ts) at a
 * fixed 5 000 events/s for 60 s (quick: 1 000/s for 5 s) over 100 endpoints of
 * one sink, on a timetable that never waits for Herald: every 10 ms one
 * transaction with the events due by then. A warm-up at the same rate comes
 * first and is not counted.
 *
 * For each counted event: its commit (the producer's COMMIT returned) → the
 * first byte of its request at the sink (headers parsed), both on the
 * machine's monotonic clock; p50/p90/p99/max, missing, duplicates, and the
 * events delivered per second during the window. Meanwhile: Herald's main
 * thread busy (its CPU over the wall time of the window, from
 * /proc/<pid>/task/<pid>/stat) and waiting for a CPU (ready but not running,
 * from its schedstat: the machine's contention, not Herald's work), the whole
 * process's CPU, the producer's, and on PostgreSQL the server's (postmaster
 * and backends).
 *
 * Once on SQLite, once on PostgreSQL (an embedded server started here).
 * `HERALD_BENCH_SERVICE_CONFIG='{"engine":{"pollIntervalMs":5}}'` runs the
 * service with those settings instead of the defaults (to measure what a
 * setting buys); `HERALD_BENCH_STORES=sqlite` runs one store only.
 * `HERALD_BENCH_CPU_PROF=<dir>` writes `--cpu-prof` profiles of each service's
 * threads into <dir>/sqlite and <dir>/postgres (summarise it with scripts/bench/profile-top.ts).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { ConfigOverrides } from '../../../lib/config/config.ts';
import { Arrivals, type Latencies } from '../arrivals.ts';
import { machineNowMs } from '../machine-clock.ts';
import { progress, round, sleep, startSinkProcess, type ScenarioOptions, type ScenarioResult, type SinkProcess } from '../harness.ts';
import { startHeraldService } from '../herald-service.ts';
import { startOpenLoopProducer } from '../open-loop-load.ts';
import type { ProducerStore } from '../open-loop-producer.ts';
import { Cleanup, clockTicksPerSecond, mainThreadTicks, processTicks, treeTicks } from '../peers/peer-kit.ts';
import { PostgresUnavailableError, startPostgresServer } from '../../../test-kit/postgres-server.ts';

const ENDPOINTS = 100;
const BODY_BYTES = 1024;
const TICK_MS = 10;
/** After the last commit, how long the last events have to arrive (a quick run stays within the runner's 60 s). */
const DRAIN_LIMIT_MS = { quick: 15_000, full: 60_000 };
const TAKE_EVERY_MS = 2_000;
export const PROFILE_ENV = 'HERALD_BENCH_CPU_PROF';
export const SERVICE_CONFIG_ENV = 'HERALD_BENCH_SERVICE_CONFIG';
export const STORES_ENV = 'HERALD_BENCH_STORES';

const TARGETS = {
  sqlite: { p50Ms: 5, p99Ms: 20 },
  postgres: { p50Ms: 10, p99Ms: 40 },
} as const;

export interface Load {
  readonly rate: number;
  readonly seconds: number;
  readonly warmupSeconds: number;
  /** One producer transaction per tick. @default 10 */
  readonly tickMs?: number;
  /** After the last commit, how long the last events have to arrive. @default 60 000 */
  readonly drainLimitMs?: number;
}

type StoreResult = Latencies & {
  readonly achievedPerSec: number;
  readonly producerLateMs: { readonly p50: number; readonly p99: number; readonly max: number };
  readonly producerBehindAtEndMs: number;
  readonly transactions: number;
  /** Distinct events whose first request reached the sink during the window, per second. */
  readonly deliveredPerSec: number;
  /** % of one core over the window. */
  readonly mainThreadBusyPct: number;
  /** % of the window the main thread was ready to run but waited for a CPU (the machine's contention). */
  readonly mainThreadWaitingPct: number;
  readonly processCpuPct: number;
  readonly producerCpuPct: number;
  readonly serverCpuPct?: number;
  readonly target: string;
  readonly met: boolean;
};

async function measureStore(kind: 'sqlite' | 'postgres', load: Load, sink: SinkProcess, cleanup: Cleanup): Promise<StoreResult | { skipped: string }> {
  let storeSetting = 'sqlite';
  let serverPid: number | undefined;
  if (kind === 'postgres') {
    try {
      const server = await startPostgresServer({ cleanup });
      storeSetting = await server.createDatabase('herald_latency');
      serverPid = server.postmasterPid;
      progress(`latency: PostgreSQL ${await server.version()} on 127.0.0.1:${server.port}`);
    } catch (error) {
      if (error instanceof PostgresUnavailableError) return { skipped: error.message };
      throw error;
    }
  }
  const profileDir = process.env[PROFILE_ENV];
  // One folder per store; Node names each thread's profile (main, store thread, signing) by pid and thread id.
  if (profileDir !== undefined) mkdirSync(resolve(profileDir, kind), { recursive: true });
  const config = process.env[SERVICE_CONFIG_ENV];
  const service = await startHeraldService({
    store: storeSetting,
    ...(config === undefined ? {} : { config: JSON.parse(config) as ConfigOverrides }),
    ...(profileDir === undefined ? {} : { nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${resolve(profileDir, kind)}`] }),
  });
  cleanup.add(`herald ${service.pid}`, () => process.kill(service.pid, 'SIGKILL'), () => service.close());
  const endpointIds = await service.createEndpoints('bench', Array.from({ length: ENDPOINTS }, (_, i) => `${sink.url}/ep/${i}`));
  const store: ProducerStore = kind === 'sqlite' ? { kind, path: service.sqlitePath! } : { kind, url: storeSetting };
  const producer = await startOpenLoopProducer(
    { store, tenantId: 'bench', endpointIds, bodyBytes: BODY_BYTES, schedule: { kind: 'open-loop', rate: load.rate, seconds: load.seconds, warmupSeconds: load.warmupSeconds, tickMs: load.tickMs ?? TICK_MS } },
    cleanup,
  );

  const arrivals = new Arrivals(sink);
  progress(`latency (${kind}): warm-up ${load.warmupSeconds} s, then ${load.seconds} s at ${load.rate}/s to ${ENDPOINTS} endpoints`);
  const run = producer.start();
  await run.measuring;
  const readers = {
    main: () => mainThreadTicks(service.pid),
    process: () => processTicks(service.pid),
    producer: () => processTicks(producer.pid),
    server: () => (serverPid === undefined ? 0 : treeTicks(serverPid)),
  };
  const waitingBefore = runQueueWaitMs(service.pid);
  const before = Object.fromEntries(Object.entries(readers).map(([k, read]) => [k, read()])) as Record<keyof typeof readers, number>;
  const windowStart = performance.now();
  const windowStartOnMachine = machineNowMs();

  let finished = false;
  const report = run.done.finally(() => (finished = true));
  let nextProgress = performance.now() + 10_000;
  while (!finished) {
    await Promise.race([sleep(TAKE_EVERY_MS), report]);
    await arrivals.take();
    if (performance.now() >= nextProgress) {
      nextProgress += 10_000;
      progress(`latency (${kind}): ${Math.round((performance.now() - windowStart) / 1000)} s`);
    }
  }
  const produced = await report;
  const wallS = (performance.now() - windowStart) / 1000;
  const windowEndOnMachine = machineNowMs();
  const waitingAfter = runQueueWaitMs(service.pid);
  const after = Object.fromEntries(Object.entries(readers).map(([k, read]) => [k, read()])) as Record<keyof typeof readers, number>;
  const pct = (key: keyof typeof readers): number => round(((after[key] - before[key]) / clockTicksPerSecond() / wallS) * 100, 1);

  await arrivals.take();
  const deliveredInWindow = arrivals.arrivedBetween(windowStartOnMachine, windowEndOnMachine);
  const drainLimitMs = load.drainLimitMs ?? DRAIN_LIMIT_MS.full;
  const all = await arrivals.untilAll(produced.ids, drainLimitMs);
  if (!all) progress(`latency (${kind}): not every event arrived within ${drainLimitMs / 1000} s of the last commit`);
  const latencies = arrivals.latencies(produced.ids, produced.committedAt);
  await producer.close();
  await service.close();
  const target = TARGETS[kind];
  return {
    ...latencies,
    achievedPerSec: produced.achievedPerSec,
    producerLateMs: { p50: round(produced.lateMs.p50), p99: round(produced.lateMs.p99), max: round(produced.lateMs.max) },
    producerBehindAtEndMs: round(produced.behindAtEndMs),
    transactions: produced.transactions,
    deliveredPerSec: Math.round(deliveredInWindow / wallS),
    mainThreadBusyPct: pct('main'),
    mainThreadWaitingPct: round(((waitingAfter - waitingBefore) / 1000 / wallS) * 100, 1),
    processCpuPct: pct('process'),
    producerCpuPct: pct('producer'),
    ...(serverPid === undefined ? {} : { serverCpuPct: pct('server') }),
    target: `p50 <= ${target.p50Ms} ms, p99 <= ${target.p99Ms} ms`,
    met: latencies.p50Ms <= target.p50Ms && latencies.p99Ms <= target.p99Ms && latencies.missing === 0,
  };
}

/** Time the main thread of `pid` has waited on a run queue, ready but not running (ms; `/proc/<pid>/task/<pid>/schedstat`, field 2, ns). */
function runQueueWaitMs(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return Number.NaN;
  }
}

/** One store's run: a sink, the store (an embedded PostgreSQL server for `postgres`), the service and the producer, all stopped after. */
export async function measureLatency(kind: 'sqlite' | 'postgres', load: Load): Promise<StoreResult | { skipped: string }> {
  const cleanup = new Cleanup();
  try {
    const sink = await startSinkProcess({ record: 'ids' });
    cleanup.add('sink', () => undefined, () => sink.close());
    return await measureStore(kind, load, sink, cleanup);
  } finally {
    await cleanup.run();
    cleanup.dispose();
  }
}

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const load: Load = options.quick
    ? { rate: 1_000, seconds: 5, warmupSeconds: 1, drainLimitMs: DRAIN_LIMIT_MS.quick }
    : { rate: 5_000, seconds: 60, warmupSeconds: 2, drainLimitMs: DRAIN_LIMIT_MS.full };
  const results: Record<string, StoreResult | { skipped: string }> = {};
  const stores = (['sqlite', 'postgres'] as const).filter((kind) => (process.env[STORES_ENV] ?? 'sqlite,postgres').split(',').includes(kind));
  for (const kind of stores) results[kind] = await measureLatency(kind, load);
  const measured = Object.values(results).filter((r): r is StoreResult => !('skipped' in r));
  return {
    ratePerSec: load.rate,
    publishSeconds: load.seconds,
    warmupSeconds: load.warmupSeconds,
    endpoints: ENDPOINTS,
    tickMs: TICK_MS,
    ...results,
    met: measured.length === stores.length && measured.every((r) => r.met),
  };
}
