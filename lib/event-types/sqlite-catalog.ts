/**
 * The catalog a SQLite producer checks its events against (lib/producer/sqlite-publish.ts): kept
 * per connection, and brought up to date by one read of the catalog's version (a `meta` row, a few
 * microseconds) on every publish, inside the publish's own transaction; reloaded when another
 * process changed it.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { EventTypeStatements } from '../store/sqlite/event-types.ts';
import { CatalogSnapshot, ConnectionCatalogs } from './catalog-snapshot.ts';

const statements = new WeakMap<BetterSqlite3.Database, EventTypeStatements>();
const catalogs = new ConnectionCatalogs();

/** The catalog as `db` sees it now. Run it in the transaction that writes the events (the schema must exist). */
export function currentSqliteCatalog(db: BetterSqlite3.Database): CatalogSnapshot {
  let s = statements.get(db);
  if (s === undefined) {
    s = new EventTypeStatements(db);
    statements.set(db, s);
  }
  const cached = catalogs.get(db);
  if (cached !== undefined && cached.version === s.version()) return cached;
  return catalogs.set(db, '', new CatalogSnapshot(s.catalog()));
}
