/**
 * The catalog a PostgreSQL producer checks its events against (lib/producer/postgres-publish.ts):
 * kept per connection (the `pg` client or TypeORM manager the producer passes) and schema. It costs
 * no round trip while the catalog holds still: the producer's insert is guarded by the version it
 * checked against and inserts nothing when the catalog has moved on, and the producer then
 * reloads ({@link reloadPostgresCatalog}), checks again and retries.
 */
import { catalogOfRows, catalogSql, type CatalogRow } from '../store/postgres/event-types.ts';
import { ValidationError } from '../errors.ts';
import { CatalogSnapshot, ConnectionCatalogs, type PayloadToCheck } from './catalog-snapshot.ts';

/** Runs one statement on the producer's connection and answers its rows. */
export type RowsOf = <Row>(sql: string, parameters: unknown[]) => Promise<Row[]>;

const catalogs = new ConnectionCatalogs();

/**
 * Checks `events` against the copy `runner` holds for `schema` (loaded, one round trip, on its first
 * publish) and answers that copy. A refusal by a cached copy is confirmed against a fresh read
 * first: the catalog may have been loosened since.
 * @throws ValidationError for the first payload the current catalog refuses.
 */
export async function checkedPostgresCatalog(runner: object, schema: string, rowsOf: RowsOf, events: readonly PayloadToCheck[]): Promise<CatalogSnapshot> {
  const cached = catalogs.get(runner, schema);
  if (cached !== undefined) {
    try {
      cached.check(events);
      return cached;
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
    }
  }
  const current = await reloadPostgresCatalog(runner, schema, rowsOf);
  current.check(events);
  return current;
}

/** Reads the catalog again, in one statement (one snapshot), and keeps it for `runner`. */
export async function reloadPostgresCatalog(runner: object, schema: string, rowsOf: RowsOf): Promise<CatalogSnapshot> {
  return catalogs.set(runner, schema, new CatalogSnapshot(catalogOfRows(await rowsOf<CatalogRow>(catalogSql(schema), []))));
}
