/**
 * `npm run bench [-- --quick] [-- --only=throughput,latency]`: runs every
 * scenario, each in its own process (a clean heap; `--expose-gc` where heap is measured), prints a
 * table with ratios against the baselines measured in the same run, and
 * writes the same as JSON to `bench-results.json` at the repository root.
 *
 * `--quick` is a smoke run (smaller sizes, under 2 minutes); the full run
 * takes under 15. Real time, 127.0.0.1 only, a sink in a child process.
 *
 * `--peers` runs the peers scenario alone (scripts/bench/peers/): the same
 * workload through Herald on SQLite and on PostgreSQL, BullMQ and
 * graphile-worker, with a raw undici Pool as the baseline, each system warmed
 * up and measured in interleaved rounds, and prints them in one table; the
 * full run includes it too.
 *
 * On Ctrl-C or SIGTERM, and past a scenario's time limit, the scenario
 * process gets SIGTERM (it stops its servers and removes its temp dirs),
 * then SIGKILL after a grace period.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeMachine } from './harness.ts';
import type { Spread } from './peers/peers-scenario.ts';
import { formatPgCost, type PgCost } from './peers/pg-cost.ts';

const SCENARIOS = ['throughput', 'latency', 'isolation', 'fairness', 'signing', 'timers', 'endpoints', 'recovery', 'adaptive', 'cluster', 'scaleout', 'replay', 'features', 'peers'] as const;
/** Scenarios that read the heap after a full GC; the others must not get --expose-gc, which worker threads (the signing pool) refuse. */
const NEEDS_GC: ReadonlySet<string> = new Set(['timers', 'endpoints']);
/** Hard bound per scenario process: past it, the scenario is killed and reported as failed. */
const SCENARIO_LIMIT_MS = { quick: 60_000, full: 420_000 };
/** The peers run seven systems, each started fresh per round: their own, longer bound. */
const LONGER_LIMIT_MS: Readonly<Record<string, { quick: number; full: number }>> = { peers: { quick: 300_000, full: 1_500_000 } };
const limitOf = (name: string): number => (LONGER_LIMIT_MS[name] ?? SCENARIO_LIMIT_MS)[quick ? 'quick' : 'full'];
/** After SIGTERM, how long a scenario has to stop its servers before SIGKILL. */
const STOP_GRACE_MS = 15_000;

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const onlyArg = args.find((arg) => arg.startsWith('--only='))?.slice('--only='.length).split(',');
const only = args.includes('--peers') ? [...(onlyArg ?? []), 'peers'] : onlyArg;
const chosen = SCENARIOS.filter((name) => only === undefined || only.includes(name));
const CHILD = fileURLToPath(new URL('./scenario-child.ts', import.meta.url));
const OUT = fileURLToPath(new URL('../../bench-results.json', import.meta.url));

type Result = Record<string, unknown>;
const t0 = Date.now();
const stamp = (): string => `[${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s]`;

let current: ChildProcess | undefined;

/** SIGTERM (a scenario stops its servers and removes its temp dirs), SIGKILL after the grace period. */
function stopChild(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS).unref();
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    const child = current;
    if (child === undefined) process.exit(130);
    console.log(`${stamp()} ${signal}: stopping the running scenario`);
    stopChild(child);
    child.once('exit', () => process.exit(130));
  });
}

function runScenario(name: string): Promise<Result> {
  return new Promise((resolve) => {
    const started = Date.now();
    const child = fork(CHILD, [name, ...(quick ? ['--quick'] : [])], {
      execArgv: [...process.execArgv, ...(NEEDS_GC.has(name) ? ['--expose-gc'] : [])],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    current = child;
    let result: Result | undefined;
    const limit = setTimeout(() => {
      console.log(`${stamp()} ${name}: over ${limitOf(name) / 1000} s, stopped`);
      result = { error: 'time limit reached', met: false };
      stopChild(child);
    }, limitOf(name));
    child.on('message', (message: { type: string; text?: string; result?: Result; message?: string }) => {
      if (message.type === 'progress') console.log(`${stamp()} ${name}: ${message.text}`);
      else if (message.type === 'result') result = message.result;
      else if (message.type === 'error') result = { error: message.message, met: false };
    });
    child.on('exit', (code) => {
      clearTimeout(limit);
      current = undefined;
      const out = result ?? { error: `exited with ${code}`, met: false };
      console.log(`${stamp()} ${name}: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      resolve({ ...out, seconds: Math.round((Date.now() - started) / 100) / 10 });
    });
  });
}

const machine = {
  ...describeMachine(),
  quick,
  startedAt: new Date().toISOString(),
};
console.log(`Herald bench${quick ? ' (quick)' : ''}: ${chosen.join(', ')}\n${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, load ${machine.loadAverage.join(' ')}\n`);

const scenarios: Record<string, Result> = {};
for (const name of chosen) {
  console.log(`${stamp()} ${name}: starting`);
  scenarios[name] = await runScenario(name);
}

writeFileSync(OUT, `${JSON.stringify({ machine, scenarios }, null, 2)}\n`);

// The table: ratios first, then this machine's absolute figures.
const fmt = (value: unknown, unit = ''): string => (typeof value === 'number' && Number.isFinite(value) ? `${value}${unit}` : '—');
const rows: Array<[string, string, string, string, string]> = [];
const verdict = (r: Result): string => (r.met === true ? 'met' : r.met === false ? 'MISSED' : '—');
for (const [name, r] of Object.entries(scenarios)) {
  if (typeof r.error === 'string') {
    rows.push([name, 'error', r.error.split('\n')[0]!.slice(0, 60), '', 'MISSED']);
    continue;
  }
  switch (name) {
    case 'throughput':
      rows.push([
        name,
        `ratio ${fmt(r.ratio)}`,
        `${fmt(r.eventsPerSec)} ev/s (herald start, SQLite) vs raw undici ${fmt(r.baselinePerSec)} req/s (${fmt(r.events)} events); CPU per event: Herald ${fmt(r.heraldCpuMicrosPerEvent, ' µs')}, producer ${fmt(r.producerCpuMicrosPerEvent, ' µs')}; store thread ${fmt(r.storeThreadSpeedup, '×')} the main-thread store (${fmt((r.mainThreadStore as Result | undefined)?.eventsPerSec)} ev/s, ${fmt((r.mainThreadStore as Result | undefined)?.heraldCpuMicrosPerEvent, ' µs')})`,
        'ratio ≥ 0.5',
        verdict(r),
      ]);
      break;
    case 'latency': {
      // Per store: commit → first byte, and what Herald's service spent meanwhile.
      const perStore = (['sqlite', 'postgres'] as const).map((store) => {
        const s = (r[store] ?? {}) as Result;
        if (typeof s.skipped === 'string') return `${store} skipped: ${s.skipped.slice(0, 40)}`;
        return `${store} p50/p90/p99/max ${fmt(s.p50Ms)}/${fmt(s.p90Ms)}/${fmt(s.p99Ms)}/${fmt(s.maxMs, ' ms')} (missing ${fmt(s.missing)}, dup ${fmt(s.duplicates)}; ${fmt(s.achievedPerSec)}/s achieved, producer late p99 ${fmt((s.producerLateMs as Result | undefined)?.p99, ' ms')}; delivered ${fmt(s.deliveredPerSec)}/s; main thread ${fmt(s.mainThreadBusyPct, ' %')} busy, ${fmt(s.mainThreadWaitingPct, ' %')} waiting for a CPU, process ${fmt(s.processCpuPct, ' %')}${typeof s.serverCpuPct === 'number' ? `, server ${fmt(s.serverCpuPct, ' %')}` : ''})`;
      });
      rows.push([name, '—', `open loop ${fmt(r.ratePerSec)}/s for ${fmt(r.publishSeconds, ' s')}, compiled service, producer process: ${perStore.join('; ')}`, 'sqlite p50 ≤ 5, p99 ≤ 20 ms; postgres p50 ≤ 10, p99 ≤ 40 ms', verdict(r)]);
      break;
    }
    case 'isolation':
      rows.push([name, `ratio ${fmt(r.ratio)}`, `healthy p99 ${fmt(r.healthyP99WithSlowMs, ' ms')} with the slow one, ${fmt(r.healthyP99WithoutMs, ' ms')} without`, 'ratio ≤ 1.2', verdict(r)]);
      break;
    case 'fairness': {
      const w = (r.withBacklog ?? {}) as Result;
      const wo = (r.withoutBacklog ?? {}) as Result;
      rows.push([
        name,
        `p99 ratio ${fmt(r.ratio)}`,
        `compiled service, producer processes: quiet tenant's commit → first byte p50/p99/max ${fmt(w.p50Ms)}/${fmt(w.p99Ms)}/${fmt(w.maxMs)} ms beside ${fmt(r.bulkEndpoints)} endpoints × ${fmt(r.bulkEventsPerEndpoint)} events (${fmt(r.bulkLeftAtEnd)} left at the end), ${fmt(wo.p50Ms)}/${fmt(wo.p99Ms)}/${fmt(wo.maxMs)} ms alone`,
        'p99 ≤ 100 ms',
        verdict(r),
      ]);
      break;
    }
    case 'signing': {
      const small = r['1KiB'] as Result;
      const big = r['64KiB'] as Result;
      rows.push([name, `1 KiB ${fmt(small?.ratio)}×, 64 KiB ${fmt(big?.ratio)}×`, `main thread µs/signature: 1 KiB ${fmt(small?.poolMainThreadUsPerSignature)} vs inline ${fmt(small?.inlineUsPerSignature)}; 64 KiB ${fmt(big?.poolMainThreadUsPerSignature)} vs ${fmt(big?.inlineUsPerSignature)}`, '≤ 1.0× / ≤ 0.25×', verdict(r)]);
      break;
    }
    case 'timers':
      rows.push([name, `schedule ${fmt(r.scheduleRatio)}×, heap ${fmt(r.heapRatio)}×`, `${fmt(r.schedulePerSec)}/s, heap ${fmt(r.heapMB, ' MB')}, 24 h advanced in ${fmt(r.advance24hMs, ' ms')}; setTimeout ${fmt(r.baselineSchedulePerSec)}/s, ${fmt(r.baselineHeapMB, ' MB')}`, 'heap ≤ 100 MB, ≥ 2 M/s', verdict(r)]);
      break;
    case 'endpoints':
      rows.push([name, '—', `${fmt(r.endpoints)} endpoints: peak RSS ${fmt(r.peakRssMB, ' MB')} (heap ${fmt(r.peakHeapMB, ' MB')}), settled ${fmt(r.settledRssMB, ' MB')} (heap ${fmt(r.settledHeapMB, ' MB')}), actors ${fmt(r.actorsAtPeak)} → ${fmt(r.actorsAfterEviction)}`, '≤ 150 MB RSS', verdict(r)]);
      break;
    case 'recovery':
      rows.push([name, `peak/mean ${fmt(r.peakToMean)}`, `peak ${fmt(r.peakPerSec)}/s, mean ${fmt(r.meanPerSec)}/s over ${fmt(r.recoverySeconds, ' s')}`, 'peak ≤ 3 × mean', verdict(r)]);
      break;
    case 'adaptive': {
      // Per phase (the sink's capacity): utilisation / overshoot, fixed → adaptive.
      const phases = (mode: unknown): Result[] => (Array.isArray(mode) ? (mode as Result[]) : []);
      const fixed = phases(r.fixed);
      const perPhase = phases(r.adaptive).map((a, i) => {
        const f = fixed[i] ?? {};
        return `cap ${fmt(a.capacity)}: util ${fmt(f.utilisation)}→${fmt(a.utilisation)}, 503s ${fmt(f.overshoot)}→${fmt(a.overshoot)}, ${fmt(f.deliveredPerSec)}→${fmt(a.deliveredPerSec)}/s, 90 % in ${fmt(f.secondsTo90)}→${fmt(a.secondsTo90)} s`;
      });
      rows.push([name, '—', `fixed ${fmt(r.maxConcurrency)} → adaptive; ${perPhase.join('; ')}`, 'less overshoot, util ≥ 0.5, 90 % ≤ 4 s after a rise', verdict(r)]);
      break;
    }
    case 'cluster': {
      const duplicates = r.duplicates as Result | undefined;
      const pg = (r.postgres ?? {}) as Result;
      const runs = (Array.isArray(pg.runs) ? pg.runs : []) as Result[];
      const pgRuns = runs.map((run) => {
        const cpu = (run.cpuUsPerEvent ?? {}) as Result;
        return `${fmt(run.processes)}p ${fmt(run.eventsPerSec)} ev/s (dup ${fmt(run.duplicates)}; CPU µs/ev Herald ${fmt(cpu.herald)}, pg ${fmt(cpu.server)}, producer ${fmt(cpu.producer)})`;
      });
      const postgres = typeof pg.skipped === 'string' ? `postgres skipped: ${pg.skipped}` : `postgres ${String(pg.version)}: ${pgRuns.join(', ')}`;
      rows.push([
        name,
        `sqlite 2/1 ${fmt(r.ratio)}; postgres 2/1 ${fmt(pg.ratio2to1)}, 3/1 ${fmt(pg.ratio3to1)}`,
        `sqlite 1p ${fmt(r.oneProcessPerSec)}, 2p ${fmt(r.twoProcessesPerSec)} ev/s (slots ${Array.isArray(r.slotsPerNode) ? r.slotsPerNode.join('+') : '—'}, dup ${fmt(duplicates?.twoProcesses)}); ${postgres} (${fmt(r.events)} events)`,
        'postgres 2/1 ≥ 1.6',
        verdict(r),
      ]);
      break;
    }
    case 'scaleout': {
      if (typeof r.skipped === 'string') {
        rows.push([name, '—', `skipped: ${r.skipped}`, '', 'MISSED']);
        break;
      }
      const by = (r.byEndpoints ?? {}) as Record<string, Result>;
      const runs = (Array.isArray(r.runs) ? r.runs : []) as Result[];
      const ratios = Object.entries(by).map(([endpoints, e]) => `${endpoints} ep: 2/1 ${fmt(e.twoToOne)}, 3/1 ${fmt(e.threeToOne)}`);
      const perRun = runs.map((run) => `${fmt(run.endpoints)} ep × ${fmt(run.nodes)}n ${fmt(run.deliveredPerSec)}/s (${Array.isArray(run.deliveredPerNode) ? run.deliveredPerNode.join('/') : '—'}; load ${Array.isArray(run.loadAverage) ? run.loadAverage.join('→') : '—'})`);
      rows.push([
        name,
        ratios.join('; '),
        `maxInFlight ${fmt(r.maxInFlight)}, sink ${fmt(r.sinkDelayMs, ' ms')}, ${fmt(r.events)} events: ${perRun.join(', ')}; a new node holds its share after ≤ ${fmt(r.worstJoinMs, ' ms')} (${fmt(r.worstJoinHeartbeats)} heartbeats of ${fmt(r.renewIntervalMs, ' ms')})`,
        '2/1 ≥ 1.8, 3/1 ≥ 2.6; join ≤ 2 heartbeats',
        verdict(r),
      ]);
      break;
    }
    case 'replay': {
      const quiet = (r.withoutReplay ?? {}) as Result;
      const paced = (r.pacedJob ?? {}) as Result;
      const bulk = (r.bulkReplay ?? {}) as Result;
      rows.push([
        name,
        '—',
        `${fmt(r.deadLetters)} dead letters, new events at ${fmt(r.newEventsPerSec)}/s: p50/p99 ${fmt(quiet.p50Ms)}/${fmt(quiet.p99Ms, ' ms')} without a replay, ${fmt(paced.p50Ms)}/${fmt(paced.p99Ms, ' ms')} during the paced job (${fmt(paced.replayedPerSec)}/s), ${fmt(bulk.p50Ms)}/${fmt(bulk.p99Ms, ' ms')} during the bulk replay (${fmt(bulk.replayedPerSec)}/s); load ${fmt(r.loadAverage1m)}`,
        'report',
        '—',
      ]);
      break;
    }
    case 'features': {
      // The three "unused costs nothing" ratios first (the target), then what each costs in use.
      const unused = (r.unused ?? {}) as Record<string, Result | undefined>;
      const inUse = (r.inUse ?? {}) as Record<string, Record<string, Result | undefined> | undefined>;
      const [tracing, schema, filter] = [unused.tracingNoSdk, unused.schemaWithoutType, unused.filterNone];
      const filters = inUse.payloadFilter ?? {};
      const sign = inUse.ed25519?.sign1KiB;
      const sdk = inUse.tracing?.sdk;
      rows.push([
        name,
        `unused: tracing ${fmt(tracing?.ratio)}×, schema ${fmt(schema?.ratio)}×, filter ${fmt(filter?.ratio)}×`,
        `unused: tracing without an SDK ${fmt(tracing?.micros)} vs off ${fmt(tracing?.baselineMicros, ' µs')}/delivery; publish of a type without a schema ${fmt(schema?.micros)} vs no catalog ${fmt(schema?.baselineMicros, ' µs')}; planDeliveries without filters ${fmt(filter?.micros)} vs before ${fmt(filter?.baselineMicros, ' µs')}/event. ` +
          `In use: schema checked ${fmt(inUse.schemaChecked?.publishUs)} µs/publish (${fmt(inUse.schemaChecked?.ratioToNoCatalog)}×); filter on one/all/all 10 KB ${fmt(filters.one?.ratioToBefore)}/${fmt(filters.all?.ratioToBefore)}/${fmt(filters['all, 10 KB']?.ratioToBefore)}× before; ed25519 1 KiB ${fmt(sign?.ed25519Us)} vs HMAC ${fmt(sign?.hmacUs, ' µs')} (${fmt(sign?.ratio)}×); SDK span ${fmt(sdk?.us)} vs ${fmt(sdk?.offWithSdkUs, ' µs')} (${fmt(sdk?.ratio)}×)`,
        'unused ≤ 1.05× each',
        verdict(r),
      ]);
      break;
    }
    case 'peers':
      rows.push([name, '—', 'Herald (SQLite, PostgreSQL) beside BullMQ and graphile-worker: see the peers table', 'report', '—']);
      break;
    default:
      rows.push([name, '—', JSON.stringify(r).slice(0, 60), '', verdict(r)]);
  }
}
const header: [string, string, string, string, string] = ['scenario', 'ratio', 'this machine', 'target', 'verdict'];
const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
console.log(`\n${line(header)}\n| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`);
for (const row of rows) console.log(line(row));
console.log(`\nwritten to bench-results.json (${((Date.now() - t0) / 1000).toFixed(0)} s)`);

if (scenarios.peers !== undefined && typeof scenarios.peers.error !== 'string') console.log(peersTable(scenarios.peers));

/**
 * Each system of the peers scenario: delivered/s as median (min–max) of its
 * rounds, the ratio of its median to graphile-worker's and to BullMQ's with
 * persistence (AOF), CPU µs per delivered event by process (medians of the
 * rounds; the sink excluded), requests past the distinct ids; then what a
 * delivery cost PostgreSQL, for the systems on it.
 */
function peersTable(peersResult: Result): string {
  const systems = (peersResult.systems ?? {}) as Record<string, Result>;
  const medianOf = (name: string): number => ((systems[name]?.deliveredPerSec as Spread | undefined)?.median ?? Number.NaN);
  const graphile = medianOf('graphile-worker');
  const bullmqAof = medianOf('BullMQ, Redis AOF everysec');
  const ratio = (a: number, b: number): string => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}×` : '—');
  const spreadText = (s: Spread | undefined): string => (s === undefined ? '—' : s.min === s.max ? fmt(s.median) : `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`);
  const cells: string[][] = [];
  const notes: string[] = [];
  const costs: string[] = [];
  for (const [name, p] of Object.entries(systems)) {
    if (typeof p.skipped === 'string') {
      notes.push(`${name}: skipped — ${p.skipped}`);
      continue;
    }
    if (typeof p.error === 'string') {
      notes.push(`${name}: FAILED — ${p.error.split('\n')[0]}`);
      continue;
    }
    const rate = p.deliveredPerSec as Spread;
    const cpu = p.cpuUsPerEvent as Record<string, Spread>;
    const rounds = (p.rounds as Result[]).length;
    cells.push([
      `${name}${p.complete === true ? '' : ' INCOMPLETE'}`,
      spreadText(rate),
      ratio(rate.median, graphile),
      ratio(rate.median, bullmqAof),
      `${fmt(cpu.total?.median)} = ${fmt(cpu.worker?.median)} + ${fmt(cpu.producer?.median)} + ${fmt(cpu.database?.median)}`,
      fmt(p.duplicates),
      String(rounds),
    ]);
    if (p.pgCost !== undefined) costs.push(`\n${name}, what a delivery cost PostgreSQL (median round):\n${formatPgCost({ ...(p.pgCost as PgCost), top: (p.pgCost as PgCost).top.slice(0, 6) })}`);
  }
  const head = ['system', 'delivered/s median (min–max)', '× graphile-worker', '× BullMQ AOF', 'CPU µs per delivery: total = worker + producer + database', 'duplicates', 'rounds'];
  const w = head.map((h, i) => Math.max(h.length, ...cells.map((row) => row[i]!.length)));
  const row = (c: readonly string[]): string => `| ${c.map((x, i) => x.padEnd(w[i]!)).join(' | ')} |`;
  return [
    `\nPeers: ${fmt(peersResult.events)} signed 1 KiB events (after a warm-up of ${fmt(peersResult.warmup)}), 100 endpoints, undici Pool of 16 connections; ` +
      `Herald is the compiled herald start; every producer in its own process, ${fmt(peersResult.enqueueBatch)} per transaction; CPU from /proc, the sink excluded; medians of each column`,
    row(head),
    `| ${w.map((n) => '-'.repeat(n)).join(' | ')} |`,
    ...cells.map(row),
    ...notes,
    ...costs,
  ].join('\n');
}
