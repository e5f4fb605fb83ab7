/**
 * Replay jobs in SQLite (lib/dead-letters/replay-jobs.ts): created by the node
 * a job is started on, leased by the node that runs it, read by any node.
 * Every write to a running job is conditional on its state (and its owner), so
 * a cancel from another node and a takeover are seen by the runner's next write.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { ConflictError } from '../../errors.ts';
import type { ReplayJobRecord } from '../../model.ts';
import type { ReplayJobEnd, ReplayJobProgress } from '../port.ts';
import { REPLAY_JOB_COLUMNS, replayJobFromRow, replayJobValues, type ReplayJobRow } from '../sql-rows.ts';
import { sqliteCode, type Statement } from './sql.ts';

export class ReplayJobStatements {
  readonly #insert: Statement;
  readonly #get: Statement<ReplayJobRow>;
  readonly #list: Statement<ReplayJobRow>;
  readonly #lease: Statement<ReplayJobRow>;
  readonly #progress: Statement;
  readonly #end: Statement<ReplayJobRow>;
  readonly #release: Statement;
  readonly #liveReplays: Statement<{ endpoint_id: string; live: number }>;

  constructor(db: BetterSqlite3.Database) {
    this.#insert = db.prepare(`INSERT INTO replay_jobs (${REPLAY_JOB_COLUMNS.join(', ')}) VALUES (${REPLAY_JOB_COLUMNS.map(() => '?').join(', ')})`);
    this.#get = db.prepare<unknown[], ReplayJobRow>(`SELECT * FROM replay_jobs WHERE id = ?`);
    this.#list = db.prepare<unknown[], ReplayJobRow>(`SELECT * FROM replay_jobs ORDER BY created_at DESC, id DESC LIMIT ?`);
    // One statement: SQLite writes one at a time, so two nodes cannot both take a lapsed job.
    this.#lease = db.prepare<unknown[], ReplayJobRow>(`UPDATE replay_jobs SET owner = @owner, lease_until = @leaseUntil
      WHERE state = 'running' AND (owner = @owner OR owner IS NULL OR lease_until <= @now) RETURNING *`);
    this.#progress = db.prepare(`UPDATE replay_jobs SET cursor = @cursor, replayed = @replayed, waiting = @waiting
      WHERE id = @id AND owner = @owner AND state = 'running'`);
    this.#end = db.prepare<unknown[], ReplayJobRow>(`UPDATE replay_jobs SET state = @state, finished_at = @finishedAt, error = @error,
        owner = NULL, lease_until = 0
      WHERE id = @id AND state = 'running' AND (@owner IS NULL OR owner = @owner) RETURNING *`);
    this.#release = db.prepare(`UPDATE replay_jobs SET owner = NULL, lease_until = 0 WHERE owner = ? AND state = 'running'`);
    // The conditions of the partial index deliveries_live_replays written out, so SQLite uses it.
    this.#liveReplays = db.prepare<unknown[], { endpoint_id: string; live: number }>(`SELECT endpoint_id, count(*) AS live FROM deliveries
      WHERE endpoint_id IN (SELECT value FROM json_each(?)) AND round > 0 AND status IN ('pending', 'in_flight')
      GROUP BY endpoint_id`);
  }

  create(job: ReplayJobRecord): void {
    try {
      this.#insert.run(...replayJobValues(job));
    } catch (error) {
      if (sqliteCode(error) === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new ConflictError(`replay job '${job.id}' already exists`);
      throw error;
    }
  }

  get(id: string): ReplayJobRecord | undefined {
    const row = this.#get.get(id);
    return row === undefined ? undefined : replayJobFromRow(row);
  }

  list(limit: number): ReplayJobRecord[] {
    return this.#list.all(Math.max(0, Math.floor(limit))).map(replayJobFromRow);
  }

  lease(owner: string, now: number, leaseUntil: number): ReplayJobRecord[] {
    return this.#lease.all({ owner, now, leaseUntil }).map(replayJobFromRow).sort((a, b) => a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  }

  saveProgress(id: string, owner: string, progress: ReplayJobProgress): boolean {
    return this.#progress.run({ id, owner, cursor: progress.cursor, replayed: progress.replayed, waiting: progress.waiting }).changes > 0;
  }

  end(id: string, owner: string | null, end: ReplayJobEnd): ReplayJobRecord | undefined {
    const row = this.#end.get({ id, owner, state: end.state, finishedAt: end.finishedAt, error: end.error });
    return row === undefined ? undefined : replayJobFromRow(row);
  }

  release(owner: string): void {
    this.#release.run(owner);
  }

  liveReplays(endpointIds: readonly string[]): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const row of this.#liveReplays.all(JSON.stringify(endpointIds))) counts[row.endpoint_id] = row.live;
    return counts;
  }
}
