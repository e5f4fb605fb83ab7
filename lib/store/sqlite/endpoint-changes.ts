/**
 * The endpoint change log in SQLite (`endpoint_changes`): one row per change of an endpoint,
 * written in the transaction of the change. `AUTOINCREMENT` numbers them: never reused, even after
 * a purge, and gap-free, since SQLite has one writer and `sqlite_sequence` rolls back with the
 * transaction that would have taken a number.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type { EndpointChange } from '../port.ts';
import type { Statement } from './sql.ts';
import { PURGE_CHUNK } from './retention.ts';

export class EndpointChangeStatements {
  readonly #record: Statement;
  readonly #after: Statement<{ version: number; endpoint_id: string }>;
  readonly #last: Statement<number>;
  readonly #purge: Statement;

  constructor(db: BetterSqlite3.Database) {
    this.#record = db.prepare(`INSERT INTO endpoint_changes (endpoint_id, changed_at) VALUES (?, ?)`);
    this.#after = db.prepare<unknown[], { version: number; endpoint_id: string }>(
      `SELECT version, endpoint_id FROM endpoint_changes WHERE version > ? ORDER BY version LIMIT ?`);
    this.#last = db.prepare<unknown[], number>(`SELECT seq FROM sqlite_sequence WHERE name = 'endpoint_changes'`).pluck();
    this.#purge = db.prepare(`DELETE FROM endpoint_changes WHERE version IN
      (SELECT version FROM endpoint_changes WHERE changed_at < @before ORDER BY version LIMIT @limit)`);
  }

  /** Numbers a change of the endpoint: run it in the change's transaction. */
  record(endpointId: string, now: number): void {
    this.#record.run(endpointId, now);
  }

  after(after: number, limit: number): EndpointChange[] {
    return this.#after.all(after, limit).map((row) => ({ version: row.version, endpointId: row.endpoint_id }));
  }

  last(): number {
    return this.#last.get() ?? 0;
  }

  /** Deletes up to `PURGE_CHUNK` changes recorded before `before`; answers how many. */
  purge(before: number): number {
    return this.#purge.run({ before, limit: PURGE_CHUNK }).changes;
  }
}
