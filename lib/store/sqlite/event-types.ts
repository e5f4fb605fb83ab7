/**
 * The event-type catalog in SQLite (`event_types`, lib/store/event-type-port.ts): one row per
 * type, its versions as JSON text. The catalog's version is the `meta` row `event_types_version`,
 * bumped in the transaction of every write: producers (lib/producer/sqlite-publish.ts) prepare
 * these same statements on their own connection and read that one row per publish.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { ConflictError } from '../../errors.ts';
import { catalogEntryOf, patchedEventType, type EventType, type EventTypeCatalog, type EventTypePatch, type EventTypeVersion } from '../event-type-port.ts';
import { sqliteCode, type Statement } from './sql.ts';

interface EventTypeRow {
  name: string;
  description: string;
  /** JSON `[{version, schema, createdAt}]`, oldest first. */
  versions: string;
  deprecated_at: number | null;
  deprecation_note: string | null;
  created_at: number;
  updated_at: number;
}

export class EventTypeStatements {
  readonly #db: BetterSqlite3.Database;
  readonly #insert: Statement;
  readonly #get: Statement<EventTypeRow>;
  readonly #list: Statement<EventTypeRow>;
  readonly #update: Statement;
  readonly #delete: Statement;
  readonly #version: Statement<number>;
  readonly #bump: Statement;

  constructor(db: BetterSqlite3.Database) {
    this.#db = db;
    this.#insert = db.prepare(`INSERT INTO event_types (name, description, versions, deprecated_at, deprecation_note, created_at, updated_at)
      VALUES (@name, @description, @versions, @deprecated_at, @deprecation_note, @created_at, @updated_at)`);
    this.#get = db.prepare<unknown[], EventTypeRow>(`SELECT * FROM event_types WHERE name = ?`);
    this.#list = db.prepare<unknown[], EventTypeRow>(`SELECT * FROM event_types ORDER BY name`);
    this.#update = db.prepare(`UPDATE event_types SET description = @description, versions = @versions, deprecated_at = @deprecated_at,
      deprecation_note = @deprecation_note, updated_at = @updated_at WHERE name = @name`);
    this.#delete = db.prepare(`DELETE FROM event_types WHERE name = ?`);
    this.#version = db.prepare<unknown[], number>(`SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'event_types_version'`).pluck();
    this.#bump = db.prepare(`UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'event_types_version'`);
  }

  create(type: EventType): void {
    this.#write(() => {
      try {
        this.#insert.run(rowOf(type));
      } catch (error) {
        if (sqliteCode(error) === 'SQLITE_CONSTRAINT_PRIMARYKEY') throw new ConflictError(`event type '${type.name}' already exists`);
        throw error;
      }
      return true;
    });
  }

  get(name: string): EventType | undefined {
    const row = this.#get.get(name);
    return row === undefined ? undefined : typeOf(row);
  }

  list(): EventType[] {
    return this.#list.all().map(typeOf);
  }

  update(name: string, patch: EventTypePatch, now: number): EventType | undefined {
    let updated: EventType | undefined;
    this.#write(() => {
      const current = this.get(name);
      if (current === undefined) return false;
      updated = patchedEventType(current, patch, now);
      this.#update.run(rowOf(updated));
      return true;
    });
    return updated;
  }

  delete(name: string): boolean {
    return this.#write(() => this.#delete.run(name).changes > 0);
  }

  /** The catalog's version (one row of `meta`): what a producer reads on every publish. */
  version(): number {
    return this.#version.get() ?? 0;
  }

  /** Every type's newest version, read in one transaction with the version they are at. */
  catalog(): EventTypeCatalog {
    return this.#db.transaction(() => ({ version: this.version(), entries: this.#list.all().map((row) => catalogEntryOf(typeOf(row))) }))();
  }

  /** Runs a write and bumps the catalog version with it, in one transaction (a savepoint in an open one). */
  #write(write: () => boolean): boolean {
    return this.#db.transaction(() => {
      const changed = write();
      if (changed) this.#bump.run();
      return changed;
    }).immediate();
  }
}

function rowOf(type: EventType): EventTypeRow {
  return {
    name: type.name,
    description: type.description,
    versions: JSON.stringify(type.versions),
    deprecated_at: type.deprecated ? (type.deprecatedAt ?? type.updatedAt) : null,
    deprecation_note: type.deprecated ? type.deprecationNote : null,
    created_at: type.createdAt,
    updated_at: type.updatedAt,
  };
}

function typeOf(row: EventTypeRow): EventType {
  return {
    name: row.name,
    description: row.description,
    versions: JSON.parse(row.versions) as EventTypeVersion[],
    deprecated: row.deprecated_at !== null,
    deprecatedAt: row.deprecated_at,
    deprecationNote: row.deprecation_note,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
