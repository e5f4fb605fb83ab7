/**
 * What a delivery costs the PostgreSQL server, from its own statistics:
 * statements and rows (`pg_stat_statements`), tuples inserted, updated
 * (HOT or not) and deleted (`pg_stat_user_tables`), and the index entries
 * those writes made, per delivered event, plus the statements that took the
 * most execution time.
 *
 * Index entries written are estimated, since PostgreSQL counts index reads
 * only: every insert and every non-HOT update adds one entry to each index of
 * its table, so entries = (n_tup_ins + n_tup_upd − n_tup_hot_upd) × the
 * table's indexes. A partial index gets entries only for the rows it covers:
 * for a table with partial indexes the figure is an upper bound. Deletes add
 * none (vacuum removes the dead entries later).
 *
 * The server must load the extension (`PEERS_POSTGRES_SETTINGS`); each
 * database gets it with `openCountedDatabase`. `pg_stat_statements_reset()`
 * clears the whole server's statements, `pg_stat_reset()` the database's
 * counters; a backend reports its table counters at most once a second, 10 s
 * after it went idle, and when it exits: the reset waits 11 s after the
 * warm-up, and the counters are read once the system is stopped.
 *
 * As a command, Herald on PostgreSQL alone, for tuning its SQL:
 *
 *   npx tsx scripts/bench/peers/pg-cost.ts [--events 20000] [--warmup 5000] [--top 15] [--graphile] [--json]
 *
 * builds dist/ if stale, starts the embedded PostgreSQL with
 * pg_stat_statements, a sink, `herald start` on a fresh database and a
 * producer process (1 000 events per `publishPg` transaction); after the
 * warm-up it resets the statistics, delivers `--events`, stops Herald and
 * prints delivered/s, CPU per delivery by process, and the statement costs.
 * `--graphile` then does the same for graphile-worker (peers' settings) on the
 * same server, for the comparison.
 */
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { PostgresUnavailableError, startPostgresServer, type PostgresServer } from '../../../test-kit/postgres-server.ts';
import { startSinkProcess } from '../harness.ts';
import { ensureBuilt } from '../herald-service.ts';
import { Cleanup } from './peer-kit.ts';

/** The peers' server settings: statement statistics on (all systems pay the same small overhead). */
export const PEERS_POSTGRES_SETTINGS: Readonly<Record<string, string>> = Object.freeze({ shared_preload_libraries: 'pg_stat_statements' });

/** The server's `pg_stat_statements.query` cut to this many characters in the report. */
const QUERY_CHARS = 80;
const IDLE_LIMIT_MS = 15_000;
/** PGSTAT_IDLE_INTERVAL (10 s) and a margin. */
const IDLE_REPORT_MS = 11_000;

export interface TableCost {
  readonly table: string;
  readonly indexes: number;
  readonly partialIndexes: number;
  /** Per delivered event. */
  readonly inserted: number;
  readonly updated: number;
  readonly hotUpdated: number;
  readonly deleted: number;
  /** (inserted + updated − hotUpdated) × indexes, per delivered event. */
  readonly indexEntries: number;
}

export interface StatementCost {
  /** The first 80 characters, whitespace folded. */
  readonly query: string;
  readonly callsPerDelivery: number;
  readonly rowsPerCall: number;
  readonly meanUs: number;
  readonly totalUsPerDelivery: number;
}

export interface PgCost {
  readonly delivered: number;
  /** Per delivered event, every statement of the database (BEGIN and COMMIT included). */
  readonly calls: number;
  readonly rows: number;
  /** Execution time inside the server, µs per delivered event (not its CPU: waits included). */
  readonly execUs: number;
  readonly tuples: { readonly inserted: number; readonly updated: number; readonly hotUpdated: number; readonly deleted: number; readonly indexEntries: number };
  readonly tables: readonly TableCost[];
  readonly top: readonly StatementCost[];
}

export interface CountedDatabase {
  readonly url: string;
  /** A superuser client on the database: resets and reads its statistics. */
  readonly statsClient: pg.Client;
}

/**
 * Creates database `name` on `server` with pg_stat_statements, optionally
 * with `synchronous_commit = off` for every session; registered with
 * `cleanup`: the client ended and the database dropped.
 */
export async function openCountedDatabase(server: PostgresServer, name: string, cleanup: Cleanup, settings: { readonly asynchronousCommit?: boolean } = {}): Promise<CountedDatabase> {
  const url = await server.createDatabase(name);
  cleanup.add(`drop database ${name}`, () => undefined, async () => {
    const admin = new pg.Client({ connectionString: server.url('postgres') });
    await admin.connect();
    try {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    } finally {
      await admin.end();
    }
  });
  const statsClient = new pg.Client({ connectionString: url });
  await statsClient.connect();
  cleanup.add(`stats client ${name}`, () => undefined, () => statsClient.end());
  await statsClient.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  if (settings.asynchronousCommit === true) await statsClient.query(`ALTER DATABASE "${name}" SET synchronous_commit = off`);
  return { url, statsClient };
}

export async function resetPgStats(client: pg.Client): Promise<void> {
  // A backend gone idle with counters pending reports them only after PostgreSQL's idle interval
  // (10 s): the warm-up's must land before the reset, not after it.
  await new Promise((resolve) => setTimeout(resolve, IDLE_REPORT_MS));
  await client.query('SELECT pg_stat_statements_reset()');
  await client.query('SELECT pg_stat_reset()');
}

/** Waits until no other session is connected to the client's database (their counters reported at exit). */
export async function untilDatabaseIdle(client: pg.Client): Promise<void> {
  const deadline = Date.now() + IDLE_LIMIT_MS;
  while (Date.now() < deadline) {
    const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
    if (Number(rows[0]!.n) === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export async function readPgCost(client: pg.Client, delivered: number, top = 12): Promise<PgCost> {
  const per = (n: number): number => (delivered > 0 ? n / delivered : Number.NaN);
  const statements = await client.query<{ query: string; calls: string; rows: string; total_exec_time: number; mean_exec_time: number }>(
    `SELECT s.query, s.calls, s.rows, s.total_exec_time, s.mean_exec_time
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
      WHERE d.datname = current_database() AND s.query NOT ILIKE '%pg_stat%'
      ORDER BY s.total_exec_time DESC`,
  );
  const tables = await client.query<{ relname: string; schemaname: string; n_tup_ins: string; n_tup_upd: string; n_tup_hot_upd: string; n_tup_del: string; indexes: string; partial: string }>(
    `SELECT t.schemaname, t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del,
            (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid) AS indexes,
            (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid AND i.indpred IS NOT NULL) AS partial
       FROM pg_stat_user_tables t
      ORDER BY t.schemaname, t.relname`,
  );
  const tableCosts: TableCost[] = tables.rows
    .map((row) => {
      const inserted = Number(row.n_tup_ins);
      const updated = Number(row.n_tup_upd);
      const hotUpdated = Number(row.n_tup_hot_upd);
      const indexes = Number(row.indexes);
      return {
        table: `${row.schemaname}.${row.relname}`,
        indexes,
        partialIndexes: Number(row.partial),
        inserted: per(inserted),
        updated: per(updated),
        hotUpdated: per(hotUpdated),
        deleted: per(Number(row.n_tup_del)),
        indexEntries: per((inserted + updated - hotUpdated) * indexes),
      };
    })
    .filter((t) => t.inserted + t.updated + t.deleted > 0);
  const sum = (pick: (t: TableCost) => number): number => tableCosts.reduce((total, t) => total + pick(t), 0);
  const rows = statements.rows;
  return {
    delivered,
    calls: per(rows.reduce((total, s) => total + Number(s.calls), 0)),
    rows: per(rows.reduce((total, s) => total + Number(s.rows), 0)),
    execUs: per(rows.reduce((total, s) => total + s.total_exec_time * 1000, 0)),
    tuples: { inserted: sum((t) => t.inserted), updated: sum((t) => t.updated), hotUpdated: sum((t) => t.hotUpdated), deleted: sum((t) => t.deleted), indexEntries: sum((t) => t.indexEntries) },
    tables: tableCosts,
    top: rows.slice(0, top).map((s) => ({
      query: s.query.replace(/\s+/g, ' ').trim().slice(0, QUERY_CHARS),
      callsPerDelivery: per(Number(s.calls)),
      rowsPerCall: Number(s.calls) > 0 ? Number(s.rows) / Number(s.calls) : 0,
      meanUs: s.mean_exec_time * 1000,
      totalUsPerDelivery: per(s.total_exec_time * 1000),
    })),
  };
}

/** The cost as Markdown tables. */
export function formatPgCost(cost: PgCost): string {
  const f = (n: number, digits = 2): string => (Number.isFinite(n) ? n.toFixed(digits) : '—');
  const table = (head: readonly string[], body: readonly (readonly string[])[]): string[] => {
    const widths = head.map((h, i) => Math.max(h.length, ...body.map((r) => r[i]!.length)));
    const line = (cells: readonly string[]): string => `| ${cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ')} |`;
    return [line(head), `| ${widths.map((w) => '-'.repeat(w)).join(' | ')} |`, ...body.map(line)];
  };
  const t = cost.tuples;
  return [
    `Per delivered event (${cost.delivered} delivered): ${f(cost.calls)} statements, ${f(cost.rows)} rows, ${f(cost.execUs, 0)} µs executing; ` +
      `tuples ${f(t.inserted)} inserted, ${f(t.updated)} updated (${f(t.hotUpdated)} HOT), ${f(t.deleted)} deleted; ≈ ${f(t.indexEntries)} index entries written`,
    '',
    ...table(
      ['table', 'indexes (partial)', 'ins', 'upd', 'hot upd', 'del', 'index entries'],
      cost.tables.map((x) => [x.table, `${x.indexes} (${x.partialIndexes})`, f(x.inserted), f(x.updated), f(x.hotUpdated), f(x.deleted), f(x.indexEntries)]),
    ),
    '',
    ...table(
      ['statement (first 80 chars)', 'calls/delivery', 'rows/call', 'mean µs', 'µs/delivery'],
      cost.top.map((s) => [s.query.replaceAll('|', '\\|'), f(s.callsPerDelivery, 3), f(s.rowsPerCall, 1), f(s.meanUs, 0), f(s.totalUsPerDelivery, 1)]),
    ),
  ].join('\n');
}

// The command ---------------------------------------------------------------------

async function main(argv: readonly string[]): Promise<void> {
  const option = (name: string, fallback: number): number => {
    const at = argv.indexOf(`--${name}`);
    const value = at < 0 ? fallback : Number(argv[at + 1]);
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer (got ${argv[at + 1]})`);
    return value;
  };
  const events = option('events', 20_000);
  const warmup = option('warmup', 5_000);
  const top = option('top', 15);
  const asJson = argv.includes('--json');
  const withGraphile = argv.includes('--graphile');
  ensureBuilt();
  // Imported here, not above: peer-round.ts imports this module.
  const { heraldSystem } = await import('./herald-system.ts');
  const { graphileSystem } = await import('./graphile-system.ts');
  const { runRound, ROLES } = await import('./peer-round.ts');
  const cleanup = new Cleanup();
  try {
    const sink = await startSinkProcess({ record: 'ids' });
    cleanup.add('sink', () => undefined, () => sink.close());
    let server: PostgresServer;
    try {
      server = await startPostgresServer({ cleanup, settings: PEERS_POSTGRES_SETTINGS });
    } catch (error) {
      if (error instanceof PostgresUnavailableError) throw new Error(`no PostgreSQL: ${error.message}`);
      throw error;
    }
    const version = await server.version();
    const systems = [heraldSystem({ name: 'Herald on PostgreSQL', store: 'postgres', server })];
    if (withGraphile) systems.push(graphileSystem('graphile-worker', server));
    const results = [];
    for (const [i, system] of systems.entries()) {
      const result = await runRound(system, { sink, bodies: events + warmup, cleanup, roundId: `pg_cost_${i}` }, { events, warmup, timeoutMs: Math.max(60_000, events * 10) });
      results.push({ system: system.name, ...result, pgCost: { ...result.pgCost!, top: result.pgCost!.top.slice(0, top) } });
    }
    if (asJson) {
      console.log(JSON.stringify({ postgres: version, results }, null, 2));
      return;
    }
    for (const result of results) {
      const cpu = ROLES.map((role) => `${role} ${result.cpuUsPerEvent[role]}`).join(' + ');
      console.log(`\n${result.system}, PostgreSQL ${version}: ${result.distinct}/${events} delivered in ${result.seconds} s, ${result.deliveredPerSec}/s` +
        ` (warm-up ${warmup}: ${result.warmup.deliveredPerSec}/s), ${result.duplicates} sent twice`);
      console.log(`CPU µs per delivered event: ${result.cpuUsPerEventTotal} = ${cpu}\n`);
      console.log(formatPgCost(result.pgCost));
    }
  } finally {
    await cleanup.run();
    cleanup.dispose();
  }
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main(process.argv.slice(2)).catch((error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : String(error));
    process.exitCode = 1;
  });
}
