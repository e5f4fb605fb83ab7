/**
 * The event-type catalog in PostgreSQL (`event_types`, lib/store/event-type-port.ts): one row per
 * type, its versions as jsonb. The catalog's version is the one-row `event_type_catalog`, bumped
 * by the statement (or in the transaction) of every write. Producers (lib/producer/postgres-publish.ts)
 * read the catalog with {@link catalogSql} and guard their insert with the version they checked
 * against ({@link catalogVersionSql}), so a publish costs no extra round trip while the catalog holds still.
 */
import { ConflictError } from '../../errors.ts';
import { catalogEntryOf, patchedEventType, type CatalogEntry, type EventType, type EventTypeCatalog, type EventTypePatch, type EventTypeVersion } from '../event-type-port.ts';
import { named, sqlState, SqlState, type Sql, type Statement } from './sql.ts';

interface EventTypeRow {
  name: string;
  description: string;
  versions: EventTypeVersion[];
  deprecated_at: string | number | null;
  deprecation_note: string | null;
  created_at: string | number;
  updated_at: string | number;
}

/** Every type's newest version and the catalog version, in one statement (one snapshot): `version`, `name`, `newest`. */
export function catalogSql(schema: string): string {
  return `SELECT c.version, t.name, t.versions -> -1 AS newest
    FROM ${schema}.event_type_catalog c LEFT JOIN ${schema}.event_types t ON true ORDER BY t.name`;
}

/** The catalog's version, as an SQL expression (a scalar subquery) for a producer's statement. */
export function catalogVersionSql(schema: string): string {
  return `(SELECT version FROM ${schema}.event_type_catalog)`;
}

/** A row of {@link catalogSql}: a driver may answer the bigint as text. */
export interface CatalogRow {
  readonly version: string | number;
  readonly name: string | null;
  readonly newest: EventTypeVersion | null;
}

export function catalogOfRows(rows: readonly CatalogRow[]): EventTypeCatalog {
  const entries: CatalogEntry[] = [];
  for (const row of rows) {
    if (row.name !== null && row.newest !== null) entries.push(catalogEntryOf({ name: row.name, versions: [row.newest] }));
  }
  return { version: Number(rows[0]?.version ?? 0), entries };
}

export class EventTypeQueries {
  readonly #s: string;
  readonly #version: Statement;

  constructor(schema: string) {
    this.#s = schema;
    // Every publish through Herald runs it.
    this.#version = named(schema, 'event_type_catalog_version', `SELECT version FROM ${schema}.event_type_catalog`);
  }

  async create(sql: Sql, type: EventType): Promise<void> {
    const s = this.#s;
    try {
      // One statement: the bump goes with the insert, or neither happens.
      await sql.query(
        `WITH bump AS (UPDATE ${s}.event_type_catalog SET version = version + 1)
         INSERT INTO ${s}.event_types (name, description, versions, deprecated_at, deprecation_note, created_at, updated_at)
         VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7)`,
        valuesOf(type),
      );
    } catch (error) {
      if (sqlState(error) === SqlState.UNIQUE_VIOLATION) throw new ConflictError(`event type '${type.name}' already exists`);
      throw error;
    }
  }

  async get(sql: Sql, name: string): Promise<EventType | undefined> {
    const [row] = await sql.query<EventTypeRow>(`SELECT * FROM ${this.#s}.event_types WHERE name = $1`, [name]);
    return row === undefined ? undefined : typeOf(row);
  }

  async list(sql: Sql): Promise<EventType[]> {
    return (await sql.query<EventTypeRow>(`SELECT * FROM ${this.#s}.event_types ORDER BY name`)).map(typeOf);
  }

  /** Run in a transaction: the row is locked while the patch is computed. */
  async update(tx: Sql, name: string, patch: EventTypePatch, now: number): Promise<EventType | undefined> {
    const s = this.#s;
    const [row] = await tx.query<EventTypeRow>(`SELECT * FROM ${s}.event_types WHERE name = $1 FOR UPDATE`, [name]);
    if (row === undefined) return undefined;
    const updated = patchedEventType(typeOf(row), patch, now);
    await tx.query(
      `WITH bump AS (UPDATE ${s}.event_type_catalog SET version = version + 1)
       UPDATE ${s}.event_types SET description = $2, versions = $3::jsonb, deprecated_at = $4, deprecation_note = $5, updated_at = $7
       WHERE name = $1 AND created_at = $6`,
      valuesOf(updated),
    );
    return updated;
  }

  async delete(sql: Sql, name: string): Promise<boolean> {
    const s = this.#s;
    const rows = await sql.query(
      `WITH gone AS (DELETE FROM ${s}.event_types WHERE name = $1 RETURNING name),
       bump AS (UPDATE ${s}.event_type_catalog SET version = version + 1 WHERE EXISTS (SELECT 1 FROM gone))
       SELECT name FROM gone`,
      [name],
    );
    return rows.length > 0;
  }

  async version(sql: Sql): Promise<number> {
    const [row] = await sql.query<{ version: string | number }>(this.#version);
    return Number(row?.version ?? 0);
  }

  async catalog(sql: Sql): Promise<EventTypeCatalog> {
    return catalogOfRows(await sql.query<CatalogRow>(catalogSql(this.#s)));
  }
}

function valuesOf(type: EventType): unknown[] {
  return [
    type.name,
    type.description,
    JSON.stringify(type.versions),
    type.deprecated ? (type.deprecatedAt ?? type.updatedAt) : null,
    type.deprecated ? type.deprecationNote : null,
    type.createdAt,
    type.updatedAt,
  ];
}

function typeOf(row: EventTypeRow): EventType {
  const deprecatedAt = row.deprecated_at === null ? null : Number(row.deprecated_at);
  return {
    name: row.name,
    description: row.description,
    versions: row.versions.map((v) => ({ version: Number(v.version), schema: v.schema, createdAt: Number(v.createdAt) })),
    deprecated: deprecatedAt !== null,
    deprecatedAt,
    deprecationNote: row.deprecation_note,
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}
