/**
 * Cluster: the throughput workload (100 endpoints, 1 KiB bodies, signing on,
 * sink answering 200 at once) delivered by several Herald processes sharing
 * one store, against 1 process on the same store in the same run. Delivered
 * events/s from the first publish to the last delivery settled (the nodes
 * time it on the machine's monotonic clock).
 *
 * - SQLite: 1, then 2 processes on one file.
 * - PostgreSQL (the embedded server of `test-kit/postgres-server.ts`, default
 *   settings): 1, 2, 3, then 1 process again, each run on a fresh database;
 *   the ratios are against the mean of the two 1-process runs, so drift of
 *   a noisy machine hits both sides. The goal: 2 processes ≥ 1.6× one. The
 *   1-process run has the graphile-worker peer's shape (worker process,
 *   server, producer in the scenario process), so the two compare.
 *
 * Each node is a forked process (scripts/bench/cluster-node.ts) with a short
 * lease (renewal 250 ms), so the nodes share the slots before the events are
 * published; the events are then written by a producer connection in this
 * process, in batches of 1 000 (the store's `publish`), which the nodes see
 * through the store's watch. Duplicates (requests beyond one per event) are
 * reported: a slot changing hands mid-run resends what was in flight, by
 * design. CPU per delivered event is read from /proc over the window: the
 * Herald processes (all threads), the server's process tree, the producer
 * (this process, which also samples the server).
 *
 * On PostgreSQL, what Herald's backends wait on is sampled from
 * pg_stat_activity every 100 ms during the window (mean backends per
 * statement and wait), and after each run the server's counters tell how
 * often each outbox row was marked fanned out: more than once per event
 * means several processes fanned out the same events.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { resolveConfig } from '../../../lib/config/config.ts';
import { Herald } from '../../../lib/herald.ts';
import { publish as publishPostgres } from '../../../lib/producer/postgres-publish.ts';
import { publish as publishSqlite } from '../../../lib/producer/sqlite-publish.ts';
import type { EventInput } from '../../../lib/producer/validate-event.ts';
import { PostgresUnavailableError, startPostgresServer, type PostgresServer } from '../../../test-kit/postgres-server.ts';
import { backlogBatch, preciseNow, progress, round, sleep, startClusterNode, startSinkProcess, waitFor, type ClusterNode, type ScenarioOptions, type ScenarioResult } from '../harness.ts';
import { Cleanup, clockTicksPerSecond, processTicks, selfTicks, treeTicks } from '../peers/peer-kit.ts';

const ENDPOINTS = 100;
const BODY_BYTES = 1024;
const PUBLISH_BATCH = 1_000;
/** Herald's default `engine.slotCount`: the nodes share these. */
const SLOTS = 256;
/** The goal: 2 processes on PostgreSQL deliver at least this many times what 1 does. */
const TWO_TO_ONE_GOAL = 1.6;
/** Process counts of the PostgreSQL runs, in order: the 1-process run again last, so drift hits both sides of the ratios. */
const POSTGRES_RUNS = [1, 2, 3, 1];
/** A quick run (a smoke test, under the runner's 60 s) does the first two. */
const QUICK_POSTGRES_RUNS = [1, 2];
const WAIT_SAMPLE_MS = 100;

/** Where one run's nodes keep their state, and the producer's way in. */
interface RunStore {
  /** Herald's `store` setting. */
  readonly setting: string;
  /** Opens the producer's connection (once Herald has created the schema); publishes one batch per call. */
  connectProducer(): Promise<(batch: readonly EventInput[]) => Promise<void>>;
  /** The server's CPU ticks, for a store with a server. */
  readonly serverTicks?: () => number;
  /** Starts watching the server through the window; the stop answers what was seen. */
  observe?(): () => Promise<Record<string, number>>;
  /** Once the nodes and the producer are gone: the server's counters for the run, per event. */
  counters?(events: number): Promise<Record<string, number>>;
  close(): Promise<void>;
}

interface RunFigures {
  readonly processes: number;
  readonly eventsPerSec: number;
  readonly seconds: number;
  readonly slotsPerNode: number[];
  readonly deliveredPerNode: number[];
  readonly duplicates: number;
  /** CPU µs per delivered event by process role, and their total. */
  readonly cpuUsPerEvent: Record<string, number>;
  readonly cpuUsPerEventTotal: number;
  readonly waits?: Record<string, number>;
  readonly counters?: Record<string, number>;
}

type Sink = Awaited<ReturnType<typeof startSinkProcess>>;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const events = options.quick ? 2_000 : 50_000;
  const timeoutMs = options.quick ? 25_000 : 180_000;
  const sink = await startSinkProcess({ record: 'count' });
  const cleanup = new Cleanup();
  try {
    const sqlite: Record<number, RunFigures> = {};
    for (const processes of [1, 2]) {
      sqlite[processes] = await clusterRun(sink, processes, events, timeoutMs, 'sqlite', sqliteStore);
    }
    const one = sqlite[1]!;
    const two = sqlite[2]!;
    const postgres = await postgresRuns(sink, cleanup, events, timeoutMs, options.quick ? QUICK_POSTGRES_RUNS : POSTGRES_RUNS);
    return {
      events,
      endpoints: ENDPOINTS,
      oneProcessPerSec: one.eventsPerSec,
      twoProcessesPerSec: two.eventsPerSec,
      ratio: round(two.eventsPerSec / one.eventsPerSec, 3),
      slotsPerNode: two.slotsPerNode,
      duplicates: { oneProcess: one.duplicates, twoProcesses: two.duplicates },
      runSeconds: { oneProcess: one.seconds, twoProcesses: two.seconds },
      sqliteRuns: [one, two],
      postgres,
      target: `PostgreSQL: 2 processes ≥ ${TWO_TO_ONE_GOAL}× 1`,
      met: postgres.met,
    };
  } finally {
    await sink.close();
    await cleanup.run();
    cleanup.dispose();
  }
}

/** The PostgreSQL runs, their ratios against the mean 1-process run, and the goal's verdict (`met`). */
async function postgresRuns(
  sink: Sink,
  cleanup: Cleanup,
  events: number,
  timeoutMs: number,
  counts: readonly number[],
): Promise<Record<string, unknown> & { readonly met: boolean }> {
  let server: PostgresServer;
  try {
    server = await startPostgresServer({ cleanup });
  } catch (error) {
    if (error instanceof PostgresUnavailableError) return { skipped: error.message, met: false };
    throw error;
  }
  const version = await server.version();
  progress(`postgres: PostgreSQL ${version} on 127.0.0.1:${server.port}`);
  const runs: RunFigures[] = [];
  for (const processes of counts) {
    const database = `herald_cluster_${runs.length + 1}_${processes}p`;
    runs.push(await clusterRun(sink, processes, events, timeoutMs, 'postgres', () => postgresStore(server, database)));
  }
  const perSec = (processes: number): number[] => runs.filter((r) => r.processes === processes).map((r) => r.eventsPerSec);
  const mean = (values: readonly number[]): number => values.reduce((sum, v) => sum + v, 0) / values.length;
  const one = mean(perSec(1));
  const two = mean(perSec(2));
  const three = mean(perSec(3));
  const twoToOne = two / one;
  return {
    version,
    oneProcessPerSec: round(one, 0),
    oneProcessRuns: perSec(1),
    twoProcessesPerSec: round(two, 0),
    threeProcessesPerSec: round(three, 0),
    ratio2to1: round(twoToOne, 3),
    ratio3to1: round(three / one, 3),
    runs,
    met: twoToOne >= TWO_TO_ONE_GOAL,
  };
}

async function clusterRun(
  sink: Sink,
  nodeCount: number,
  events: number,
  timeoutMs: number,
  label: string,
  openStore: (dataDir: string) => Promise<RunStore>,
): Promise<RunFigures> {
  const name = `${label}, ${nodeCount} process${nodeCount === 1 ? '' : 'es'}`;
  progress(`${name}: ${events} events over ${ENDPOINTS} endpoints`);
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-bench-cluster-'));
  const store = await openStore(dataDir);
  const nodes: ClusterNode[] = [];
  let stopObserving: (() => Promise<Record<string, number>>) | undefined;
  try {
    const overrides = {
      store: store.setting,
      dataDir,
      port: 0,
      allowNetworks: ['127.0.0.0/8'],
      logLevel: 'silent',
      engine: { renewIntervalMs: 250, leaseMs: 3_000 },
    } as const;
    // Endpoints first, by a Herald that is never started (it takes no slot).
    const setup = await Herald.open(resolveConfig(overrides));
    const endpointIds: string[] = [];
    for (let i = 0; i < ENDPOINTS; i++) endpointIds.push((await setup.createEndpoint({ tenantId: 'bench', url: `${sink.url}/ep/${i}` })).endpoint.id);
    await setup.close();
    const publish = await store.connectProducer();

    for (let i = 0; i < nodeCount; i++) nodes.push(startClusterNode(overrides));
    const shared = await waitFor(() => nodes.every((node) => node.slots > 0) && nodes.reduce((sum, node) => sum + node.slots, 0) === SLOTS, 30_000, 50);
    if (!shared) throw new Error(`the nodes did not share the slots within 30 s (${nodes.map((n) => n.slots).join(' + ')})`);
    // Let a rebalance that is still settling finish before the clock starts.
    await sleep(1_000);
    const slotsPerNode = nodes.map((node) => node.slots);
    await sink.take();

    const readers: Record<string, () => number> = {
      herald: () => nodes.reduce((sum, node) => sum + processTicks(node.child.pid!), 0),
      ...(store.serverTicks === undefined ? {} : { server: store.serverTicks }),
      producer: selfTicks,
    };
    const read = (): Record<string, number> => Object.fromEntries(Object.entries(readers).map(([role, ticks]) => [role, ticks()]));
    stopObserving = store.observe?.();
    const ticksBefore = read();
    const started = preciseNow();
    for (let from = 0; from < events; from += PUBLISH_BATCH) {
      await publish(backlogBatch(from, Math.min(events, from + PUBLISH_BATCH), endpointIds, BODY_BYTES));
      await new Promise((resolve) => setImmediate(resolve));
    }
    let lastReport = 0;
    const total = (): number => nodes.reduce((sum, node) => sum + node.delivered, 0);
    const done = await waitFor(() => {
      if (total() - lastReport >= events / 5) {
        lastReport = total();
        progress(`${name}: ${lastReport}/${events} delivered`);
      }
      return total() >= events;
    }, timeoutMs, 20);
    const ticksAfter = read();
    const waits = await stopObserving?.();
    stopObserving = undefined;
    if (!done) throw new Error(`${name}: ${total()}/${events} delivered within ${timeoutMs / 1000} s`);
    const seconds = (Math.max(...nodes.map((node) => node.deliveredAt)) - started) / 1000;
    const deliveredPerNode = nodes.map((node) => node.delivered);
    const duplicates = (await sink.take()).count - events;

    await Promise.all(nodes.splice(0).map((node) => node.close()));
    const counters = await store.counters?.(events);

    const usPerTick = 1e6 / clockTicksPerSecond();
    const cpuUsPerEvent = Object.fromEntries(Object.keys(readers).map((role) => [role, Math.round(((ticksAfter[role]! - ticksBefore[role]!) * usPerTick) / events)]));
    const figures: RunFigures = {
      processes: nodeCount,
      eventsPerSec: round(events / seconds, 0),
      seconds: round(seconds, 2),
      slotsPerNode,
      deliveredPerNode,
      duplicates,
      cpuUsPerEvent,
      cpuUsPerEventTotal: Object.values(cpuUsPerEvent).reduce((sum, us) => sum + us, 0),
      ...(waits === undefined ? {} : { waits }),
      ...(counters === undefined ? {} : { counters }),
    };
    progress(`${name}: ${figures.eventsPerSec} events/s, CPU µs/event ${JSON.stringify(cpuUsPerEvent)}, duplicates ${duplicates}`);
    return figures;
  } finally {
    await stopObserving?.().catch(() => undefined);
    await Promise.all(nodes.map((node) => node.close()));
    await store.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

// The stores ---------------------------------------------------------------------------

async function sqliteStore(dataDir: string): Promise<RunStore> {
  const dbPath = join(dataDir, 'herald.db');
  let producer: Database.Database | undefined;
  return {
    setting: `sqlite:${dbPath}`,
    async connectProducer() {
      const db = new Database(dbPath);
      producer = db;
      db.pragma('busy_timeout = 5000');
      return async (batch) => void publishSqlite(db, batch, {});
    },
    async close() {
      producer?.close();
    },
  };
}

/** A fresh database on the bench's server; the producer a `pg.Client` of its own. */
async function postgresStore(server: PostgresServer, database: string): Promise<RunStore> {
  const url = await server.createDatabase(database);
  let producer: pg.Client | undefined;
  return {
    setting: url,
    async connectProducer() {
      const client = new pg.Client({ connectionString: url, application_name: 'bench producer' });
      await client.connect();
      producer = client;
      return async (batch) => void (await publishPostgres(client, batch));
    },
    serverTicks: () => treeTicks(server.postmasterPid),
    observe: () => sampleWaits(url),
    async counters(events) {
      await producer?.end();
      producer = undefined;
      return serverCounters(url, events);
    },
    async close() {
      await producer?.end();
    },
  };
}

/**
 * Herald's statements, told apart by a fragment near the start of their text (the server keeps
 * only the first 1 KiB of a running statement's text; whitespace collapsed; the first that matches wins).
 */
const STATEMENTS: ReadonlyArray<readonly [fragment: string, label: string]> = [
  ['WITH wanted AS (SELECT DISTINCT unnest', 'fanOut'],
  ['fanned_out_at IS NULL ORDER BY', 'unfanned'],
  ['WITH RECURSIVE owned AS', 'claimDue'],
  ['AS w(endpoint_id, slot, lim)', 'claimForEndpoints'],
  ["WHERE status = 'pending' AND next_attempt_at <=", 'countDue'],
  ['WITH batch AS', 'settle'],
  ['.leases', 'leases'],
  ['.nodes', 'nodes'],
  ['.endpoints', 'endpoints'],
];

/**
 * Samples the Herald backends of the database (its listener's excluded) that are running a
 * statement, every 100 ms until stopped; answers the mean number of them per statement and wait
 * (`CPU` when not waiting: running, or runnable on a busy machine), and `samples`.
 */
function sampleWaits(url: string): () => Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url, application_name: 'bench sampler' });
  const tally = new Map<string, number>();
  let samples = 0;
  let failed = 0;
  let stopped = false;
  const sampling = (async () => {
    await client.connect();
    while (!stopped) {
      const { rows } = await client.query<{ wait_event_type: string | null; wait_event: string | null; query: string }>(
        `SELECT wait_event_type, wait_event, query FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()
           AND application_name LIKE 'herald %' AND application_name NOT LIKE '% listener'`,
      );
      samples += 1;
      for (const row of rows) {
        const text = row.query.replace(/\s+/g, ' ');
        const statement = STATEMENTS.find(([fragment]) => text.includes(fragment))?.[1] ?? text.slice(0, 40);
        const key = `${statement} ${row.wait_event_type === null ? 'CPU' : `${row.wait_event_type}:${row.wait_event}`}`;
        tally.set(key, (tally.get(key) ?? 0) + 1);
      }
      await sleep(WAIT_SAMPLE_MS);
    }
  })().catch(() => {
    // The server went away mid-run: the run fails on its own; the samples so far stand.
    failed = 1;
  });
  return async () => {
    stopped = true;
    try {
      await sampling;
    } finally {
      await client.end().catch(() => undefined);
    }
    // Below 0.01 backends on average is noise.
    const means = [...tally].sort((a, b) => b[1] - a[1]).map(([key, n]) => [key, round(n / samples, 2)] as const).filter(([, mean]) => mean >= 0.01);
    return { samples, ...(failed === 0 ? {} : { failed }), ...Object.fromEntries(means) };
  };
}

/**
 * The server's counters for the whole run (setup included), per event: row versions written
 * to the outbox and the deliveries, transactions. Read once every other backend of the database
 * has exited, so each has flushed its statistics.
 */
async function serverCounters(url: string, events: number): Promise<Record<string, number>> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await waitFor(async () => {
      const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      return Number(rows[0]!.n) === 0;
    }, 10_000, 50);
    const tables = await client.query<{ relname: string; n_tup_ins: string; n_tup_upd: string }>(
      `SELECT relname, n_tup_ins, n_tup_upd FROM pg_stat_user_tables WHERE schemaname = 'herald' AND relname IN ('events', 'deliveries')`,
    );
    const database = await client.query<{ xact_commit: string; xact_rollback: string; deadlocks: string }>(
      'SELECT xact_commit, xact_rollback, deadlocks FROM pg_stat_database WHERE datname = current_database()',
    );
    const table = (relname: string): { n_tup_ins: string; n_tup_upd: string } | undefined => tables.rows.find((row) => row.relname === relname);
    const perEvent = (value: string | undefined): number => round(Number(value ?? Number.NaN) / events, 3);
    const db = database.rows[0];
    return {
      eventUpdatesPerEvent: perEvent(table('events')?.n_tup_upd),
      deliveryInsertsPerEvent: perEvent(table('deliveries')?.n_tup_ins),
      deliveryUpdatesPerEvent: perEvent(table('deliveries')?.n_tup_upd),
      commitsPerEvent: perEvent(db?.xact_commit),
      rollbacks: Number(db?.xact_rollback ?? Number.NaN),
      deadlocks: Number(db?.deadlocks ?? Number.NaN),
    };
  } finally {
    await client.end();
  }
}
