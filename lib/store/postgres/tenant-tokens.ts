/**
 * Tenant tokens in PostgreSQL (lib/tenants/tenant-tokens.ts): looked up by id
 * on every request a tenant makes, listed per tenant for the admin.
 */
import { ConflictError } from '../../errors.ts';
import type { TenantToken } from '../../model.ts';
import { tenantTokenFromRow, type TenantTokenRow } from '../sql-rows.ts';
import { named, sqlState, SqlState, type Sql, type Statement } from './sql.ts';

export class TenantTokenQueries {
  readonly #s: string;
  readonly #get: Statement;

  constructor(schema: string) {
    this.#s = schema;
    // Every request with a tenant token runs it.
    this.#get = named(schema, 'tenant_token_get', `SELECT * FROM ${schema}.tenant_tokens WHERE id = $1`);
  }

  async create(sql: Sql, token: TenantToken): Promise<void> {
    try {
      await sql.query(
        `INSERT INTO ${this.#s}.tenant_tokens (id, tenant_id, name, secret_hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6)`,
        [token.id, token.tenantId, token.name, token.secretHash, token.createdAt, token.expiresAt],
      );
    } catch (error) {
      if (sqlState(error) === SqlState.UNIQUE_VIOLATION) throw new ConflictError(`tenant token '${token.id}' already exists`);
      throw error;
    }
  }

  async get(sql: Sql, id: string): Promise<TenantToken | undefined> {
    const [row] = await sql.query<TenantTokenRow>(this.#get, [id]);
    return row === undefined ? undefined : tenantTokenFromRow(row);
  }

  async list(sql: Sql, tenantId: string): Promise<TenantToken[]> {
    const rows = await sql.query<TenantTokenRow>(
      `SELECT * FROM ${this.#s}.tenant_tokens WHERE tenant_id = $1 ORDER BY created_at, id`,
      [tenantId],
    );
    return rows.map(tenantTokenFromRow);
  }

  async delete(sql: Sql, tenantId: string, id: string): Promise<boolean> {
    const rows = await sql.query(`DELETE FROM ${this.#s}.tenant_tokens WHERE tenant_id = $1 AND id = $2 RETURNING id`, [tenantId, id]);
    return rows.length > 0;
  }
}
