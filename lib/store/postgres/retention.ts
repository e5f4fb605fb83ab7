/**
 * Retention in PostgreSQL: attempts and dead letters older than the horizon
 * go, fanned-out events with nothing left to deliver and replay jobs ended before it, a bounded chunk per
 * statement, so a large purge never holds many rows locked nor one long
 * transaction open (which would keep vacuum from reclaiming dead rows);
 * delivery minutes older than theirs likewise.
 */
import type { Sql, Statement } from './sql.ts';

export const PURGE_CHUNK = 500;

/** Statuses a delivery never leaves (a replay aside, which needs the dead letter the purge keeps). */
const TERMINAL_STATUSES_SQL = `('delivered', 'dead', 'cancelled')`;

export class RetentionQueries {
  readonly #s: string;
  /** The statements whose plans matter on a long history (spec/store/postgres-plans.spec.ts). */
  readonly statements: Readonly<Record<'purgeEvents', Statement>>;

  constructor(schema: string) {
    const s = schema;
    this.#s = s;
    // $1 the horizon. Reads the old events through events_fanned_created, which holds only those fanned out.
    const purgeEvents = `WITH doomed AS (
        SELECT ev.id FROM ${s}.events ev
        WHERE ev.created_at < $1 AND ev.fanned_out_at IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM ${s}.deliveries d WHERE d.event_id = ev.id
            AND (d.status NOT IN ${TERMINAL_STATUSES_SQL} OR d.updated_at >= $1))
          AND NOT EXISTS (SELECT 1 FROM ${s}.dead_letters dl WHERE dl.event_id = ev.id AND dl.replayed_at IS NULL)
        LIMIT ${PURGE_CHUNK}
        FOR UPDATE SKIP LOCKED
      ),
      -- By key lookups (= ANY of an array): joined to the chunk, the deletes were planned as scans of both tables.
      deliveries_gone AS (DELETE FROM ${s}.deliveries WHERE event_id = ANY(ARRAY(SELECT id FROM doomed))
        RETURNING first_started_at IS NOT NULL AS inline),
      gone AS (DELETE FROM ${s}.events WHERE id = ANY(ARRAY(SELECT id FROM doomed)) RETURNING 1)
      SELECT (SELECT count(*) FROM gone) AS n, (SELECT count(*) FROM deliveries_gone WHERE inline) AS inline`;
    this.statements = { purgeEvents: { text: purgeEvents } };
  }

  async purgeAttempts(sql: Sql, before: number): Promise<number> {
    return this.#count(sql, `WITH gone AS (DELETE FROM ${this.#s}.attempts WHERE id IN
      (SELECT id FROM ${this.#s}.attempts WHERE started_at < $1 LIMIT ${PURGE_CHUNK}) RETURNING 1)
      SELECT count(*) AS n FROM gone`, before);
  }

  async purgeDeadLetters(sql: Sql, before: number): Promise<number> {
    return this.#count(sql, `WITH gone AS (DELETE FROM ${this.#s}.dead_letters WHERE id IN
      (SELECT id FROM ${this.#s}.dead_letters WHERE created_at < $1 LIMIT ${PURGE_CHUNK}) RETURNING 1)
      SELECT count(*) AS n FROM gone`, before);
  }

  /**
   * An event goes once it is fanned out, every delivery of it finished before the horizon, and no
   * dead letter of it still waits for a replay (a replay needs the event to send); its deliveries
   * go with it.
   */
  async purgeEvents(sql: Sql, before: number): Promise<{ readonly events: number; readonly inlineAttempts: number }> {
    const [row] = await sql.query<{ n: number; inline: number }>(this.statements.purgeEvents.text, [before]);
    return { events: Number(row?.n ?? 0), inlineAttempts: Number(row?.inline ?? 0) };
  }

  /**
   * First-attempt successes kept on their deliveries' rows (settle.ts) that are older than the
   * horizon, on deliveries that outlive it (their event is kept for another delivery or a dead
   * letter): their columns cleared, as an attempt's row would be deleted. Found through
   * deliveries_created (a delivery is created before its attempt starts).
   */
  async purgeInlineAttempts(sql: Sql, before: number): Promise<number> {
    const s = this.#s;
    return this.#count(sql, `WITH gone AS (
        UPDATE ${s}.deliveries SET first_started_at = NULL, first_duration_ms = NULL, first_outcome = NULL, first_error = NULL
        WHERE id = ANY(ARRAY(SELECT id FROM ${s}.deliveries WHERE created_at < $1 AND first_started_at < $1 LIMIT ${PURGE_CHUNK}))
        RETURNING 1)
      SELECT count(*) AS n FROM gone`, before);
  }

  /** Replay jobs that ended before the horizon (a running one has no `finished_at`). */
  async purgeReplayJobs(sql: Sql, before: number): Promise<number> {
    return this.#count(sql, `WITH gone AS (DELETE FROM ${this.#s}.replay_jobs WHERE id IN
      (SELECT id FROM ${this.#s}.replay_jobs WHERE state <> 'running' AND finished_at < $1 LIMIT ${PURGE_CHUNK}) RETURNING 1)
      SELECT count(*) AS n FROM gone`, before);
  }

  async purgeDeliveryMinutes(sql: Sql, before: number): Promise<number> {
    return this.#count(sql, `WITH gone AS (DELETE FROM ${this.#s}.delivery_minutes WHERE (endpoint_id, minute) IN
      (SELECT endpoint_id, minute FROM ${this.#s}.delivery_minutes WHERE minute < $1 LIMIT ${PURGE_CHUNK}) RETURNING 1)
      SELECT count(*) AS n FROM gone`, before);
  }

  async #count(sql: Sql, text: string, before: number): Promise<number> {
    const [row] = await sql.query<{ n: number }>(text, [before]);
    return row?.n ?? 0;
  }
}
