/**
 * The CPU account of the throughput workload: where each µs of CPU per
 * delivered event goes, thread by thread.
 *
 *   tsx scripts/bench/cpu-account.ts [--events=50000] [--profile-interval=500] [--keep-profiles]
 *
 * Two Herald runs of the throughput scenario's workload (50 000 events of
 * 1 KiB, 100 endpoints, signed; the producer in its own process), each in a
 * fresh child process loaded with `thread-roles.cjs`, which tells which OS
 * thread is the engine (main), the SQLite store thread and the signing pool:
 *
 *  1. without the profiler: the CPU per delivered event of each thread, read
 *     from `/proc/<pid>/task/<tid>/stat` over the delivery window. These are
 *     the figures; "other" is the process's CPU that no named thread holds
 *     (V8's helper threads: concurrent marking, compilation; exited threads).
 *  2. under `--cpu-prof`: each thread's samples inside the delivery window,
 *     grouped by what they ran (the nearest frame with a source: a Herald
 *     module, a package, a part of Node), as shares of the thread's busy
 *     samples. Each share is applied to the thread's CPU of run 1, so the
 *     account adds up to the measured figure, not to the profiler's.
 *
 * Before both, a raw undici `Pool` posts the same bodies (no store, no
 * signing) in the child, and its CPU per request is the floor for the thread
 * that speaks HTTP.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import type { ConfigOverrides } from '../../lib/config/config.ts';
import { openBenchHerald, payloadOf, progress, startProducer, startSinkProcess, waitFor } from './harness.ts';
import { ensureBuilt } from './herald-service.ts';
import { clockTicksPerSecond, mainThreadTicks, processTicks, threadTicks } from './peers/peer-kit.ts';

const ENDPOINTS = 100;
const BODY_BYTES = 1024;
const PUBLISH_BATCH = 1_000;
const ROLES_PRELOAD = fileURLToPath(new URL('./thread-roles.cjs', import.meta.url));

interface ThreadFigure {
  readonly role: string;
  readonly tid: number;
  readonly nodeThreadId: number;
  readonly cpuMicros: number;
}

interface ChildResult {
  readonly delivered: number;
  readonly eventsPerSec: number;
  readonly processCpuMicros: number;
  readonly threads: readonly ThreadFigure[];
  readonly baselineMicrosPerRequest: number;
  /** The delivery window on V8's clock (µs, CLOCK_MONOTONIC), to cut the profiles to it. */
  readonly windowMonotonicMicros: readonly [number, number];
}

// Herald in this process (to reach inside: its threads by role), and the raw baseline --------

/** Posts every body once, keeping `inFlight` requests out; returns requests/s. */
async function baseline(origin: string, paths: readonly string[], bodies: readonly string[], connections: number, inFlight: number): Promise<number> {
  const pool = new Pool(origin, { connections, pipelining: 1 });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < bodies.length) {
      const n = next++;
      const { body } = await pool.request({
        path: paths[n % paths.length]!,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': `evt_${n}` },
        body: bodies[n]!,
      });
      await body.dump();
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: inFlight }, worker));
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  return bodies.length / seconds;
}

async function heraldRun(origin: string, paths: readonly string[], events: number, timeoutMs: number, overrides: ConfigOverrides = {}) {
  const bench = await openBenchHerald(overrides);
  const { herald } = bench;
  try {
    const ids: string[] = [];
    for (const path of paths) {
      const { endpoint } = await herald.createEndpoint({ tenantId: 'bench', url: `${origin}${path}` });
      ids.push(endpoint.id);
    }
    let delivered = 0;
    let lastSettle = 0;
    let cpuAtEnd: NodeJS.CpuUsage | undefined;
    let mainTicksAtEnd: number | undefined;
    let threadTicksAtEnd: Map<number, number> | undefined;
    herald.events.on('attempt', (e) => {
      if (e.applied && e.settlement.kind === 'delivered' && ++delivered === events) {
        lastSettle = performance.now();
        cpuAtEnd = process.cpuUsage(cpuAtStart);
        mainTicksAtEnd = mainThreadTicks(process.pid);
        threadTicksAtEnd = threadTicks(process.pid);
      }
    });
    await herald.start();
    const producer = await startProducer({ target: { system: 'herald-sqlite', dbPath: bench.dbPath, endpointIds: ids }, events, batch: PUBLISH_BATCH });
    const producerTicksAtStart = processTicks(producer.pid);
    // process.cpuUsage covers every thread of this process: the engine, the signing pool, the HTTP client.
    const cpuAtStart = process.cpuUsage();
    // The thread that runs the engine and speaks HTTP, alone (the store and signing threads excluded).
    const mainTicksAtStart = mainThreadTicks(process.pid);
    // Each thread alone, by OS thread id (`cpu-account.ts` tells which is which).
    const threadTicksAtStart = threadTicks(process.pid);
    const started = performance.now();
    try {
      await producer.publish(0, events);
      const producerCpuMicros = ((processTicks(producer.pid) - producerTicksAtStart) * 1e6) / clockTicksPerSecond();
      let reported = 0;
      await waitFor(() => {
        if (delivered - reported >= events / 5) {
          reported = delivered;
          progress(`Herald: ${delivered}/${events} delivered`);
        }
        return delivered >= events;
      }, timeoutMs, 100);
      const end = lastSettle > 0 ? lastSettle : performance.now();
      const cpu = cpuAtEnd ?? process.cpuUsage(cpuAtStart);
      const mainThreadCpuMicros = (((mainTicksAtEnd ?? mainThreadTicks(process.pid)) - mainTicksAtStart) * 1e6) / clockTicksPerSecond();
      const seconds = (end - started) / 1000;
      const threadCpuMicros = new Map<number, number>();
      for (const [tid, ticks] of threadTicksAtEnd ?? threadTicks(process.pid)) {
        threadCpuMicros.set(tid, ((ticks - (threadTicksAtStart.get(tid) ?? 0)) * 1e6) / clockTicksPerSecond());
      }
      return { eventsPerSec: delivered / seconds, seconds, delivered, heraldCpuMicros: cpu.user + cpu.system, mainThreadCpuMicros, threadCpuMicros, producerCpuMicros, windowStartedAt: started, windowEndedAt: end };
    } finally {
      await producer.close();
    }
  } finally {
    await bench.close();
  }
}

// The child: one Herald run, its threads named -------------------------------------------

async function child(origin: string, events: number): Promise<void> {
  const paths = Array.from({ length: ENDPOINTS }, (_, i) => `/ep/${i}`);
  const bodies = Array.from({ length: 20_000 }, (_, n) => JSON.stringify(payloadOf(BODY_BYTES, n)));
  await baseline(origin, paths, bodies.slice(0, 1_000), 16, 256);
  const before = process.cpuUsage();
  await baseline(origin, paths, bodies, 16, 256);
  const used = process.cpuUsage(before);
  const baselineMicrosPerRequest = (used.user + used.system) / bodies.length;

  const run = await heraldRun(origin, paths, events, 300_000);
  const nowMonotonicMicros = Number(process.hrtime.bigint() / 1000n);
  const toMonotonic = (performanceMs: number): number => nowMonotonicMicros - (performance.now() - performanceMs) * 1000;
  const roles = new Map<number, { role: string; nodeThreadId: number }>();
  for (const line of readFileSync(process.env.HERALD_BENCH_THREADS!, 'utf8').trim().split('\n')) {
    const [role, tid, nodeThreadId] = line.split(' ');
    roles.set(Number(tid), { role: role!, nodeThreadId: Number(nodeThreadId) });
  }
  const threads = [...run.threadCpuMicros].map(([tid, cpuMicros]) => ({
    role: roles.get(tid)?.role ?? 'other',
    tid,
    nodeThreadId: roles.get(tid)?.nodeThreadId ?? -1,
    cpuMicros,
  }));
  const result: ChildResult = {
    delivered: run.delivered,
    eventsPerSec: run.eventsPerSec,
    processCpuMicros: run.heraldCpuMicros,
    threads,
    baselineMicrosPerRequest,
    windowMonotonicMicros: [toMonotonic(run.windowStartedAt), toMonotonic(run.windowEndedAt)],
  };
  process.send!(result, () => process.exit(0));
}

// The parent: two runs, the profiles read --------------------------------------------------

function runChild(origin: string, events: number, profileDir: string | undefined, intervalMicros: number): Promise<ChildResult> {
  const threadsFile = join(mkdtempSync(join(tmpdir(), 'herald-threads-')), 'threads');
  const profiling = profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, `--cpu-prof-interval=${intervalMicros}`];
  const proc = fork(fileURLToPath(import.meta.url), ['--child', origin, String(events)], {
    execArgv: ['--import', 'tsx', '--require', ROLES_PRELOAD, ...profiling],
    env: { ...process.env, HERALD_BENCH_THREADS: threadsFile },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    let result: ChildResult | undefined;
    proc.on('message', (message) => {
      result = message as ChildResult;
    });
    proc.on('exit', (code) => {
      rmSync(threadsFile, { force: true });
      if (result !== undefined) resolve(result);
      else reject(new Error(`the measured child exited with ${code} and no result`));
    });
  });
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * What a sample ran, named by its nearest frame with a source (a native call
 * such as a SQLite statement or a socket write counts for the code that made it).
 */
function categoryOf(stack: readonly ProfileNode[]): string | undefined {
  const leaf = stack[0]!.callFrame.functionName;
  if (leaf === '(idle)') return undefined;
  if (leaf === '(garbage collector)') return 'GC (on this thread)';
  if (leaf === '(program)') return 'V8 / libuv, no JS frame';
  // A worker parked in Atomics.wait is waiting, not working.
  if (leaf === 'wait' && stack.some((n) => n.callFrame.url.includes('piscina'))) return undefined;
  const framed = stack.find((n) => n.callFrame.url !== '');
  if (framed === undefined) return `native: ${leaf || '(anonymous)'}`;
  const url = framed.callFrame.url;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)?.[1];
  if (pkg !== undefined) return pkg === 'better-sqlite3' ? 'better-sqlite3 (JS wrapper)' : pkg;
  const own = /\/(lib|scripts)\/(.+)\.ts$/.exec(url);
  if (own !== undefined && own !== null) {
    if (own[1] === 'scripts') return 'the bench itself';
    return `herald ${own[2]}${stack[0] === framed ? '' : ` → native ${leaf}`}`;
  }
  if (url.startsWith('node:')) {
    if (/stream_base_commons|internal\/net|^node:net|streams\//.test(url)) return 'node: sockets and streams';
    if (/worker|messageport|per_context\/messageport/.test(url)) return 'node: thread messaging';
    if (/timers/.test(url)) return 'node: timers';
    if (/crypto/.test(url)) return 'node: crypto';
    if (/events/.test(url)) return 'node: EventEmitter';
    return 'node: other';
  }
  return url;
}

/** Each category's share of a profile's busy samples inside the window. */
function sharesOf(profile: CpuProfile, window: readonly [number, number]): Map<string, number> {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, ProfileNode>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n);
  const stackOf = new Map<number, string | undefined>();
  const weights = new Map<string, number>();
  let at = profile.startTime;
  let busy = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (at < window[0] || at > window[1]) continue;
    const id = profile.samples[i]!;
    if (!stackOf.has(id)) {
      const stack: ProfileNode[] = [];
      for (let n: ProfileNode | undefined = byId.get(id); n !== undefined; n = parent.get(n.id)) stack.push(n);
      stackOf.set(id, categoryOf(stack));
    }
    const category = stackOf.get(id);
    if (category === undefined) continue;
    weights.set(category, (weights.get(category) ?? 0) + delta);
    busy += delta;
  }
  return new Map([...weights].map(([category, weight]) => [category, busy > 0 ? weight / busy : 0]));
}

async function parent(events: number, intervalMicros: number, keepProfiles: boolean): Promise<void> {
  const sink = await startSinkProcess({ record: 'count' });
  const profileDir = mkdtempSync(join(tmpdir(), 'herald-cpu-account-'));
  try {
    console.error(`run 1 of 2: ${events} events, no profiler`);
    const plain = await runChild(sink.url, events, undefined, intervalMicros);
    await sink.take();
    console.error(`run 2 of 2: ${events} events under --cpu-prof (interval ${intervalMicros} µs)`);
    const profiled = await runChild(sink.url, events, profileDir, intervalMicros);
    await sink.take();

    const perEvent = (micros: number): number => micros / plain.delivered;
    const byRole = new Map<string, number>();
    for (const t of plain.threads) byRole.set(t.role, (byRole.get(t.role) ?? 0) + t.cpuMicros);
    const named = [...byRole].filter(([role]) => role !== 'other').reduce((sum, [, micros]) => sum + micros, 0);
    byRole.set('other', plain.processCpuMicros - named);

    console.log(`\nHerald, ${plain.delivered} delivered at ${Math.round(plain.eventsPerSec)} events/s (no profiler)`);
    console.log(`CPU per delivered event: ${perEvent(plain.processCpuMicros).toFixed(0)} µs over all threads`);
    console.log(`raw undici Pool.request in the same process: ${plain.baselineMicrosPerRequest.toFixed(0)} µs per request (no store, no signing)`);
    console.log('"other": CPU of the process no named thread holds (V8 helper threads: concurrent GC, compilers; exited threads)\n');

    // The profiles of run 2, by role (a role may have several threads: the signing pool).
    const profileRole = new Map(profiled.threads.map((t) => [t.nodeThreadId, t.role]));
    const sharesByRole = new Map<string, Map<string, number>>();
    const busyByRole = new Map<string, number>();
    for (const file of readdirSync(profileDir)) {
      const nodeThreadId = Number(/\.\d+\.(\d+)\.\d+\.cpuprofile$/.exec(file)?.[1]);
      const role = profileRole.get(nodeThreadId) ?? (nodeThreadId === 0 ? 'main' : 'signing');
      const tidCpu = profiled.threads.filter((t) => t.nodeThreadId === nodeThreadId).reduce((sum, t) => sum + t.cpuMicros, 0);
      const shares = sharesOf(JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as CpuProfile, profiled.windowMonotonicMicros);
      // Threads of one role are weighed by the CPU each used.
      const into = sharesByRole.get(role) ?? new Map<string, number>();
      for (const [category, share] of shares) into.set(category, (into.get(category) ?? 0) + share * tidCpu);
      sharesByRole.set(role, into);
      busyByRole.set(role, (busyByRole.get(role) ?? 0) + tidCpu);
    }

    for (const [role, micros] of [...byRole].filter(([, us]) => us > 0).sort((a, b) => b[1] - a[1])) {
      console.log(`${role.padEnd(8)} ${perEvent(micros).toFixed(0).padStart(5)} µs per delivered event`);
      const weighted = sharesByRole.get(role);
      const busy = busyByRole.get(role) ?? 0;
      if (weighted === undefined || busy === 0) continue;
      const rows = [...weighted].map(([category, w]) => [category, (w / busy) * perEvent(micros)] as const).sort((a, b) => b[1] - a[1]);
      let rest = 0;
      for (const [category, us] of rows) {
        if (us < 1) rest += us;
        else console.log(`         ${us.toFixed(1).padStart(6)}  ${category}`);
      }
      if (rest > 0) console.log(`         ${rest.toFixed(1).padStart(6)}  (each under 1 µs)`);
    }
    console.log(`\nUnder the profiler: ${Math.round(profiled.eventsPerSec)} events/s, ${(profiled.processCpuMicros / profiled.delivered).toFixed(0)} µs per event.`);
  } finally {
    await sink.close();
    // Kept, they can be read with `tsx scripts/bench/profile-top.ts <file>` (one file per thread).
    if (keepProfiles) console.log(`\nThe profiles of run 2: ${profileDir}`);
    else rmSync(profileDir, { recursive: true, force: true });
  }
}

const args = process.argv.slice(2);
if (args[0] === '--child') await child(args[1]!, Number(args[2]));
else {
  ensureBuilt();
  const events = Number(args.find((a) => a.startsWith('--events='))?.slice('--events='.length) ?? 50_000);
  const interval = Number(args.find((a) => a.startsWith('--profile-interval='))?.slice('--profile-interval='.length) ?? 500);
  await parent(events, interval, args.includes('--keep-profiles'));
  process.exit(0);
}
