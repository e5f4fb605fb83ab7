/**
 * Endpoints in SQLite: the rows the admin API edits and the engine reads to
 * fan out and to build an endpoint's actor.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { ConflictError } from '../../errors.ts';
import type { Endpoint } from '../../model.ts';
import { patchedEndpoint } from '../endpoint-patch.ts';
import type { EndpointPatch } from '../port.ts';
import { endpointFromRow, type EndpointRow } from '../sql-rows.ts';
import { endpointToRow } from './rows.ts';
import { sqliteCode, type Statement } from './sql.ts';

export class EndpointStatements {
  readonly #insert: Statement;
  readonly #replace: Statement;
  readonly #get: Statement<EndpointRow>;
  readonly #list: Statement<EndpointRow>;
  readonly #listByTenant: Statement<EndpointRow>;
  readonly #delete: Statement;
  readonly #resumeDeliveries: Statement;
  readonly #cancelDeliveries: Statement;
  readonly #tenantExists: Statement<number>;

  constructor(db: BetterSqlite3.Database) {
    this.#insert = db.prepare(`INSERT INTO endpoints (id, tenant_id, url, description, event_types, retry, timeout_ms, mode, ordering,
        concurrency, rate_limit, adaptive_concurrency, payload_filter, headers, auth, client_tls, status, disabled_reason, failing_since, secrets, created_at, updated_at)
      VALUES (@id, @tenant_id, @url, @description, @event_types, @retry, @timeout_ms, @mode, @ordering,
        @concurrency, @rate_limit, @adaptive_concurrency, @payload_filter, @headers, @auth, @client_tls, @status, @disabled_reason, @failing_since, @secrets, @created_at, @updated_at)`);
    this.#replace = db.prepare(`UPDATE endpoints SET url = @url, description = @description, event_types = @event_types,
        retry = @retry, timeout_ms = @timeout_ms, mode = @mode, ordering = @ordering, concurrency = @concurrency, rate_limit = @rate_limit,
        adaptive_concurrency = @adaptive_concurrency, payload_filter = @payload_filter, headers = @headers, auth = @auth, client_tls = @client_tls, status = @status,
        disabled_reason = @disabled_reason, failing_since = @failing_since, secrets = @secrets, updated_at = @updated_at
      WHERE id = @id`);
    this.#get = db.prepare<unknown[], EndpointRow>(`SELECT * FROM endpoints WHERE id = ?`);
    this.#list = db.prepare<unknown[], EndpointRow>(`SELECT * FROM endpoints ORDER BY created_at, id`);
    this.#listByTenant = db.prepare<unknown[], EndpointRow>(`SELECT * FROM endpoints WHERE tenant_id = ? ORDER BY created_at, id`);
    this.#delete = db.prepare(`DELETE FROM endpoints WHERE id = ?`);
    this.#resumeDeliveries = db.prepare(`UPDATE deliveries SET next_attempt_at = @now, updated_at = @now
      WHERE endpoint_id = @endpointId AND status = 'pending' AND next_attempt_at > @now`);
    this.#cancelDeliveries = db.prepare(`UPDATE deliveries SET status = 'cancelled', updated_at = @now
      WHERE endpoint_id = @endpointId AND status IN ('pending', 'in_flight')`);
    this.#tenantExists = db.prepare<unknown[], number>(`SELECT 1 FROM endpoints WHERE tenant_id = ? LIMIT 1`).pluck();
  }

  create(endpoint: Endpoint): void {
    try {
      this.#insert.run(endpointToRow(endpoint));
    } catch (error) {
      if (sqliteCode(error) === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
        throw new ConflictError(`endpoint '${endpoint.id}' already exists`);
      }
      throw error;
    }
  }

  get(id: string): Endpoint | undefined {
    const row = this.#get.get(id);
    return row === undefined ? undefined : endpointFromRow(row);
  }

  list(tenantId: string | undefined): Endpoint[] {
    const rows = tenantId === undefined ? this.#list.all() : this.#listByTenant.all(tenantId);
    return rows.map(endpointFromRow);
  }

  /** Reads and writes: run it in a transaction. */
  update(id: string, patch: EndpointPatch, now: number): Endpoint | undefined {
    const current = this.get(id);
    if (current === undefined) return undefined;
    const next = patchedEndpoint(current, patch, now);
    this.#replace.run(endpointToRow(next));
    return next;
  }

  /** Its unfinished deliveries are cancelled with it: run it in a transaction. */
  delete(id: string, now: number): boolean {
    const deleted = this.#delete.run(id).changes > 0;
    if (deleted) this.#cancelDeliveries.run({ endpointId: id, now });
    return deleted;
  }

  resumeDeliveries(endpointId: string, now: number): number {
    return this.#resumeDeliveries.run({ endpointId, now }).changes;
  }

  tenantExists(tenantId: string): boolean {
    return this.#tenantExists.get(tenantId) !== undefined;
  }
}
