/**
 * The event-type catalog in MongoDB (`event_types`, lib/store/event-type-port.ts): one document
 * per type, `_id` its name, each version's schema as JSON text. The catalog's version is the `meta`
 * counter `event_types_version`, incremented in the transaction of every write (two writes at once
 * both write it, so one conflicts and is retried after the other commits). Producers
 * (lib/producer/mongo-publish.ts) read it with {@link readCatalogVersion} in their own transaction.
 */
import type { ClientSession, Collection } from 'mongodb';
import { ConflictError } from '../../errors.ts';
import { catalogEntryOf, patchedEventType, type EventType, type EventTypeCatalog, type EventTypePatch, type JsonSchemaObject } from '../event-type-port.ts';
import type { StoreDb } from './collections.ts';
import { isDuplicateKeyError } from './mongo-errors.ts';
import { MetaKeys, type EventTypeDoc, type MetaDoc } from './schema.ts';

/** The collections the catalog lives in: the store's, or a producer's own handles on them. */
export interface CatalogCollections {
  readonly meta: Collection<MetaDoc>;
  readonly eventTypes: Collection<EventTypeDoc>;
}

export async function createEventType(db: StoreDb, type: EventType): Promise<void> {
  try {
    await db.transaction(async (session) => {
      await db.eventTypes.insertOne(eventTypeToDoc(type), { session });
      await bumpCatalogVersion(db, session);
    });
  } catch (error) {
    if (isDuplicateKeyError(error)) throw new ConflictError(`event type '${type.name}' already exists`);
    throw error;
  }
}

export async function getEventType(db: StoreDb, name: string): Promise<EventType | undefined> {
  const doc = await db.eventTypes.findOne({ _id: name });
  return doc === null ? undefined : eventTypeFromDoc(doc);
}

export async function listEventTypes(db: StoreDb): Promise<EventType[]> {
  return (await db.eventTypes.find({}).sort({ _id: 1 }).toArray()).map(eventTypeFromDoc);
}

export async function updateEventType(db: StoreDb, name: string, patch: EventTypePatch, now: number): Promise<EventType | undefined> {
  return db.transaction(async (session) => {
    const doc = await db.eventTypes.findOne({ _id: name }, { session });
    if (doc === null) return undefined;
    const updated = patchedEventType(eventTypeFromDoc(doc), patch, now);
    await db.eventTypes.replaceOne({ _id: name }, eventTypeToDoc(updated), { session });
    await bumpCatalogVersion(db, session);
    return updated;
  });
}

export async function deleteEventType(db: StoreDb, name: string): Promise<boolean> {
  return db.transaction(async (session) => {
    const { deletedCount } = await db.eventTypes.deleteOne({ _id: name }, { session });
    if (deletedCount > 0) await bumpCatalogVersion(db, session);
    return deletedCount > 0;
  });
}

/** The catalog's version; in `session`'s transaction when given (a producer's). */
export async function readCatalogVersion({ meta }: CatalogCollections, session?: ClientSession): Promise<number> {
  const doc = await meta.findOne({ _id: MetaKeys.EVENT_TYPES_VERSION }, session === undefined ? {} : { session });
  return doc?.value ?? 0;
}

/**
 * Every type's newest version, labelled with the version read first: a write landing between the
 * two reads makes the version read next time higher, so the copy is reloaded then.
 */
export async function readCatalog(collections: CatalogCollections, session?: ClientSession): Promise<EventTypeCatalog> {
  const version = await readCatalogVersion(collections, session);
  const docs = await collections.eventTypes
    .find({}, { projection: { versions: { $slice: -1 } }, ...(session === undefined ? {} : { session }) })
    .sort({ _id: 1 })
    .toArray();
  return { version, entries: docs.map((doc) => catalogEntryOf({ name: doc._id, versions: versionsOf(doc) })) };
}

async function bumpCatalogVersion(db: StoreDb, session: ClientSession): Promise<void> {
  await db.meta.updateOne({ _id: MetaKeys.EVENT_TYPES_VERSION }, { $inc: { value: 1 } }, { upsert: true, session });
}

export function eventTypeToDoc(type: EventType): EventTypeDoc {
  return {
    _id: type.name,
    description: type.description,
    versions: type.versions.map((v) => ({ version: v.version, schema: v.schema === null ? null : JSON.stringify(v.schema), createdAt: v.createdAt })),
    deprecatedAt: type.deprecated ? (type.deprecatedAt ?? type.updatedAt) : null,
    deprecationNote: type.deprecated ? type.deprecationNote : null,
    createdAt: type.createdAt,
    updatedAt: type.updatedAt,
  };
}

export function eventTypeFromDoc(doc: EventTypeDoc): EventType {
  return {
    name: doc._id,
    description: doc.description,
    versions: versionsOf(doc),
    deprecated: doc.deprecatedAt !== null,
    deprecatedAt: doc.deprecatedAt,
    deprecationNote: doc.deprecationNote,
    createdAt: doc.createdAt,
    updatedAt: doc.updatedAt,
  };
}

function versionsOf(doc: Pick<EventTypeDoc, 'versions'>): EventType['versions'] {
  return doc.versions.map((v) => ({
    version: v.version,
    schema: v.schema === null ? null : (JSON.parse(v.schema) as JsonSchemaObject),
    createdAt: v.createdAt,
  }));
}
