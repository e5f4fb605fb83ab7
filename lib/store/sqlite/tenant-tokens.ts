/**
 * Tenant tokens in SQLite (lib/tenants/tenant-tokens.ts): looked up by id on
 * every request a tenant makes, listed per tenant for the admin.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { ConflictError } from '../../errors.ts';
import type { TenantToken } from '../../model.ts';
import { tenantTokenFromRow, tenantTokenToRow, type TenantTokenRow } from '../sql-rows.ts';
import { sqliteCode, type Statement } from './sql.ts';

export class TenantTokenStatements {
  readonly #insert: Statement;
  readonly #get: Statement<TenantTokenRow>;
  readonly #list: Statement<TenantTokenRow>;
  readonly #delete: Statement;

  constructor(db: BetterSqlite3.Database) {
    this.#insert = db.prepare(`INSERT INTO tenant_tokens (id, tenant_id, name, secret_hash, created_at, expires_at)
      VALUES (@id, @tenant_id, @name, @secret_hash, @created_at, @expires_at)`);
    this.#get = db.prepare<unknown[], TenantTokenRow>(`SELECT * FROM tenant_tokens WHERE id = ?`);
    this.#list = db.prepare<unknown[], TenantTokenRow>(`SELECT * FROM tenant_tokens WHERE tenant_id = ? ORDER BY created_at, id`);
    this.#delete = db.prepare(`DELETE FROM tenant_tokens WHERE tenant_id = ? AND id = ?`);
  }

  create(token: TenantToken): void {
    try {
      this.#insert.run(tenantTokenToRow(token));
    } catch (error) {
      if (sqliteCode(error) === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new ConflictError(`tenant token '${token.id}' already exists`);
      throw error;
    }
  }

  get(id: string): TenantToken | undefined {
    const row = this.#get.get(id);
    return row === undefined ? undefined : tenantTokenFromRow(row);
  }

  list(tenantId: string): TenantToken[] {
    return this.#list.all(tenantId).map(tenantTokenFromRow);
  }

  delete(tenantId: string, id: string): boolean {
    return this.#delete.run(tenantId, id).changes > 0;
  }
}
