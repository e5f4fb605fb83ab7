/**
 * An application publishing into Herald's outbox from its own process, as one
 * would: it imports the compiled package (`dist/index.js`, not lib/), opens its
 * own connection, and publishes in its own transactions (`publish` on a
 * better-sqlite3 connection inside `BEGIN IMMEDIATE … COMMIT`; `publishPg` on a
 * `pg` client inside `BEGIN … COMMIT`). Forked by the latency and fairness
 * scenarios (scripts/bench/open-loop-load.ts).
 *
 * Two schedules:
 * - `open-loop`: `rate` events per second for `warmupSeconds + seconds`, on a
 *   timetable that never waits for Herald: every `tickMs` one transaction
 *   with every event due by then (event i is due at start + (i + 1) / rate), so a
 *   late tick catches up with a bigger transaction. Each event's commit time
 *   (the machine's monotonic clock, read once COMMIT has returned) is
 *   reported by id, marked whether it fell in the warm-up.
 * - `backlog`: `events` events as fast as the store takes them, `batch` per
 *   transaction (a backlog queued at once).
 *
 * IPC:
 *   ← {type: 'ready'}                 the connection is open
 *   → {type: 'start'}                 run the schedule
 *   ← {type: 'measuring', at}         the warm-up is over (open-loop)
 *   ← {type: 'done', report}          every event committed ({@link ProducerReport})
 *   → {type: 'close'}                 close the connection, exit
 */
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import pg from 'pg';
import type * as HeraldPackage from '../../lib/index.ts';
import { machineNowMs } from './machine-clock.ts';

export type ProducerStore = { readonly kind: 'sqlite'; readonly path: string } | { readonly kind: 'postgres'; readonly url: string };

export type ProducerSchedule =
  | { readonly kind: 'open-loop'; readonly rate: number; readonly seconds: number; readonly warmupSeconds: number; readonly tickMs: number }
  | { readonly kind: 'backlog'; readonly events: number; readonly batch: number };

export interface ProducerJob {
  readonly store: ProducerStore;
  readonly tenantId: string;
  /** Event n goes to `endpointIds[n % length]`; empty: to every endpoint of the tenant (fan-out). */
  readonly endpointIds: readonly string[];
  readonly bodyBytes: number;
  readonly schedule: ProducerSchedule;
}

export interface ProducerReport {
  /** Events counted (past the warm-up): ids and commit times (machine clock, ms), same order. */
  readonly ids: string[];
  readonly committedAt: number[];
  readonly events: number;
  readonly transactions: number;
  /** Counted events over the span from the end of the warm-up to the last commit. */
  readonly achievedPerSec: number;
  /** How late each transaction of the counted span began after its tick on the timetable (ms): p50, p99, max. */
  readonly lateMs: { readonly p50: number; readonly p99: number; readonly max: number };
  /** The last commit less the time the last event was due (ms): how far behind the timetable it ended. */
  readonly behindAtEndMs: number;
  /** This process's CPU (user + system) over the whole schedule, µs. */
  readonly cpuMicros: number;
}

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Loaded at run time from dist/ (what an application gets from the package); typed by lib/.
const herald = (await import(pathToFileURL(join(ROOT, 'dist', 'index.js')).href)) as typeof HeraldPackage;

const job = JSON.parse(process.argv[2] ?? '{}') as ProducerJob;
const pad = 'x'.repeat(Math.max(0, job.bodyBytes - 60));

function eventAt(n: number): HeraldPackage.EventInput {
  const endpointId = job.endpointIds.length === 0 ? undefined : job.endpointIds[n % job.endpointIds.length];
  return { tenantId: job.tenantId, type: 'bench.event', ...(endpointId === undefined ? {} : { endpointId }), payload: { n, kind: 'bench', pad } };
}

/** One transaction publishing events `from` to `to` (exclusive); resolves with their ids. */
type PublishRange = (from: number, to: number) => Promise<string[]>;

async function openPublisher(store: ProducerStore): Promise<{ publishRange: PublishRange; close(): Promise<void> }> {
  if (store.kind === 'sqlite') {
    const db = new Database(store.path);
    db.pragma('busy_timeout = 5000');
    const inTransaction = db.transaction((from: number, to: number) => {
      const events: HeraldPackage.EventInput[] = [];
      for (let n = from; n < to; n++) events.push(eventAt(n));
      return herald.publish(db, events).map((event) => event.id);
    });
    return {
      publishRange: async (from, to) => inTransaction.immediate(from, to),
      close: async () => void db.close(),
    };
  }
  const client = new pg.Client({ connectionString: store.url });
  await client.connect();
  return {
    async publishRange(from, to) {
      const events: HeraldPackage.EventInput[] = [];
      for (let n = from; n < to; n++) events.push(eventAt(n));
      await client.query('BEGIN');
      try {
        const stored = await herald.publishPg(client, events);
        await client.query('COMMIT');
        return stored.map((event) => event.id);
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      }
    },
    close: () => client.end(),
  };
}

const sleepUntil = (at: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, at - machineNowMs())));

function nearestRank(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

async function runOpenLoop(publishRange: PublishRange, schedule: Extract<ProducerSchedule, { kind: 'open-loop' }>): Promise<Omit<ProducerReport, 'cpuMicros'>> {
  const warmupEvents = Math.round(schedule.rate * schedule.warmupSeconds);
  const total = warmupEvents + Math.round(schedule.rate * schedule.seconds);
  const msPerEvent = 1_000 / schedule.rate;
  const ids: string[] = [];
  const committedAt: number[] = [];
  const late: number[] = [];
  let published = 0;
  let transactions = 0;
  let measuringFrom = Number.NaN;
  const started = machineNowMs();
  for (let tick = 1; published < total; ) {
    const scheduled = started + tick * schedule.tickMs;
    await sleepUntil(scheduled);
    const began = machineNowMs();
    const due = Math.min(total, Math.floor((began - started) / msPerEvent));
    const from = published;
    const stored = due > from ? await publishRange(from, due) : [];
    const at = machineNowMs();
    // The next tick; after a transaction that overran ticks, the last one passed (so it runs at once).
    tick = Math.max(tick + 1, Math.floor((at - started) / schedule.tickMs));
    if (due <= from) continue;
    transactions++;
    published = due;
    if (due > warmupEvents) late.push(Math.max(0, began - scheduled));
    for (let n = from; n < due; n++) {
      if (n < warmupEvents) continue;
      if (Number.isNaN(measuringFrom)) {
        measuringFrom = started + (n + 1) * msPerEvent;
        process.send?.({ type: 'measuring', at: measuringFrom });
      }
      ids.push(stored[n - from]!);
      committedAt.push(at);
    }
  }
  const sortedLate = Float64Array.from(late).sort();
  const span = (committedAt.at(-1) ?? measuringFrom) - measuringFrom;
  return {
    ids,
    committedAt,
    events: ids.length,
    transactions,
    achievedPerSec: span > 0 ? Math.round((ids.length / span) * 1_000) : Number.NaN,
    lateMs: { p50: nearestRank(sortedLate, 50), p99: nearestRank(sortedLate, 99), max: sortedLate.at(-1) ?? Number.NaN },
    behindAtEndMs: (committedAt.at(-1) ?? Number.NaN) - (started + total * msPerEvent),
  };
}

async function runBacklog(publishRange: PublishRange, schedule: Extract<ProducerSchedule, { kind: 'backlog' }>): Promise<Omit<ProducerReport, 'cpuMicros'>> {
  const started = machineNowMs();
  let transactions = 0;
  for (let from = 0; from < schedule.events; from += schedule.batch) {
    await publishRange(from, Math.min(schedule.events, from + schedule.batch));
    transactions++;
    // Between transactions, as an application's requests would be: Herald gets the write lock in between.
    await new Promise((resolve) => setImmediate(resolve));
  }
  const span = machineNowMs() - started;
  return { ids: [], committedAt: [], events: schedule.events, transactions, achievedPerSec: Math.round((schedule.events / span) * 1_000), lateMs: { p50: 0, p99: 0, max: 0 }, behindAtEndMs: 0 };
}

const publisher = await openPublisher(job.store);
process.on('message', (message: { type: string }) => {
  if (message.type === 'close') {
    void publisher.close().finally(() => process.exit(0));
    return;
  }
  if (message.type !== 'start') return;
  const cpuAtStart = process.cpuUsage();
  const schedule = job.schedule;
  const running = schedule.kind === 'open-loop' ? runOpenLoop(publisher.publishRange, schedule) : runBacklog(publisher.publishRange, schedule);
  running.then(
    (report) => {
      const cpu = process.cpuUsage(cpuAtStart);
      process.send?.({ type: 'done', report: { ...report, cpuMicros: cpu.user + cpu.system } satisfies ProducerReport });
    },
    (error: unknown) => {
      process.send?.({ type: 'failed', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    },
  );
});
// The bench process went away: never outlive it.
process.on('disconnect', () => process.exit(0));
process.send?.({ type: 'ready' });
