/**
 * One round of one system: started fresh (empty store, new processes), warmed
 * up with `warmup` events that are not measured, then `events` measured from
 * the producer's first transaction to the sink's last new id, then stopped.
 * The warm-up runs through the very processes that are then measured (their
 * JIT warm, their connections open), as a service that has been running a
 * while; what a system keeps of delivered events (Herald's outbox rows) stays.
 *
 * CPU is read from /proc for three roles: `worker` (the system's own
 * process: Herald's service, a peer's worker), `producer` (the application
 * enqueueing, its own process) and `database` (the server's process tree:
 * PostgreSQL, Redis; 0 when the store is inside the worker, as SQLite is).
 * On PostgreSQL the server's statement statistics are reset after the
 * warm-up and read after the round (pg-cost.ts).
 */
import type pg from 'pg';
import { progress, type SinkProcess } from '../harness.ts';
import { measure, type Cleanup, type PeerMeasurement, type TickReaders } from './peer-kit.ts';
import { readPgCost, resetPgStats, untilDatabaseIdle, type PgCost } from './pg-cost.ts';

export const ROLES = ['worker', 'producer', 'database'] as const;
export type Role = (typeof ROLES)[number];

/** What a round's system needs from the scenario. */
export interface RoundContext {
  readonly sink: SinkProcess;
  /** Every event a producer may be asked for: measured and warm-up. */
  readonly bodies: number;
  /** The round's processes register their stop here (it also runs on SIGINT/SIGTERM). */
  readonly cleanup: Cleanup;
  /** Unique within the scenario: names the round's databases. */
  readonly roundId: string;
}

/** A system started for one round. */
export interface RunningSystem {
  /** Cumulative CPU ticks by role; a role the system does not have reads 0. */
  readonly readers: Readonly<Record<Role, () => number>>;
  /** Enqueues events `from` to `to` (exclusive), resolving once all are committed. */
  produce(from: number, to: number): Promise<void>;
  /** A client on its PostgreSQL database (superuser): its statements are counted. */
  readonly statsClient?: pg.Client;
  /** Stops the system's processes (before the statistics of its database are read). */
  stop(): Promise<void>;
}

export interface PeerSystem {
  /** The row's name in the table and the JSON. */
  readonly name: string;
  /** Versions and settings, for the report. */
  readonly details: Readonly<Record<string, unknown>>;
  start(context: RoundContext): Promise<RunningSystem>;
}

export interface RoundResult extends PeerMeasurement {
  readonly warmup: { readonly events: number; readonly deliveredPerSec: number; readonly complete: boolean };
  readonly pgCost?: PgCost;
}

export interface RoundOptions {
  readonly events: number;
  readonly warmup: number;
  readonly timeoutMs: number;
}

/** Runs one round of `system`: start, warm up, reset the statistics, measure, stop, read them. */
export async function runRound(system: PeerSystem, context: RoundContext, options: RoundOptions): Promise<RoundResult> {
  const mark = context.cleanup.mark();
  try {
    const running = await system.start(context);
    const readers: TickReaders = running.readers;
    // Warm-up: events numbered after the measured ones, so the sink tells the two apart.
    const warm = await measure(`${system.name} warm-up`, context.sink, options.warmup, () => running.produce(options.events, options.events + options.warmup), readers, options.timeoutMs);
    if (!warm.complete) throw new Error(`${system.name}: warm-up incomplete (${warm.distinct}/${options.warmup})`);
    if (running.statsClient !== undefined) await resetPgStats(running.statsClient);
    progress(`${system.name}: ${options.events} events`);
    const measured = await measure(system.name, context.sink, options.events, () => running.produce(0, options.events), readers, options.timeoutMs);
    let pgCost: PgCost | undefined;
    if (running.statsClient !== undefined) {
      // A backend reports its table counters when it exits: stop the system, then read them.
      await running.stop();
      await untilDatabaseIdle(running.statsClient);
      pgCost = await readPgCost(running.statsClient, measured.distinct);
    }
    return { ...measured, warmup: { events: options.warmup, deliveredPerSec: warm.deliveredPerSec, complete: warm.complete }, ...(pgCost === undefined ? {} : { pgCost }) };
  } finally {
    await context.cleanup.undo(mark);
  }
}
