/**
 * The endpoint change log in PostgreSQL (`endpoint_changes`), numbered from the one-row counter
 * `endpoint_change_counter`. A change takes its number by updating the counter inside the
 * transaction of the write it numbers, and the counter's row lock is held until that commits: the
 * next change waits for it, so numbers become visible in order and none is skipped (a sequence
 * would hand out numbers that commit out of order, and leave gaps on rollback).
 */
import type { EndpointChange } from '../port.ts';
import { named, type Sql, type Statement } from './sql.ts';
import { PURGE_CHUNK } from './retention.ts';

export class EndpointChangeQueries {
  readonly #s: string;
  readonly #after: Statement;

  constructor(schema: string) {
    this.#s = schema;
    this.#after = named(schema, 'endpoint_changes_after',
      `SELECT version, endpoint_id FROM ${schema}.endpoint_changes WHERE version > $1 ORDER BY version LIMIT $2`);
  }

  /**
   * Two common table expressions that number a change of the endpoint `id` at `now` (SQL
   * expressions), only `when` that condition holds: for a statement of the change's own transaction,
   * after its `WITH` (data-modifying expressions must be at the statement's top level).
   */
  recordCtes(id: string, now: string, when = 'true'): string {
    const s = this.#s;
    return `change_number AS (UPDATE ${s}.endpoint_change_counter SET version = version + 1 WHERE ${when} RETURNING version),
      change_row AS (INSERT INTO ${s}.endpoint_changes (version, endpoint_id, changed_at) SELECT version, ${id}, ${now} FROM change_number)`;
  }

  /** Numbers a change of the endpoint: run it in the change's transaction. */
  async record(tx: Sql, endpointId: string, now: number): Promise<void> {
    await tx.query(`WITH ${this.recordCtes('$1::text', '$2::bigint')} SELECT 1`, [endpointId, now]);
  }

  async after(sql: Sql, after: number, limit: number): Promise<EndpointChange[]> {
    const rows = await sql.query<{ version: string | number; endpoint_id: string }>(this.#after, [after, limit]);
    return rows.map((row) => ({ version: Number(row.version), endpointId: row.endpoint_id }));
  }

  async last(sql: Sql): Promise<number> {
    const [row] = await sql.query<{ version: string | number }>(`SELECT version FROM ${this.#s}.endpoint_change_counter`);
    return Number(row?.version ?? 0);
  }

  /** Deletes up to `PURGE_CHUNK` changes recorded before `before`; answers how many. */
  async purge(sql: Sql, before: number): Promise<number> {
    const s = this.#s;
    const [row] = await sql.query<{ n: string | number }>(`WITH gone AS (DELETE FROM ${s}.endpoint_changes WHERE version IN
      (SELECT version FROM ${s}.endpoint_changes WHERE changed_at < $1 ORDER BY version LIMIT ${PURGE_CHUNK}) RETURNING 1)
      SELECT count(*) AS n FROM gone`, [before]);
    return Number(row?.n ?? 0);
  }
}
