/**
 * The MongoDB store's connection: the client (and the embedded server it may own), opened once
 * the deployment is found to offer change streams and transactions and the collections and
 * indexes exist, and how one port operation runs on it, driver errors turned into `StoreError`s
 * naming the operation, passwords redacted.
 *
 *   created ──open()──► open ──close()──► closed
 *
 * An `open()` that fails leaves the connection as it was: the next one tries again.
 */
import type { ClientSession, Db, MongoClient, TransactionOptions } from 'mongodb';
import { ClosedError, HeraldError, messageOf, StoreError, ValidationError } from '../../errors.ts';
import type { StoreDb } from './collections.ts';
import { loadMongoDriver } from './driver.ts';
import type { EmbeddedServer, StartEmbeddedServer } from './embedded-server.ts';
import { isIncompatibleServerError, MongoErrorCode, serverErrorCode } from './mongo-errors.ts';
import { EMBEDDED_MONGODB_SETTING, parseMongoUri, redactMongoUri } from './mongo-uri.ts';
import { Collections, ensureSchema } from './schema.ts';
import type {
  AttemptDoc,
  DeadLetterDoc,
  DeliveryDoc,
  DeliveryMinuteDoc,
  EndpointDoc,
  EndpointSequenceDoc,
  EventDoc,
  EventTypeDoc,
  LeaseDoc,
  MetaDoc,
  NodeDoc,
  ReplayJobDoc,
  EndpointChangeDoc,
  TenantTokenDoc,
} from './schema.ts';
import { checkServerSupport, tooOldProblem } from './server-check.ts';
import type { ServerSupport } from './server-check.ts';

export interface MongoConnectionOptions {
  /** Required unless `embedded` is given. */
  readonly uri: string | undefined;
  readonly embedded: StartEmbeddedServer | undefined;
  /** The database, else the URI's path, else `herald`. */
  readonly dbName: string | undefined;
  readonly retentionMs: number | null;
  readonly serverSelectionTimeoutMs: number;
  /** The store's mark on what it inserts (`StoreDb.origin`). */
  readonly origin: string;
}

const TRANSACTION: TransactionOptions = Object.freeze({
  readConcern: { level: 'snapshot' as const },
  writeConcern: { w: 'majority' as const },
  readPreference: 'primary' as const,
});

/** The open client, and the collections and transaction runner the concern modules are given. */
export interface OpenState extends StoreDb {
  readonly client: MongoClient;
  readonly db: Db;
  readonly support: ServerSupport;
}

export class MongoConnection {
  readonly #options: MongoConnectionOptions;
  #state: OpenState | undefined;
  #opening: Promise<OpenState> | undefined;
  #server: EmbeddedServer | undefined;
  #closed = false;

  constructor(options: MongoConnectionOptions) {
    this.#options = options;
  }

  get closed(): boolean {
    return this.#closed;
  }

  /** What the server is, once open. */
  get serverSupport(): ServerSupport | undefined {
    return this.#state?.support;
  }

  /** Connects, checks the deployment and creates the collections and indexes, once. */
  async open(): Promise<void> {
    if (this.#closed) throw new ClosedError('MongoStore');
    if (this.#state !== undefined) return;
    this.#opening ??= this.#open();
    try {
      this.#state = await this.#opening;
    } finally {
      this.#opening = undefined;
    }
  }

  /**
   * Closes: operations reject with a `ClosedError` from now on. `beforeEnd` runs with the open
   * state, once its opening is over (the last writes of the store's own), then the client closes
   * and the embedded server stops.
   */
  async close(beforeEnd: (state: OpenState | undefined) => Promise<void>): Promise<void> {
    this.#closed = true;
    const state = this.#state ?? (await this.#opening?.catch(() => undefined));
    this.#state = undefined;
    await beforeEnd(state);
    const server = this.#server;
    this.#server = undefined;
    try {
      await state?.client.close();
    } catch (error) {
      throw new StoreError(`mongodb: close failed: ${redactMongoUri(messageOf(error))}`, { cause: error });
    } finally {
      await server?.stop();
    }
  }

  ready(): OpenState {
    if (this.#closed) throw new ClosedError('MongoStore');
    if (this.#state === undefined) throw new StoreError('MongoStore: call init() before using the store');
    return this.#state;
  }

  /** Runs one port operation, turning driver errors into `StoreError`s that name it. */
  async run<T>(operation: string, fn: (state: OpenState) => Promise<T>): Promise<T> {
    const state = this.ready();
    try {
      return await fn(state);
    } catch (error) {
      if (error instanceof HeraldError) throw error;
      if (this.#closed) throw new ClosedError('MongoStore');
      throw new StoreError(`mongodb: ${operation} failed: ${redactMongoUri(messageOf(error))}`, { cause: error });
    }
  }

  async #open(): Promise<OpenState> {
    const options = this.#options;
    let uri = options.uri;
    let client: MongoClient | undefined;
    // Before anything starts: without the driver there is nothing to connect with.
    const driver = await loadMongoDriver({ key: 'store', value: uri === undefined ? EMBEDDED_MONGODB_SETTING : redactMongoUri(uri) });
    try {
      if (options.embedded !== undefined) {
        this.#server = await options.embedded();
        uri = this.#server.uri;
      }
      if (uri === undefined) throw new ValidationError('uri', 'is required');
      const info = parseMongoUri(uri);
      client = new driver.MongoClient(uri, {
        writeConcern: { w: 'majority' },
        serverSelectionTimeoutMS: options.serverSelectionTimeoutMs,
        appName: 'herald',
      });
      await client.connect();
      const admin = client.db('admin');
      const hello = await admin.command({ hello: 1 }).catch(async (error: unknown) => {
        // MongoDB 4.4.0 and 4.4.1, still supported, know only the legacy name (`hello` came in 4.4.2).
        if (serverErrorCode(error) === MongoErrorCode.COMMAND_NOT_FOUND) return admin.command({ isMaster: 1 });
        throw error;
      });
      const buildInfo = await admin.command({ buildInfo: 1 });
      const check = checkServerSupport({ hello, buildInfo });
      if (!check.ok) throw new StoreError(`mongodb: ${redactMongoUri(uri)}: ${check.problem}`);
      const db = client.db(options.dbName ?? info.dbName);
      await ensureSchema(db, { retentionMs: options.retentionMs });
      return openState(client, db, check.support, options.origin);
    } catch (error) {
      await client?.close().catch(() => undefined);
      const server = this.#server;
      this.#server = undefined;
      await server?.stop().catch(() => undefined);
      if (error instanceof HeraldError) throw error;
      const where = uri === undefined ? 'the embedded server' : redactMongoUri(uri);
      if (isIncompatibleServerError(error)) {
        // The driver refuses a server older than 4.4 in its handshake, before Herald can ask it anything.
        throw new StoreError(`mongodb: ${where}: ${tooOldProblem()} (${redactMongoUri(messageOf(error))})`, { cause: error });
      }
      throw new StoreError(`mongodb: cannot open ${where}: ${redactMongoUri(messageOf(error))}`, { cause: error });
    }
  }
}

/** The collections' handles, and transactions run by {@link runTransaction}. */
function openState(client: MongoClient, db: Db, support: ServerSupport, origin: string): OpenState {
  return {
    client,
    db,
    support,
    origin,
    meta: db.collection<MetaDoc>(Collections.META),
    endpoints: db.collection<EndpointDoc>(Collections.ENDPOINTS),
    events: db.collection<EventDoc>(Collections.EVENTS),
    deliveries: db.collection<DeliveryDoc>(Collections.DELIVERIES),
    attempts: db.collection<AttemptDoc>(Collections.ATTEMPTS),
    deadLetters: db.collection<DeadLetterDoc>(Collections.DEAD_LETTERS),
    leases: db.collection<LeaseDoc>(Collections.LEASES),
    nodes: db.collection<NodeDoc>(Collections.NODES),
    tenantTokens: db.collection<TenantTokenDoc>(Collections.TENANT_TOKENS),
    deliveryMinutes: db.collection<DeliveryMinuteDoc>(Collections.DELIVERY_MINUTES),
    endpointSequences: db.collection<EndpointSequenceDoc>(Collections.ENDPOINT_SEQUENCES),
    replayJobs: db.collection<ReplayJobDoc>(Collections.REPLAY_JOBS),
    endpointChanges: db.collection<EndpointChangeDoc>(Collections.ENDPOINT_CHANGES),
    eventTypes: db.collection<EventTypeDoc>(Collections.EVENT_TYPES),
    transaction: (fn) => runTransaction(client, fn),
  };
}

/** Runs `fn` in a transaction (retried by the driver on transient errors); `fn` must pass the session on. */
async function runTransaction<T>(client: MongoClient, fn: (session: ClientSession) => Promise<T>): Promise<T> {
  const session = client.startSession();
  try {
    return await session.withTransaction(fn, TRANSACTION);
  } finally {
    await session.endSession();
  }
}
