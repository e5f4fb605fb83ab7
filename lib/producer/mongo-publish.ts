/**
 * Publishing into a MongoDB outbox from the producer's own client, inside the
 * producer's own transaction: run the business change and `publish()` with
 * the same `ClientSession` inside `session.withTransaction(...)`, and either
 * both commit or neither does. Herald's change stream sees the event as soon
 * as the transaction commits.
 *
 * Validation and the tenant and endpoint checks are those of the SQLite
 * producer (`sqlite-publish.ts`). Without an open transaction on the session
 * a batch still commits atomically: `publish` runs it in a transaction of its
 * own. The outbox collections must exist (Herald creates them and their
 * indexes at its first start): a transaction that writes across shards cannot
 * create a collection, and one created by an insert would have no indexes.
 *
 * The session, database and client are typed by Herald's own interfaces,
 * which the driver's classes satisfy: Herald's declarations then compile in
 * an application that has no `mongodb` installed (it is an optional peer
 * dependency). The driver itself is loaded at the first publish.
 */
import type { ClientSession, Db } from 'mongodb';
import { systemClock } from '../clock.ts';
import type { Clock } from '../clock.ts';
import { ConflictError, NotFoundError, ValidationError } from '../errors.ts';
import type { OutboxEvent, TraceContext } from '../model.ts';
import { currentMongoCatalog } from '../event-types/mongo-catalog.ts';
import { eventFromDoc, eventToDoc } from '../store/mongo/documents.ts';
import { loadMongoDriver } from '../store/mongo/driver.ts';
import { Collections } from '../store/mongo/schema.ts';
import type { EndpointDoc, EventDoc, EventTypeDoc, MetaDoc } from '../store/mongo/schema.ts';
import { PublishPath, tracePublish } from '../tracing/publish-span.ts';
import { outboxEventOf, validateEventInputs } from './validate-event.ts';
import type { EventInput, ValidEventInput } from './validate-event.ts';

/** What `publish` uses of the producer's session: the driver's `ClientSession` is one. */
export interface MongoSession {
  inTransaction(): boolean;
  withTransaction<T>(fn: () => Promise<T>, options: MongoTransactionOptions): Promise<T>;
}

/** The options `publish` opens a transaction of its own with. */
export interface MongoTransactionOptions {
  readonly readConcern: { readonly level: 'snapshot' };
  readonly writeConcern: { readonly w: 'majority' };
  readonly readPreference: 'primary';
}

/** The database of the outbox: the driver's `Db` is one. */
export interface MongoDatabase {
  collection(name: string): object;
}

/** A client that opens the outbox's database by name: the driver's `MongoClient` is one. */
export interface MongoDatabaseClient {
  db(name: string): MongoDatabase;
}

/** Where the outbox is: the database, or a client and the database's name. */
export type MongoOutbox = { readonly db: MongoDatabase } | { readonly client: MongoDatabaseClient; readonly dbName: string };

export type MongoPublishOptions = MongoOutbox & {
  /** @default systemClock */
  readonly clock?: Clock;
  /**
   * The largest serialised payload accepted, in UTF-8 bytes.
   * @default 262144 (256 KiB)
   */
  readonly maxPayloadBytes?: number;
};

const DEFAULTS = Object.freeze({
  clock: systemClock,
  maxPayloadBytes: 256 * 1024,
});

/**
 * Writes events into the outbox with `session`, joining its transaction if
 * one is open. An input whose `id` is already stored is an idempotent retry:
 * the stored event is returned and nothing is written.
 *
 * @returns the events as stored, in input order.
 * @throws ValidationError `HERALD_INVALID_INPUT` for a malformed input (field and rule named), a payload that
 *   does not match its type's schema in the catalog (`payload/<JSON pointer>`), or bad options.
 * @throws PayloadTooLargeError `HERALD_PAYLOAD_TOO_LARGE` for an oversized payload.
 * @throws NotFoundError `HERALD_NOT_FOUND` when the tenant has no endpoint, or
 *   `endpointId` names no endpoint of that tenant.
 * @throws ConflictError `HERALD_CONFLICT` when `id` is already used by another tenant's event.
 * Driver errors (a write conflict, a network error) are rethrown as they are,
 * so `session.withTransaction` can retry the transaction.
 */
export async function publish(
  session: MongoSession,
  input: EventInput | readonly EventInput[],
  options: MongoPublishOptions,
): Promise<OutboxEvent[]> {
  const db = outboxDb(options);
  const clock = options.clock ?? DEFAULTS.clock;
  const maxPayloadBytes = options.maxPayloadBytes ?? DEFAULTS.maxPayloadBytes;
  // Validate everything first, so a bad input in a batch writes nothing.
  const valid = validateEventInputs(input, { maxPayloadBytes });
  // The events' documents take an ObjectId of the driver (their order within a millisecond).
  await loadMongoDriver({ key: 'publishMongo', value: 'a MongoDB outbox' });
  // The values are the driver's own: Herald's interfaces above only say what is used of them.
  const driverSession = session as unknown as ClientSession;
  // The catalog's copy is kept per client (or Db) and database name.
  const [connection, dbName] = 'db' in options ? [options.db, ''] : [options.client, options.dbName];
  const catalogCollections = { meta: db.collection<MetaDoc>(Collections.META), eventTypes: db.collection<EventTypeDoc>(Collections.EVENT_TYPES) };
  return tracePublish(PublishPath.MONGODB, (trace) => {
    const write = async (): Promise<OutboxEvent[]> => {
      // Payloads against their types' schemas, as the catalog stands in this transaction.
      (await currentMongoCatalog(connection, dbName, catalogCollections, driverSession)).check(valid);
      const stored: OutboxEvent[] = [];
      for (const event of valid) stored.push(await publishOne(db, driverSession, event, clock, trace));
      return stored;
    };
    if (session.inTransaction()) return write();
    return session.withTransaction(write, TRANSACTION);
  });
}

const TRANSACTION = Object.freeze<MongoTransactionOptions>({
  readConcern: { level: 'snapshot' },
  writeConcern: { w: 'majority' },
  readPreference: 'primary',
});

async function publishOne(db: Db, session: ClientSession, input: ValidEventInput, clock: Clock, trace: TraceContext | null): Promise<OutboxEvent> {
  const events = db.collection<EventDoc>(Collections.EVENTS);
  const endpoints = db.collection<EndpointDoc>(Collections.ENDPOINTS);
  if (input.id !== undefined) {
    const stored = await events.findOne({ _id: input.id }, { session });
    if (stored !== null) {
      if (stored.tenantId !== input.tenantId) {
        throw new ConflictError(`id: event '${input.id}' already exists for another tenant`);
      }
      return eventFromDoc(stored);
    }
  }
  if ((await endpoints.findOne({ tenantId: input.tenantId }, { session, projection: { _id: 1 } })) === null) {
    throw new NotFoundError('tenant', input.tenantId, 'tenantId');
  }
  if (input.endpointId !== undefined) {
    const target = await endpoints.findOne({ _id: input.endpointId }, { session, projection: { tenantId: 1 } });
    if (target?.tenantId !== input.tenantId) throw new NotFoundError('endpoint', input.endpointId, 'endpointId');
  }
  const event = outboxEventOf(input, clock.now(), trace);
  await events.insertOne(eventToDoc(event), { session });
  return event;
}

function outboxDb(options: MongoPublishOptions): Db {
  if (typeof options !== 'object' || options === null) {
    throw new ValidationError('options', 'must give the outbox: { db } or { client, dbName }');
  }
  if ('db' in options) {
    if (typeof options.db?.collection !== 'function') throw new ValidationError('db', 'must be a mongodb Db');
    return options.db as Db;
  }
  if (typeof options.client?.db !== 'function') throw new ValidationError('client', 'must be a MongoClient');
  if (typeof options.dbName !== 'string' || options.dbName === '') {
    throw new ValidationError('dbName', `must name the database Herald uses (got ${JSON.stringify(options.dbName)})`);
  }
  return options.client.db(options.dbName) as Db;
}
