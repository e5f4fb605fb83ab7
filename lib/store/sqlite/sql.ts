/**
 * How the SQLite store's statement modules reach the connection: statements
 * prepared once when it opens, the ones whose text depends on a listing's
 * filters prepared once per shape (`DynamicStatements`), and what a driver
 * error says.
 */
import Database from 'better-sqlite3';
import type BetterSqlite3 from 'better-sqlite3';

/** A prepared statement whose rows are `Row`s. */
export type Statement<Row = unknown> = BetterSqlite3.Statement<unknown[], Row>;

/** The named parameters of a statement built from a filter. */
export type Params = Record<string, string | number | null>;

/** Statements whose text depends on which filters are set, prepared once per shape on one connection. */
export class DynamicStatements {
  readonly #db: BetterSqlite3.Database;
  readonly #prepared = new Map<string, Statement>();

  constructor(db: BetterSqlite3.Database) {
    this.#db = db;
  }

  get<Row>(sql: string): Statement<Row> {
    let statement = this.#prepared.get(sql);
    if (statement === undefined) {
      statement = this.#db.prepare<unknown[], unknown>(sql);
      this.#prepared.set(sql, statement);
    }
    return statement as Statement<Row>;
  }

  clear(): void {
    this.#prepared.clear();
  }
}

export function whereClause(conditions: readonly string[]): string {
  return conditions.length === 0 ? '' : `WHERE ${conditions.join(' AND ')}`;
}

export function sqliteCode(error: unknown): string | undefined {
  return error instanceof Database.SqliteError ? error.code : undefined;
}

/** Locked by another connection, nothing done: safe to try again. */
export function isBusy(error: unknown): boolean {
  return sqliteCode(error)?.startsWith('SQLITE_BUSY') === true;
}
