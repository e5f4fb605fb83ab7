/**
 * The catalog a PostgreSQL producer checks its events against (lib/producer/postgres-publish.ts):
 * kept per connection (the `pg` client or TypeORM manager the producer passes) and schema. It costs
 * no round trip while the catalog holds still: the producer's insert is guarded by the version it
 * checked against and inserts nothing when the catalog has moved on, and the producer then
 * reloads ({@link reloadPostgresCatalog}), checks again and retries.
 */
import { catalogOfRows, catalogSql, type CatalogRow } from '../store/postgres/event-types.ts';
import { CatalogSnapshot, ConnectionCatalogs } from './catalog-snapshot.ts';

/** Runs one statement on the producer's connection and answers its rows. */
export type RowsOf = <Row>(sql: string, parameters: unknown[]) => Promise<Row[]>;

const catalogs = new ConnectionCatalogs();

/** The copy `runner` holds for `schema`; loaded (one round trip) on its first publish. */
export async function cachedPostgresCatalog(runner: object, schema: string, rowsOf: RowsOf): Promise<CatalogSnapshot> {
  return catalogs.get(runner, schema) ?? reloadPostgresCatalog(runner, schema, rowsOf);
}

/** Reads the catalog again, in one statement (one snapshot), and keeps it for `runner`. */
export async function reloadPostgresCatalog(runner: object, schema: string, rowsOf: RowsOf): Promise<CatalogSnapshot> {
  return catalogs.set(runner, schema, new CatalogSnapshot(catalogOfRows(await rowsOf<CatalogRow>(catalogSql(schema), []))));
}
