/**
 * Retention in SQLite: attempts and dead letters older than the horizon go,
 * fanned-out events with nothing left to deliver and replay jobs ended before it, `PURGE_CHUNK` rows per
 * call, so a large purge never holds the write lock for long; delivery
 * minutes older than theirs likewise.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { TERMINAL_STATUSES_SQL } from './schema.ts';
import type { Statement } from './sql.ts';

/** Rows per statement or transaction, so other processes get the write lock in between. */
export const PURGE_CHUNK = 500;

export class RetentionStatements {
  readonly #attempts: Statement;
  readonly #deadLetters: Statement;
  readonly #purgeableEvents: Statement<string>;
  readonly #eventDeliveries: Statement;
  readonly #eventInlineAttempts: Statement<number>;
  readonly #inlineAttempts: Statement;
  readonly #events: Statement;
  readonly #deliveryMinutes: Statement;
  readonly #replayJobs: Statement;

  constructor(db: BetterSqlite3.Database) {
    this.#attempts = db.prepare(`DELETE FROM attempts WHERE id IN
      (SELECT id FROM attempts WHERE started_at < @before LIMIT @limit)`);
    this.#deadLetters = db.prepare(`DELETE FROM dead_letters WHERE id IN
      (SELECT id FROM dead_letters WHERE created_at < @before LIMIT @limit)`);
    // An event goes once it is fanned out, every delivery of it finished before the horizon,
    // and no dead letter of it still waits for a replay (a replay needs the event to send).
    this.#purgeableEvents = db.prepare<unknown[], string>(`SELECT ev.id FROM events ev
      WHERE ev.created_at < @before AND ev.fanned_out_at IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = ev.id
          AND (d.status NOT IN ${TERMINAL_STATUSES_SQL} OR d.updated_at >= @before))
        AND NOT EXISTS (SELECT 1 FROM dead_letters dl WHERE dl.event_id = ev.id AND dl.replayed_at IS NULL)
      LIMIT @limit`).pluck();
    this.#eventDeliveries = db.prepare(`DELETE FROM deliveries WHERE event_id IN (SELECT value FROM json_each(?))`);
    this.#eventInlineAttempts = db.prepare<unknown[], number>(`SELECT count(*) FROM deliveries
      WHERE event_id IN (SELECT value FROM json_each(?)) AND first_started_at IS NOT NULL`).pluck();
    // Through deliveries_created: a delivery is created before its first attempt starts.
    this.#inlineAttempts = db.prepare(`UPDATE deliveries SET first_started_at = NULL, first_duration_ms = NULL, first_outcome = NULL,
        first_error = NULL
      WHERE rowid IN (SELECT rowid FROM deliveries WHERE created_at < @before AND first_started_at < @before LIMIT @limit)`);
    this.#events = db.prepare(`DELETE FROM events WHERE id IN (SELECT value FROM json_each(?))`);
    // A job's row is its record (progress, error) once it has ended: kept as long as the dead letters.
    this.#replayJobs = db.prepare(`DELETE FROM replay_jobs WHERE id IN
      (SELECT id FROM replay_jobs WHERE state <> 'running' AND finished_at < @before LIMIT @limit)`);
    this.#deliveryMinutes = db.prepare(`DELETE FROM delivery_minutes WHERE rowid IN
      (SELECT rowid FROM delivery_minutes WHERE minute < @before LIMIT @limit)`);
  }

  /** Deletes up to `PURGE_CHUNK` attempts started before `before`; answers how many. */
  purgeAttempts(before: number): number {
    return this.#attempts.run({ before, limit: PURGE_CHUNK }).changes;
  }

  /** Deletes up to `PURGE_CHUNK` dead letters created before `before`; answers how many. */
  purgeDeadLetters(before: number): number {
    return this.#deadLetters.run({ before, limit: PURGE_CHUNK }).changes;
  }

  /**
   * Deletes up to `PURGE_CHUNK` purgeable events with their deliveries; answers how many events.
   * Reads, then deletes from two tables: run it in a transaction.
   */
  purgeEvents(before: number): { readonly events: number; readonly inlineAttempts: number } {
    const ids = JSON.stringify(this.#purgeableEvents.all({ before, limit: PURGE_CHUNK }));
    // First-attempt successes kept on these deliveries' rows (settle.ts) go with them: counted as attempts.
    const inlineAttempts = this.#eventInlineAttempts.get(ids) ?? 0;
    this.#eventDeliveries.run(ids);
    return { events: this.#events.run(ids).changes, inlineAttempts };
  }

  /**
   * Clears up to `PURGE_CHUNK` first-attempt successes kept on deliveries' rows (settle.ts) that
   * started before `before`, on deliveries that outlive the horizon (their event is kept for
   * another delivery or a dead letter); answers how many.
   */
  purgeInlineAttempts(before: number): number {
    return this.#inlineAttempts.run({ before, limit: PURGE_CHUNK }).changes;
  }

  /** Deletes up to `PURGE_CHUNK` replay jobs that ended before `before`; answers how many. */
  purgeReplayJobs(before: number): number {
    return this.#replayJobs.run({ before, limit: PURGE_CHUNK }).changes;
  }

  /** Deletes up to `PURGE_CHUNK` delivery minutes that start before `before`; answers how many. */
  purgeDeliveryMinutes(before: number): number {
    return this.#deliveryMinutes.run({ before, limit: PURGE_CHUNK }).changes;
  }
}
