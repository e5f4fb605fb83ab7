/**
 * The event-type catalog in the store's words (lib/event-types/): the types the producer platform
 * defines, each with its JSON Schemas by version, global to the installation. `Store` extends
 * {@link EventTypeStore}; the conformance suite (spec/store/conformance/event-types.ts) pins it.
 *
 * Every write (create, update, delete) bumps the catalog's version in the same transaction, so a
 * producer that cached the catalog at version `n` learns that it is stale by reading one number
 * (lib/event-types/catalog-snapshot.ts), whichever node made the change.
 */

/** A JSON Schema (draft 2020-12) as a parsed JSON object. */
export type JsonSchemaObject = Readonly<Record<string, unknown>>;

/** One version of a type: 1, 2, 3, … Each new schema (or its removal, `null`) is a new version. */
export interface EventTypeVersion {
  readonly version: number;
  /** `null`: payloads of this version are not checked. */
  readonly schema: JsonSchemaObject | null;
  readonly createdAt: number;
}

export interface EventType {
  /** An exact event type, e.g. `lead.stage_changed` (no wildcard). */
  readonly name: string;
  readonly description: string;
  /** Oldest first; never empty. The last one is enforced at publish. */
  readonly versions: readonly EventTypeVersion[];
  /** A deprecated type still publishes; the API and the portal mark it. */
  readonly deprecated: boolean;
  /** When it was deprecated; `null` when it is not. */
  readonly deprecatedAt: number | null;
  readonly deprecationNote: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** What an update changes; a field left out is kept. */
export interface EventTypePatch {
  readonly description?: string;
  /** Appends a version (numbered last + 1) with this schema, created at `now`. */
  readonly schema?: JsonSchemaObject | null;
  /** `{ note }` deprecates it at `now` (a type deprecated already keeps its date); `null` un-deprecates it. */
  readonly deprecation?: { readonly note: string | null } | null;
}

/** What a producer needs of one type: its newest version. */
export interface CatalogEntry {
  readonly name: string;
  readonly version: number;
  readonly schema: JsonSchemaObject | null;
}

/** The whole catalog as producers read it, at one version of it. */
export interface EventTypeCatalog {
  /** Goes up with every catalog write; 0 before the first. */
  readonly version: number;
  readonly entries: readonly CatalogEntry[];
}

export interface EventTypeStore {
  /** @throws ConflictError when a type of that name exists. */
  createEventType(type: EventType): Promise<void>;
  getEventType(name: string): Promise<EventType | undefined>;
  /** Every type, by name (code unit order). */
  listEventTypes(): Promise<EventType[]>;
  /** Applies the patch (atomically) and returns the new type, or `undefined` when it does not exist. */
  updateEventType(name: string, patch: EventTypePatch, now: number): Promise<EventType | undefined>;
  /** False when it did not exist. Events already stored are untouched. */
  deleteEventType(name: string): Promise<boolean>;
  /** The catalog's version: one cheap read, for a publisher to tell whether its copy is current. */
  eventTypeCatalogVersion(): Promise<number>;
  /** Every type's newest version, and the catalog version they are at (one consistent read). */
  eventTypeCatalog(): Promise<EventTypeCatalog>;
}

/** The type with `patch` applied at `now`: how every store computes an update (pure). */
export function patchedEventType(type: EventType, patch: EventTypePatch, now: number): EventType {
  const last = type.versions.at(-1);
  const versions =
    patch.schema === undefined ? type.versions : [...type.versions, { version: (last?.version ?? 0) + 1, schema: patch.schema, createdAt: now }];
  const deprecation =
    patch.deprecation === undefined
      ? {}
      : patch.deprecation === null
        ? { deprecated: false, deprecatedAt: null, deprecationNote: null }
        : { deprecated: true, deprecatedAt: type.deprecatedAt ?? now, deprecationNote: patch.deprecation.note };
  return {
    ...type,
    ...(patch.description === undefined ? {} : { description: patch.description }),
    versions,
    ...deprecation,
    updatedAt: now,
  };
}

/** The catalog entry of a type: its newest version. */
export function catalogEntryOf(type: Pick<EventType, 'name' | 'versions'>): CatalogEntry {
  const newest = type.versions.at(-1);
  return { name: type.name, version: newest?.version ?? 0, schema: newest?.schema ?? null };
}
