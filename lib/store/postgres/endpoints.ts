/**
 * Endpoints in PostgreSQL: the rows the admin API edits and the engine
 * reads to fan out and to build an endpoint's actor.
 */
import { ConflictError } from '../../errors.ts';
import type { Endpoint } from '../../model.ts';
import { patchedEndpoint } from '../endpoint-patch.ts';
import type { EndpointPatch } from '../port.ts';
import { endpointFromRow, type EndpointRow } from '../sql-rows.ts';
import type { EndpointChangeQueries } from './endpoint-changes.ts';
import { endpointValues } from './rows.ts';
import { named, sqlState, SqlState, type Sql, type Statement } from './sql.ts';
import { workNotice } from './work-notice.ts';

const COLUMNS = `id, tenant_id, url, description, event_types, retry, timeout_ms, mode, concurrency, status,
  disabled_reason, failing_since, secrets, created_at, updated_at, rate_limit, adaptive_concurrency, ordering, headers, auth, payload_filter, client_tls`;
const VALUES = `$1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9, $10, $11, $12, $13::jsonb, $14, $15, $16::jsonb, $17::jsonb, $18,
  $19::jsonb, $20::jsonb, $21::json, $22::jsonb`;

export class EndpointQueries {
  readonly #s: string;
  readonly #get: Statement;
  readonly #listByTenant: Statement;
  readonly #changes: EndpointChangeQueries;

  /** Every write here numbers its change in `changes`, in the same statement or transaction. */
  constructor(schema: string, changes: EndpointChangeQueries) {
    this.#s = schema;
    this.#changes = changes;
    this.#get = named(schema, 'endpoint_get', `SELECT * FROM ${schema}.endpoints WHERE id = $1`);
    this.#listByTenant = named(schema, 'endpoint_list_tenant',
      `SELECT * FROM ${schema}.endpoints WHERE tenant_id = $1 ORDER BY created_at, id`);
  }

  async create(sql: Sql, endpoint: Endpoint): Promise<void> {
    try {
      // $14 is created_at: the change is numbered at the endpoint's creation.
      await sql.query(
        `WITH created AS (INSERT INTO ${this.#s}.endpoints (${COLUMNS}) VALUES (${VALUES}) RETURNING id),
         ${this.#changes.recordCtes('$1', '$14')}
         SELECT 1`,
        endpointValues(endpoint),
      );
    } catch (error) {
      if (sqlState(error) === SqlState.UNIQUE_VIOLATION) throw new ConflictError(`endpoint '${endpoint.id}' already exists`);
      throw error;
    }
  }

  async get(sql: Sql, id: string): Promise<Endpoint | undefined> {
    const [row] = await sql.query<EndpointRow>(this.#get, [id]);
    return row === undefined ? undefined : endpointFromRow(row);
  }

  async list(sql: Sql, tenantId?: string): Promise<Endpoint[]> {
    const rows = tenantId === undefined
      ? await sql.query<EndpointRow>(`SELECT * FROM ${this.#s}.endpoints ORDER BY created_at, id`)
      : await sql.query<EndpointRow>(this.#listByTenant, [tenantId]);
    return rows.map(endpointFromRow);
  }

  /**
   * Read, merged and written in the caller's transaction, the row locked meanwhile. Enabling an
   * endpoint tells the other processes: its deliveries are claimable again.
   */
  async update(tx: Sql, id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
    const [row] = await tx.query<EndpointRow>(`SELECT * FROM ${this.#s}.endpoints WHERE id = $1 FOR UPDATE`, [id]);
    if (row === undefined) return undefined;
    const current = endpointFromRow(row);
    const next = patchedEndpoint(current, patch, now);
    await tx.query(
      `UPDATE ${this.#s}.endpoints SET (${COLUMNS}) = (${VALUES}) WHERE id = $1`,
      endpointValues(next),
    );
    await this.#changes.record(tx, id, now);
    if (current.status !== 'enabled' && next.status === 'enabled') await tx.query(`SELECT ${workNotice(this.#s)}`);
    return next;
  }

  /** Deletes the endpoint, cancels its undelivered deliveries and numbers the change, in one statement. */
  async delete(sql: Sql, id: string, now: number): Promise<boolean> {
    const [row] = await sql.query<{ deleted: number }>(
      `WITH gone AS (DELETE FROM ${this.#s}.endpoints WHERE id = $1 RETURNING id),
       cancelled AS (
         UPDATE ${this.#s}.deliveries SET status = 'cancelled', updated_at = $2
         WHERE endpoint_id = $1 AND status IN ('pending', 'in_flight') AND EXISTS (SELECT 1 FROM gone)
       ),
       ${this.#changes.recordCtes('$1', '$2', 'EXISTS (SELECT 1 FROM gone)')}
       SELECT count(*) AS deleted FROM gone`,
      [id, now],
    );
    return (row?.deleted ?? 0) > 0;
  }

  /** Makes the endpoint's pending deliveries due now, and tells the other processes. */
  async resumeDeliveries(sql: Sql, endpointId: string, now: number): Promise<number> {
    const [row] = await sql.query<{ moved: number }>(
      `WITH moved AS (
         UPDATE ${this.#s}.deliveries SET next_attempt_at = $2, updated_at = $2
         WHERE endpoint_id = $1 AND status = 'pending' AND next_attempt_at > $2
         RETURNING 1
       )
       SELECT count(*) AS moved, CASE WHEN count(*) > 0 THEN ${workNotice(this.#s)} END AS notice FROM moved`,
      [endpointId, now],
    );
    return row?.moved ?? 0;
  }

  async tenantExists(sql: Sql, tenantId: string): Promise<boolean> {
    const rows = await sql.query(`SELECT 1 FROM ${this.#s}.endpoints WHERE tenant_id = $1 LIMIT 1`, [tenantId]);
    return rows.length > 0;
  }
}
