/**
 * Replay jobs in PostgreSQL (lib/dead-letters/replay-jobs.ts): created by the
 * node a job is started on, leased by the node that runs it, read by any node.
 * Every write to a running job is one conditional statement: two nodes taking
 * a lapsed job at once both update the row, the second re-reads it after the
 * first commits (READ COMMITTED) and no longer matches, so one of them gets it.
 */
import { ConflictError } from '../../errors.ts';
import type { ReplayJobRecord } from '../../model.ts';
import type { ReplayJobEnd, ReplayJobProgress } from '../port.ts';
import { REPLAY_JOB_COLUMNS, replayJobFromRow, replayJobValues, type ReplayJobRow } from '../sql-rows.ts';
import { sqlState, SqlState, type Sql } from './sql.ts';

export class ReplayJobQueries {
  readonly #s: string;

  constructor(schema: string) {
    this.#s = schema;
  }

  async create(sql: Sql, job: ReplayJobRecord): Promise<void> {
    const placeholders = REPLAY_JOB_COLUMNS.map((column, i) => (column === 'filter' ? `$${i + 1}::jsonb` : `$${i + 1}`)).join(', ');
    try {
      await sql.query(`INSERT INTO ${this.#s}.replay_jobs (${REPLAY_JOB_COLUMNS.join(', ')}) VALUES (${placeholders})`, replayJobValues(job));
    } catch (error) {
      if (sqlState(error) === SqlState.UNIQUE_VIOLATION) throw new ConflictError(`replay job '${job.id}' already exists`);
      throw error;
    }
  }

  async get(sql: Sql, id: string): Promise<ReplayJobRecord | undefined> {
    const [row] = await sql.query<ReplayJobRow>(`SELECT * FROM ${this.#s}.replay_jobs WHERE id = $1`, [id]);
    return row === undefined ? undefined : replayJobFromRow(row);
  }

  async list(sql: Sql, limit: number): Promise<ReplayJobRecord[]> {
    const rows = await sql.query<ReplayJobRow>(`SELECT * FROM ${this.#s}.replay_jobs ORDER BY created_at DESC, id DESC LIMIT $1`, [
      Math.max(0, Math.floor(limit)),
    ]);
    return rows.map(replayJobFromRow);
  }

  async lease(sql: Sql, owner: string, now: number, leaseUntil: number): Promise<ReplayJobRecord[]> {
    const rows = await sql.query<ReplayJobRow>(
      `UPDATE ${this.#s}.replay_jobs SET owner = $1, lease_until = $3
       WHERE state = 'running' AND (owner = $1 OR owner IS NULL OR lease_until <= $2) RETURNING *`,
      [owner, now, leaseUntil],
    );
    return rows.map(replayJobFromRow).sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  }

  async saveProgress(sql: Sql, id: string, owner: string, progress: ReplayJobProgress): Promise<boolean> {
    const rows = await sql.query(
      `UPDATE ${this.#s}.replay_jobs SET cursor = $3, replayed = $4, waiting = $5 WHERE id = $1 AND owner = $2 AND state = 'running' RETURNING id`,
      [id, owner, progress.cursor, progress.replayed, progress.waiting],
    );
    return rows.length > 0;
  }

  async end(sql: Sql, id: string, owner: string | null, end: ReplayJobEnd): Promise<ReplayJobRecord | undefined> {
    const [row] = await sql.query<ReplayJobRow>(
      `UPDATE ${this.#s}.replay_jobs SET state = $3, finished_at = $4, error = $5, owner = NULL, lease_until = 0
       WHERE id = $1 AND state = 'running' AND ($2::text IS NULL OR owner = $2) RETURNING *`,
      [id, owner, end.state, end.finishedAt, end.error],
    );
    return row === undefined ? undefined : replayJobFromRow(row);
  }

  async release(sql: Sql, owner: string): Promise<void> {
    await sql.query(`UPDATE ${this.#s}.replay_jobs SET owner = NULL, lease_until = 0 WHERE owner = $1 AND state = 'running'`, [owner]);
  }

  async liveReplays(sql: Sql, endpointIds: readonly string[]): Promise<Record<string, number>> {
    // The conditions of the partial index deliveries_live_replays written out, so the planner uses it.
    const rows = await sql.query<{ endpoint_id: string; live: number | string }>(
      `SELECT endpoint_id, count(*)::int AS live FROM ${this.#s}.deliveries
       WHERE endpoint_id = ANY($1::text[]) AND round > 0 AND status IN ('pending', 'in_flight') GROUP BY endpoint_id`,
      [endpointIds],
    );
    const counts: Record<string, number> = {};
    for (const row of rows) counts[row.endpoint_id] = Number(row.live);
    return counts;
  }
}
