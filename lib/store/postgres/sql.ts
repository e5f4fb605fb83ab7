/**
 * How the PostgreSQL store's query modules reach the server: one `query`
 * that answers the rows, on the pool (each statement its own transaction) or
 * on one connection inside a transaction. Hot statements are named, so each
 * connection parses and plans them once (node-postgres prepares a named
 * statement on a connection the first time it runs there).
 */
import type { Pool, PoolClient, QueryConfig } from 'pg';

/** A statement's text, with the name it is prepared under when it runs often. */
export interface Statement {
  readonly name?: string;
  readonly text: string;
}

export interface Sql {
  query<Row>(statement: Statement | string, values?: readonly unknown[]): Promise<Row[]>;
}

/** Runs on whatever `target` is: the pool, or a client holding a transaction. */
export function sqlOn(target: Pool | PoolClient): Sql {
  return {
    async query<Row>(statement: Statement | string, values: readonly unknown[] = []): Promise<Row[]> {
      const config: QueryConfig = typeof statement === 'string'
        ? { text: statement, values: values as unknown[] }
        : { ...statement, values: values as unknown[] };
      const result = await target.query(config);
      return result.rows as Row[];
    },
  };
}

/** Names a statement for preparing: `herald_<schema>_<what>` (schemas differ by pool, names stay distinct anyway). */
export function named(schema: string, what: string, text: string): Statement {
  return { name: `herald_${schema}_${what}`, text };
}

/** The server's SQLSTATE of a driver error, if it has one. */
export function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

export const SqlState = {
  UNIQUE_VIOLATION: '23505',
} as const;
