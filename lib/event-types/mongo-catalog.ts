/**
 * The catalog a MongoDB producer checks its events against (lib/producer/mongo-publish.ts): kept
 * per client (or `Db`) and database, and brought up to date by one read of the catalog's version
 * (a `meta` document) per publish, in the publish's own transaction, as the SQLite producer does;
 * reloaded when another process changed it. MongoDB has no insert guarded by a read of another
 * collection, which spares PostgreSQL producers that read.
 */
import type { ClientSession } from 'mongodb';
import { readCatalog, readCatalogVersion, type CatalogCollections } from '../store/mongo/event-types.ts';
import { CatalogSnapshot, ConnectionCatalogs } from './catalog-snapshot.ts';

const catalogs = new ConnectionCatalogs();

/** The catalog as the transaction of `session` sees it, cached under `connection` and `dbName`. */
export async function currentMongoCatalog(
  connection: object,
  dbName: string,
  collections: CatalogCollections,
  session: ClientSession,
): Promise<CatalogSnapshot> {
  const cached = catalogs.get(connection, dbName);
  if (cached !== undefined && cached.version === (await readCatalogVersion(collections, session))) return cached;
  return catalogs.set(connection, dbName, new CatalogSnapshot(await readCatalog(collections, session)));
}
