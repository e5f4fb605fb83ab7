/**
 * The PostgreSQL store's connections: the pool, opened with Herald's schema created or migrated,
 * and how one port operation runs on it (each statement its own transaction, or one transaction
 * on one connection), driver errors turned into `StoreError`s naming the operation.
 *
 *   created ──open()──► open ──close()──► closed
 */
import type { Pool, PoolClient } from 'pg';
import { ClosedError, HeraldError, messageOf, StoreError } from '../../errors.ts';
import { redactUri } from '../store-setting.ts';
import { loadPgDriver, type PgDriver } from './driver.ts';
import { migratePostgresSchema } from './schema.ts';
import { sqlOn, type Sql } from './sql.ts';

export interface PostgresConnectionOptions {
  readonly connectionString: string;
  readonly schema: string;
  /** The pool's connections' `application_name`. */
  readonly applicationName: string;
  readonly poolSize: number;
  readonly statementTimeoutMs: number;
  readonly connectTimeoutMs: number;
}

/** PostgreSQL's int8: epoch milliseconds, epochs and counts, all far below 2^53. */
const INT8_OID = 20;

interface OpenState {
  /** node-postgres, loaded when the store opens (an optional peer dependency). */
  readonly pg: PgDriver;
  readonly pool: Pool;
  readonly sql: Sql;
}

export class PostgresConnection {
  readonly #options: PostgresConnectionOptions;
  #state: OpenState | undefined;
  #opening: Promise<OpenState> | undefined;
  #closed = false;

  constructor(options: PostgresConnectionOptions) {
    this.#options = options;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** Opens the pool and creates or migrates the schema, once. */
  async open(): Promise<void> {
    if (this.#closed) throw new ClosedError('PostgresStore');
    this.#opening ??= this.#open();
    this.#state ??= await this.#opening;
  }

  /**
   * Closes: operations reject with a `ClosedError` from now on. `beforeEnd` runs first (the work
   * signal's own connection stops), then the pool ends, once its opening is over.
   */
  async close(beforeEnd: () => Promise<void>): Promise<void> {
    this.#closed = true;
    await beforeEnd();
    const state = this.#state ?? (await this.#opening?.catch(() => undefined));
    this.#state = undefined;
    try {
      await state?.pool.end();
    } catch (error) {
      throw new StoreError(`postgres: close failed: ${messageOf(error)}`, { cause: error });
    }
  }

  ready(): OpenState {
    if (this.#closed) throw new ClosedError('PostgresStore');
    if (this.#state === undefined) throw new StoreError('PostgresStore: call init() before using the store');
    return this.#state;
  }

  /** Runs one port operation on the pool (each statement its own transaction), driver errors as `StoreError`s. */
  async run<T>(operation: string, fn: (sql: Sql) => Promise<T>): Promise<T> {
    const { sql } = this.ready();
    try {
      return await fn(sql);
    } catch (error) {
      throw this.#storeError(operation, error);
    }
  }

  /** Runs `fn` in one transaction on one connection, rolled back if it throws. */
  async transaction<T>(operation: string, fn: (tx: Sql) => Promise<T>): Promise<T> {
    const { pool } = this.ready();
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw this.#storeError(operation, error);
    }
    let broken: unknown;
    try {
      await client.query('BEGIN');
      const result = await fn(sqlOn(client));
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken = rollbackError;
      });
      throw this.#storeError(operation, error);
    } finally {
      // A connection that cannot even roll back is not given back to the pool.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  async #open(): Promise<OpenState> {
    const options = this.#options;
    const pg = await loadPgDriver({ key: 'store', value: redactUri(options.connectionString) });
    const pool = new pg.Pool({
      connectionString: options.connectionString,
      max: options.poolSize,
      application_name: options.applicationName,
      connectionTimeoutMillis: options.connectTimeoutMs,
      statement_timeout: options.statementTimeoutMs,
      types: {
        getTypeParser: ((oid: number, format?: string) =>
          oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
      },
    });
    // An idle connection the server drops (restart, admin kill) is reported here; the pool replaces
    // it. Without a listener the error would end the process.
    pool.on('error', () => {});
    try {
      await migratePostgresSchema(pool, options.schema);
    } catch (error) {
      await pool.end().catch(() => undefined);
      if (error instanceof HeraldError) throw new StoreError(redactUri(error.message), { cause: error });
      throw error;
    }
    return { pg, pool, sql: sqlOn(pool) };
  }

  #storeError(operation: string, error: unknown): HeraldError {
    if (error instanceof HeraldError) return error;
    if (this.#closed) return new ClosedError('PostgresStore');
    return new StoreError(`postgres: ${operation} failed: ${redactUri(messageOf(error))}`, { cause: error });
  }
}
