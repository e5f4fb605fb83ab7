/**
 * The MongoDB store: the Store port over the official driver, for a replica
 * set (or a sharded cluster) shared by every Herald process and by producers
 * publishing inside their own transactions.
 *
 *   created ──init()──► open ──close()──► closed
 *
 * `init()` connects, checks that the deployment offers change streams and
 * transactions (a replica set on MongoDB 4.0+, see `server-check.ts`) and
 * creates the collections and indexes (`schema.ts`). Methods other than
 * `init` and `close` reject with a `StoreError` before `init()` and with a
 * `ClosedError` after `close()`; driver errors become `StoreError`s naming
 * the operation, passwords redacted.
 *
 * Writes use majority write concern. Every method that writes more than one
 * document atomically runs in one transaction (snapshot reads, majority
 * commit): fan-out, settle, delete endpoint, replay (per chunk), purge (per
 * chunk). Claims need none: each delivery is claimed by its own conditional
 * update in one unordered bulk write, and the lease epoch fences the rest.
 *
 * The work signal is a change stream (`change-feed.ts`), started by the first
 * `watch()` and stopped with the last. Delivery inserts are filtered on the
 * server to the slots this process owns: by default the slots this store has
 * granted through `acquireLeases` (and not released), or those given to
 * {@link MongoStore.setOwnedSlots}.
 */
import { MongoClient, ObjectId } from 'mongodb';
import type { AnyBulkWriteOperation, ClientSession, Collection, Db, Document, TransactionOptions } from 'mongodb';
import type { Clock } from '../../clock.ts';
import { ClosedError, ConflictError, HeraldError, NotFoundError, StoreError, ValidationError } from '../../errors.ts';
import { slotOf } from '../../ids.ts';
import type { Attempt, DeadLetter, Delivery, DeliveryJob, DeliveryStatus, Endpoint, OutboxEvent } from '../../model.ts';
import { DeliveryStatus as Status } from '../../model.ts';
import type {
  ClaimRequest,
  DeadLetterFilter,
  DeliveryFilter,
  EndpointClaimRequest,
  EndpointPatch,
  FanOut,
  FanOutClaim,
  LeaseRequest,
  NewDelivery,
  NodeRecord,
  PurgeResult,
  SettleResult,
  Settlement,
  SlotLease,
  Store,
} from '../port.ts';
import { ChangeFeed } from './change-feed.ts';
import type { ChangeFeedRestart, ChangeStreamLike } from './change-feed.ts';
import {
  attemptFromDoc,
  attemptToDoc,
  deadLetterFromDoc,
  deliveryFromDoc,
  endpointFromDoc,
  endpointToDoc,
  eventFromDoc,
  eventToDoc,
  leaseFromDoc,
  newDeliveryDoc,
  nodeFromDoc,
} from './documents.ts';
import type { EmbeddedServer, StartEmbeddedServer } from './embedded-server.ts';
import { isDuplicateKeyError, messageOf, onlyDuplicateKeys, serverErrorCode } from './mongo-errors.ts';
import { parseMongoUri, redactMongoUri } from './mongo-uri.ts';
import {
  afterKeyFilter,
  byDueThenId,
  cancelDeliveriesFilter,
  cancelDeliveriesUpdate,
  claimableFilter,
  claimOneFilter,
  claimUpdate,
  clampLimit,
  CLEAR_FAILING_UPDATE,
  clearFailingFilter,
  countsByStatus,
  DEAD_LETTER_LIST_SORT,
  deadLetterListFilter,
  DEFAULT_LIST_LIMIT,
  DELIVERY_LIST_SORT,
  deliveryListFilter,
  endpointClaimableFilter,
  endpointDueFilter,
  endpointPatchUpdate,
  endpointsWorthClaiming,
  isCurrentClaim,
  liveLeasesFilter,
  markFailingFilter,
  markFailingUpdate,
  MAX_LIST_LIMIT,
  pickClaims,
  RELEASE_LEASES_UPDATE,
  releaseLeasesFilter,
  renewLeasesFilter,
  renewLeasesUpdate,
  replayDeliveryFilter,
  replayDeliveryUpdate,
  resumeDeliveriesFilter,
  resumeDeliveriesUpdate,
  settleFilter,
  settleUpdate,
  slotsToTake,
  takeLeaseFilter,
  takeLeaseUpdate,
  unfinishedDeliveriesFilter,
} from './queries.ts';
import type { ClaimCandidate, OwnedSlot } from './queries.ts';
import { ResumeTokenKeeper } from './resume-tokens.ts';
import { checkServerSupport } from './server-check.ts';
import type { ServerSupport } from './server-check.ts';
import { Collections, ensureSchema, MetaKeys } from './schema.ts';
import type { AttemptDoc, DeadLetterDoc, DeliveryDoc, EndpointDoc, EventDoc, LeaseDoc, MetaDoc, NodeDoc } from './schema.ts';

const DAY = 24 * 60 * 60 * 1_000;

export interface MongoStoreOptions {
  /** `mongodb://…` or `mongodb+srv://…`; required unless `embedded` is given. */
  readonly uri?: string;
  /** Starts a server the store owns and stops on `close()` (the `mongodb-memory-server` setting). */
  readonly embedded?: StartEmbeddedServer;
  /**
   * The database.
   * @default the URI's path, else `herald`
   */
  readonly dbName?: string;
  readonly clock: Clock;
  /**
   * TTL of attempts and dead letters (TTL indexes); `null` for none (then only
   * `purge()` deletes them). Changing it later changes the indexes in place.
   * @default 30 days
   */
  readonly retentionMs?: number | null;
  /**
   * The change feed's name, under which its resume token is kept in `meta`.
   * Processes that want separate resume positions use separate keys.
   * @default 'default'
   */
  readonly changeFeedKey?: string;
  /**
   * How long the server holds a change-stream `getMore` open waiting for changes.
   * @default 1000
   */
  readonly maxAwaitTimeMs?: number;
  /**
   * At most one resume-token write per this period.
   * @default 1000
   */
  readonly resumeTokenSaveIntervalMs?: number;
  /**
   * Wait before the second consecutive change-feed restart, doubling up to `maxRestartDelayMs`.
   * @default 1000
   */
  readonly restartDelayMs?: number;
  /** @default 30000 */
  readonly maxRestartDelayMs?: number;
  /**
   * How long `init()` and each operation wait for a suitable server.
   * @default 10000
   */
  readonly serverSelectionTimeoutMs?: number;
  /**
   * Called on every change-feed restart (after which the engine sweeps).
   * @default a process warning (`HERALD_CHANGE_FEED_RESTART`) on stderr
   */
  readonly onChangeFeedRestart?: (restart: ChangeFeedRestart) => void;
}

const DEFAULTS = Object.freeze({
  retentionMs: 30 * DAY,
  changeFeedKey: 'default',
  maxAwaitTimeMs: 1_000,
  resumeTokenSaveIntervalMs: 1_000,
  restartDelayMs: 1_000,
  maxRestartDelayMs: 30_000,
  serverSelectionTimeoutMs: 10_000,
  onChangeFeedRestart: warnRestart,
} satisfies Required<Omit<MongoStoreOptions, 'uri' | 'embedded' | 'dbName' | 'clock'>>);

const MAX_SLOT_COUNT = 65_536;
/** Documents per transaction for bulk work (replay, purge). */
const CHUNK = 500;

const TRANSACTION: TransactionOptions = Object.freeze({
  readConcern: { level: 'snapshot' as const },
  writeConcern: { w: 'majority' as const },
  readPreference: 'primary' as const,
});

interface OpenState {
  readonly client: MongoClient;
  readonly db: Db;
  readonly support: ServerSupport;
  readonly meta: Collection<MetaDoc>;
  readonly endpoints: Collection<EndpointDoc>;
  readonly events: Collection<EventDoc>;
  readonly deliveries: Collection<DeliveryDoc>;
  readonly attempts: Collection<AttemptDoc>;
  readonly deadLetters: Collection<DeadLetterDoc>;
  readonly leases: Collection<LeaseDoc>;
  readonly nodes: Collection<NodeDoc>;
}

/** The change stream's documents after the feed's `$project`. */
interface FeedChange extends Document {
  readonly _id: unknown;
  readonly operationType: string;
}

export class MongoStore implements Store {
  readonly #uri: string | undefined;
  readonly #embedded: StartEmbeddedServer | undefined;
  readonly #dbName: string | undefined;
  readonly #clock: Clock;
  readonly #retentionMs: number | null;
  readonly #changeFeedKey: string;
  readonly #maxAwaitTimeMs: number;
  readonly #resumeTokenSaveIntervalMs: number;
  readonly #restartDelayMs: number;
  readonly #maxRestartDelayMs: number;
  readonly #serverSelectionTimeoutMs: number;
  readonly #onChangeFeedRestart: (restart: ChangeFeedRestart) => void;

  #state: OpenState | undefined;
  /** Fixed by the first `init()` on this data; deliveries' slots are derived from it. */
  #slotCount = 0;
  #opening: Promise<OpenState> | undefined;
  #server: EmbeddedServer | undefined;
  #closed = false;

  readonly #listeners = new Set<() => void>();
  #feed: ChangeFeed | undefined;
  #feedStopping: Promise<void> | undefined;
  #restarts = 0;
  /** Slots granted to each owner through this store and not released: the feed's default filter. */
  readonly #granted = new Map<string, ReadonlySet<number>>();
  /** Slots given to setOwnedSlots(), overriding `#granted`. */
  #pinnedSlots: readonly number[] | undefined;

  /**
   * @throws ValidationError (`HERALD_INVALID_INPUT`) naming the option: a URI
   *   that is not `mongodb://` or `mongodb+srv://`, a bad duration.
   */
  constructor(options: MongoStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('MongoStore options', 'must be an object with uri (or embedded) and clock');
    }
    if (options.embedded === undefined) {
      if (typeof options.uri !== 'string') throw new ValidationError('uri', 'is required (mongodb://host/db?replicaSet=rs0)');
      parseMongoUri(options.uri);
    } else if (typeof options.embedded !== 'function') {
      throw new ValidationError('embedded', 'must be a function that starts a server');
    }
    const clock = options.clock as Partial<Clock> | undefined;
    if (typeof clock?.now !== 'function' || typeof clock.setTimeout !== 'function') {
      throw new ValidationError('clock', 'must be a Clock with now() and setTimeout()');
    }
    if (options.dbName !== undefined && (typeof options.dbName !== 'string' || !/^[^/\\. "$*<>:|?\0]{1,63}$/.test(options.dbName))) {
      throw new ValidationError('dbName', `must be a MongoDB database name (got ${JSON.stringify(options.dbName)})`);
    }
    const retentionMs = options.retentionMs === undefined ? DEFAULTS.retentionMs : options.retentionMs;
    if (retentionMs !== null && (!Number.isFinite(retentionMs) || retentionMs < 1_000)) {
      throw new ValidationError('retentionMs', `must be null or at least 1000 (got ${String(retentionMs)})`);
    }
    const positive = (field: string, value: number | undefined, fallback: number, min = 1): number => {
      const v = value ?? fallback;
      if (!Number.isInteger(v) || v < min) throw new ValidationError(field, `must be an integer of at least ${min} (got ${String(v)})`);
      return v;
    };
    const key = options.changeFeedKey ?? DEFAULTS.changeFeedKey;
    if (typeof key !== 'string' || key === '') throw new ValidationError('changeFeedKey', `must be a non-empty string (got ${JSON.stringify(key)})`);
    this.#uri = options.uri;
    this.#embedded = options.embedded;
    this.#dbName = options.dbName;
    this.#clock = options.clock;
    this.#retentionMs = retentionMs;
    this.#changeFeedKey = key;
    this.#maxAwaitTimeMs = positive('maxAwaitTimeMs', options.maxAwaitTimeMs, DEFAULTS.maxAwaitTimeMs);
    this.#resumeTokenSaveIntervalMs = positive('resumeTokenSaveIntervalMs', options.resumeTokenSaveIntervalMs, DEFAULTS.resumeTokenSaveIntervalMs, 0);
    this.#restartDelayMs = positive('restartDelayMs', options.restartDelayMs, DEFAULTS.restartDelayMs, 0);
    this.#maxRestartDelayMs = positive('maxRestartDelayMs', options.maxRestartDelayMs, DEFAULTS.maxRestartDelayMs, 0);
    this.#serverSelectionTimeoutMs = positive('serverSelectionTimeoutMs', options.serverSelectionTimeoutMs, DEFAULTS.serverSelectionTimeoutMs);
    this.#onChangeFeedRestart = options.onChangeFeedRestart ?? DEFAULTS.onChangeFeedRestart;
  }

  /** Change-feed restarts since the store opened (lost tokens, invalidations, errors). */
  get changeFeedRestarts(): number {
    return this.#restarts;
  }

  /** What the server is, once `init()` has run. */
  get serverSupport(): ServerSupport | undefined {
    return this.#state?.support;
  }

  /**
   * Filters the change feed's delivery inserts to these slots (the ones this
   * process owns), overriding what the store learned from `acquireLeases`;
   * `undefined` goes back to that. Reopens the stream from its current token
   * when the set changes; nothing is missed.
   */
  setOwnedSlots(slots: readonly number[] | undefined): void {
    this.#pinnedSlots = slots === undefined ? undefined : [...slots];
    this.#feed?.setSlots(this.#feedSlots());
  }

  /** Resolves once the change stream is open (changes committed from then on are signalled). */
  whenChangeFeedReady(): Promise<void> {
    return this.#feed?.whenReady() ?? Promise.resolve();
  }

  async init(options: { readonly slotCount: number }): Promise<{ readonly slotCount: number }> {
    const wanted = options.slotCount;
    if (!Number.isInteger(wanted) || wanted < 1 || wanted > MAX_SLOT_COUNT) {
      throw new ValidationError('slotCount', `must be an integer from 1 to ${MAX_SLOT_COUNT} (got ${String(wanted)})`);
    }
    if (this.#closed) throw new ClosedError('MongoStore');
    if (this.#state === undefined) {
      this.#opening ??= this.#open();
      try {
        this.#state = await this.#opening;
      } finally {
        this.#opening = undefined;
      }
    }
    return this.#run('init', async ({ meta }) => {
      // The first start fixes the slot count for the data: endpoints hash into it forever after.
      try {
        await meta.updateOne({ _id: MetaKeys.SLOT_COUNT }, { $setOnInsert: { value: wanted } }, { upsert: true });
      } catch (error) {
        // Two first starts at once: the other one inserted it.
        if (!isDuplicateKeyError(error)) throw error;
      }
      const stored = await meta.findOne({ _id: MetaKeys.SLOT_COUNT });
      if (typeof stored?.value !== 'number') throw new StoreError('mongodb: meta.slot_count is missing or not a number');
      this.#slotCount = stored.value;
      return { slotCount: stored.value };
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#listeners.clear();
    const feed = this.#feed;
    this.#feed = undefined;
    await feed?.stop();
    await this.#feedStopping;
    const state = this.#state ?? (await this.#opening?.catch(() => undefined));
    this.#state = undefined;
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

  watch(listener: () => void): () => void {
    const state = this.#ready();
    this.#listeners.add(listener);
    if (this.#feed === undefined) {
      const tokens = new ResumeTokenKeeper(
        {
          read: async (id) => (await state.meta.findOne({ _id: id }))?.token,
          write: async (id, token, savedAt) => {
            await state.meta.updateOne({ _id: id }, { $set: { token, savedAt } }, { upsert: true });
          },
          remove: async (id) => {
            await state.meta.deleteOne({ _id: id });
          },
        },
        { key: this.#changeFeedKey, saveIntervalMs: this.#resumeTokenSaveIntervalMs },
      );
      const feed = new ChangeFeed(
        {
          open: ({ pipeline, resumeAfter }): ChangeStreamLike =>
            state.db.watch<Document, FeedChange>(pipeline, {
              maxAwaitTimeMS: this.#maxAwaitTimeMs,
              ...(resumeAfter === undefined ? {} : { resumeAfter }),
            }),
          tokens,
          clock: this.#clock,
          onChange: () => {
            for (const l of [...this.#listeners]) l();
          },
          onRestart: (restart) => {
            this.#restarts++;
            this.#onChangeFeedRestart(restart);
          },
          restartDelayMs: this.#restartDelayMs,
          maxRestartDelayMs: this.#maxRestartDelayMs,
        },
        this.#feedSlots(),
      );
      this.#feed = feed;
      feed.start();
    }
    return () => {
      if (!this.#listeners.delete(listener) || this.#listeners.size > 0) return;
      const feed = this.#feed;
      this.#feed = undefined;
      if (feed !== undefined) this.#feedStopping = Promise.all([this.#feedStopping, feed.stop()]).then(() => undefined);
    };
  }

  // Endpoints

  async createEndpoint(endpoint: Endpoint): Promise<void> {
    return this.#run('createEndpoint', async ({ endpoints }) => {
      try {
        await endpoints.insertOne(endpointToDoc(endpoint));
      } catch (error) {
        if (isDuplicateKeyError(error)) throw new ConflictError(`endpoint '${endpoint.id}' already exists`);
        throw error;
      }
    });
  }

  async getEndpoint(id: string): Promise<Endpoint | undefined> {
    return this.#run('getEndpoint', async ({ endpoints }) => {
      const doc = await endpoints.findOne({ _id: id });
      return doc === null ? undefined : endpointFromDoc(doc);
    });
  }

  async listEndpoints(filter?: { readonly tenantId?: string }): Promise<Endpoint[]> {
    return this.#run('listEndpoints', async ({ endpoints }) => {
      const query = filter?.tenantId === undefined ? {} : { tenantId: filter.tenantId };
      return (await endpoints.find(query).sort({ createdAt: 1, _id: 1 }).toArray()).map(endpointFromDoc);
    });
  }

  async updateEndpoint(id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
    return this.#run('updateEndpoint', async ({ endpoints }) => {
      const doc = await endpoints.findOneAndUpdate({ _id: id }, endpointPatchUpdate(patch, now), { returnDocument: 'after' });
      return doc === null ? undefined : endpointFromDoc(doc);
    });
  }

  async deleteEndpoint(id: string, now: number): Promise<boolean> {
    return this.#run('deleteEndpoint', (state) =>
      this.#transaction(state, async (session) => {
        const { deletedCount } = await state.endpoints.deleteOne({ _id: id }, { session });
        if (deletedCount === 0) return false;
        await state.deliveries.updateMany(cancelDeliveriesFilter(id), cancelDeliveriesUpdate(now), { session });
        return true;
      }),
    );
  }

  async resumeDeliveries(endpointId: string, now: number): Promise<number> {
    return this.#run('resumeDeliveries', async ({ deliveries }) => {
      const { modifiedCount } = await deliveries.updateMany(resumeDeliveriesFilter(endpointId, now), resumeDeliveriesUpdate(now));
      return modifiedCount;
    });
  }

  async tenantExists(tenantId: string): Promise<boolean> {
    return this.#run('tenantExists', async ({ endpoints }) => {
      return (await endpoints.findOne({ tenantId }, { projection: { _id: 1 } })) !== null;
    });
  }

  // Outbox

  /** Idempotent: an event whose id is already stored is left as it is. One transaction for the batch. */
  async appendEvents(events: readonly OutboxEvent[]): Promise<void> {
    if (events.length === 0) return;
    return this.#run('appendEvents', (state) =>
      this.#transaction(state, async (session) => {
        const ops: AnyBulkWriteOperation<EventDoc>[] = events.map((event) => {
          const { _id, ...fields } = eventToDoc(event);
          return { updateOne: { filter: { _id }, update: { $setOnInsert: fields }, upsert: true } };
        });
        await state.events.bulkWrite(ops, { session, ordered: true });
      }),
    );
  }

  async unfannedEvents(limit: number): Promise<OutboxEvent[]> {
    const n = clampLimit(limit, Number.MAX_SAFE_INTEGER);
    if (n === 0) return [];
    return this.#run('unfannedEvents', async ({ events }) =>
      (await events.find({ fannedOut: false }).sort({ createdAt: 1, ord: 1 }).limit(n).toArray()).map(eventFromDoc),
    );
  }

  async countUnfannedEvents(cap: number): Promise<number> {
    const n = clampLimit(cap, Number.MAX_SAFE_INTEGER);
    if (n === 0) return 0;
    // The filter is the partial filter of events_unfanned, so the count walks that index only.
    return this.#run('countUnfannedEvents', ({ events }) => events.countDocuments({ fannedOut: false }, { limit: n }));
  }

  async recordFanOuts(fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]> {
    if (fanOuts.length === 0) return [];
    const eventIds = [...new Set(fanOuts.map((fanOut) => fanOut.eventId))];
    const all = fanOuts.flatMap((fanOut) => fanOut.deliveries);
    const toClaim = claim === undefined ? [] : all.filter((d) => claim.deliveryIds.has(d.id));
    return this.#run('recordFanOuts', (state) =>
      this.#transaction(state, async (session) => {
        const marked = await state.events.updateMany(
          { _id: { $in: eventIds }, fannedOut: false },
          { $set: { fannedOut: true, fannedOutAt: now } },
          { session },
        );
        if (marked.matchedCount < eventIds.length) {
          // Fewer were waiting than named: some were fanned out before (a rerun), or are not stored.
          const stored = await state.events.find({ _id: { $in: eventIds } }, { session, projection: { _id: 1 } }).toArray();
          const storedIds = new Set(stored.map((doc) => doc._id));
          const missing = eventIds.find((id) => !storedIds.has(id));
          if (missing !== undefined) throw new NotFoundError('event', missing);
        }
        if (all.length === 0) return [];
        const epochs = new Map<number, number>();
        if (claim !== undefined && toClaim.length > 0) {
          const slots = [...new Set(toClaim.map((d) => d.slot))];
          for (const lease of await state.leases.find(liveLeasesFilter(claim.owner, now, slots), { session }).toArray()) {
            epochs.set(lease._id, lease.epoch);
          }
        }
        const docs = all.map((d) => {
          const epoch = claim?.deliveryIds.has(d.id) === true ? epochs.get(d.slot) : undefined;
          return newDeliveryDoc(d, epoch === undefined ? undefined : { epoch, now });
        });
        const ops: AnyBulkWriteOperation<DeliveryDoc>[] = docs.map((doc) => {
          const { _id, ...fields } = doc;
          return { updateOne: { filter: { _id }, update: { $setOnInsert: fields }, upsert: true } };
        });
        const result = await state.deliveries.bulkWrite(ops, { session, ordered: true });
        // Only the upserted ones are new; an id that existed (a rerun) keeps its state.
        const inserted = new Set(Object.values(result.upsertedIds));
        return docs.filter((doc) => doc.status === 'in_flight' && inserted.has(doc._id)).map(deliveryFromDoc);
      }),
    );
  }

  async getEvent(id: string): Promise<OutboxEvent | undefined> {
    return this.#run('getEvent', async ({ events }) => {
      const doc = await events.findOne({ _id: id });
      return doc === null ? undefined : eventFromDoc(doc);
    });
  }

  // Membership

  async heartbeat(node: { readonly id: string; readonly startedAt: number; readonly now: number }): Promise<void> {
    return this.#run('heartbeat', async ({ nodes }) => {
      const write = () =>
        nodes.updateOne({ _id: node.id }, { $setOnInsert: { startedAt: node.startedAt }, $max: { seenAt: node.now } }, { upsert: true });
      try {
        await write();
      } catch (error) {
        // Two first heartbeats at once: the document exists now, so the second try updates it.
        if (!isDuplicateKeyError(error)) throw error;
        await write();
      }
    });
  }

  async listNodes(seenSince: number): Promise<NodeRecord[]> {
    return this.#run('listNodes', async ({ nodes }) =>
      (await nodes.find({ seenAt: { $gte: seenSince } }).sort({ _id: 1 }).toArray()).map(nodeFromDoc),
    );
  }

  async removeNode(id: string): Promise<void> {
    return this.#run('removeNode', async ({ nodes }) => {
      await nodes.deleteOne({ _id: id });
    });
  }

  // Leases

  /**
   * Three steps, none needing a transaction: read the slots' leases; renew the
   * owner's own (live or lapsed, epoch kept) in one update; take the free or
   * expired ones of others in one unordered bulk of conditional upserts
   * (epoch + 1). An upsert that loses a race fails on the duplicate `_id` and
   * means "not taken". Then read back what the owner holds.
   */
  async acquireLeases(request: LeaseRequest): Promise<SlotLease[]> {
    const { owner, slots, now, leaseMs } = request;
    if (slots.length === 0) return [];
    const held = await this.#run('acquireLeases', async ({ leases }) => {
      const until = now + leaseMs;
      const current = await leases.find({ _id: { $in: [...slots] } }).toArray();
      if (current.some((lease) => lease.owner === owner)) {
        await leases.updateMany(renewLeasesFilter(owner, slots), renewLeasesUpdate(until));
      }
      const take = slotsToTake(slots, current, owner, now);
      if (take.length > 0) {
        const ops: AnyBulkWriteOperation<LeaseDoc>[] = take.map((slot) => ({
          updateOne: { filter: takeLeaseFilter(owner, slot, now), update: takeLeaseUpdate(owner, until), upsert: true },
        }));
        try {
          await leases.bulkWrite(ops, { ordered: false });
        } catch (error) {
          if (!onlyDuplicateKeys(error)) throw error;
        }
      }
      return (await leases.find(liveLeasesFilter(owner, now, slots)).sort({ _id: 1 }).toArray()).map(leaseFromDoc);
    });
    const granted = new Set(this.#granted.get(owner) ?? []);
    for (const slot of slots) granted.delete(slot);
    for (const lease of held) granted.add(lease.slot);
    this.#grant(owner, granted);
    return held;
  }

  async releaseLeases(owner: string, slots: readonly number[]): Promise<void> {
    if (slots.length === 0) return;
    await this.#run('releaseLeases', async ({ leases }) => {
      await leases.updateMany(releaseLeasesFilter(owner, slots), RELEASE_LEASES_UPDATE);
    });
    const granted = new Set(this.#granted.get(owner) ?? []);
    for (const slot of slots) granted.delete(slot);
    this.#grant(owner, granted);
  }

  /** Leases that have an owner, expired or not; released slots are left out. */
  async listLeases(): Promise<SlotLease[]> {
    return this.#run('listLeases', async ({ leases }) =>
      (await leases.find({ owner: { $ne: null } }).sort({ _id: 1 }).toArray()).map(leaseFromDoc),
    );
  }

  // Deliveries

  /**
   * 1. The owner's live slots and their epochs.
   * 2. The busy endpoints among claimable deliveries, each with its earliest
   *    due time (one `$group`); only enabled endpoints, and only those whose
   *    earliest is among the `limit` earliest, can contribute.
   * 3. Each of those endpoints' first `perEndpointLimit` claimable deliveries
   *    (indexed queries, in parallel); then the earliest due overall, up to `limit`.
   * 4. One unordered bulk of conditional updates claims them, each stamped
   *    with this claim's id; reading that id back gives exactly what was won.
   */
  async claimDue(request: ClaimRequest): Promise<DeliveryJob[]> {
    const { owner, now } = request;
    const limit = Math.floor(request.limit);
    const perEndpoint = Math.floor(request.perEndpointLimit);
    if (limit <= 0 || perEndpoint <= 0) return [];
    return this.#run('claimDue', async (state) => {
      const { leases, deliveries, endpoints } = state;
      const owned: OwnedSlot[] = (await leases.find(liveLeasesFilter(owner, now)).toArray()).map((l) => ({ slot: l._id, epoch: l.epoch }));
      if (owned.length === 0) return [];
      const bySlot = new Map(owned.map((o) => [o.slot, o]));

      const busy = await deliveries
        .aggregate<{ _id: { endpointId: string; slot: number }; first: number }>([
          { $match: claimableFilter(owned, request) },
          { $group: { _id: { endpointId: '$endpointId', slot: '$slot' }, first: { $min: '$nextAttemptAt' } } },
        ])
        .toArray();
      if (busy.length === 0) return [];
      const endpointIds = [...new Set(busy.map((b) => b._id.endpointId))];
      const enabled = new Set(
        (await endpoints.find({ _id: { $in: endpointIds }, status: 'enabled' }, { projection: { _id: 1 } }).toArray()).map((e) => e._id),
      );
      const worth = endpointsWorthClaiming(
        busy.filter((b) => enabled.has(b._id.endpointId)).map((b) => ({ endpointId: b._id.endpointId, slot: b._id.slot, first: b.first })),
        limit,
      );
      const lists = await Promise.all(
        worth.map(async (w): Promise<ClaimCandidate[]> => {
          const slot = bySlot.get(w.slot);
          if (slot === undefined) return [];
          const docs = await deliveries
            .find(endpointClaimableFilter(w.endpointId, slot, now), { projection: { _id: 1, endpointId: 1, slot: 1, nextAttemptAt: 1 } })
            .sort({ nextAttemptAt: 1, _id: 1 })
            .limit(perEndpoint)
            .toArray();
          return docs.map((d) => ({ _id: d._id, endpointId: d.endpointId, slot: d.slot, nextAttemptAt: d.nextAttemptAt }));
        }),
      );
      return this.#claimCandidates(state, pickClaims(lists.flat(), perEndpoint, limit), bySlot, now);
    });
  }

  /**
   * The owner's live leases among the endpoints' slots, the enabled endpoints
   * among them, each one's first `limit` pending due deliveries (indexed
   * queries, in parallel); then claimed as `claimDue` claims.
   */
  async claimForEndpoints(request: EndpointClaimRequest): Promise<DeliveryJob[]> {
    const { owner, now } = request;
    const wanted = request.endpoints.filter((want) => want.limit >= 1);
    if (wanted.length === 0) return [];
    const slotCount = this.#slotCount;
    return this.#run('claimForEndpoints', async (state) => {
      const slots = [...new Set(wanted.map((want) => slotOf(want.endpointId, slotCount)))];
      const owned = (await state.leases.find(liveLeasesFilter(owner, now, slots)).toArray()).map((l) => ({ slot: l._id, epoch: l.epoch }));
      if (owned.length === 0) return [];
      const bySlot = new Map(owned.map((o) => [o.slot, o]));
      const enabled = new Set(
        (
          await state.endpoints
            .find({ _id: { $in: wanted.map((want) => want.endpointId) }, status: 'enabled' }, { projection: { _id: 1 } })
            .toArray()
        ).map((e) => e._id),
      );
      const lists = await Promise.all(
        wanted.map(async ({ endpointId, limit }): Promise<ClaimCandidate[]> => {
          const slot = bySlot.get(slotOf(endpointId, slotCount));
          if (slot === undefined || !enabled.has(endpointId)) return [];
          const docs = await state.deliveries
            .find(endpointDueFilter(endpointId, slot, now), { projection: { _id: 1, endpointId: 1, slot: 1, nextAttemptAt: 1 } })
            .sort({ nextAttemptAt: 1, _id: 1 })
            .limit(Math.floor(limit))
            .toArray();
          return docs.map((d) => ({ _id: d._id, endpointId: d.endpointId, slot: d.slot, nextAttemptAt: d.nextAttemptAt }));
        }),
      );
      return this.#claimCandidates(state, lists.flat(), bySlot, now);
    });
  }

  /**
   * One unordered bulk of conditional updates claims the candidates, each
   * stamped with this claim's id; reading that id back gives exactly what was won.
   */
  async #claimCandidates(
    { deliveries, events }: OpenState,
    candidates: readonly ClaimCandidate[],
    bySlot: ReadonlyMap<number, OwnedSlot>,
    now: number,
  ): Promise<DeliveryJob[]> {
    if (candidates.length === 0) return [];
    const claimId = new ObjectId();
    const ops: AnyBulkWriteOperation<DeliveryDoc>[] = [];
    for (const candidate of candidates) {
      const slot = bySlot.get(candidate.slot);
      if (slot === undefined) continue;
      ops.push({ updateOne: { filter: claimOneFilter(candidate, slot, now), update: claimUpdate(slot.epoch, now, claimId) } });
    }
    if (ops.length === 0) return [];
    await deliveries.bulkWrite(ops, { ordered: false });
    const won = (await deliveries.find({ claimId }).toArray()).sort(byDueThenId);
    if (won.length === 0) return [];

    const eventIds = [...new Set(won.map((d) => d.eventId))];
    const found = new Map((await events.find({ _id: { $in: eventIds } }).toArray()).map((e) => [e._id, eventFromDoc(e)]));
    const jobs: DeliveryJob[] = [];
    for (const doc of won) {
      const event = found.get(doc.eventId);
      if (event === undefined) {
        // A claimed delivery whose event is gone (deleted by hand) can never be sent.
        await deliveries.updateOne({ _id: doc._id, claimId }, { $set: { status: 'cancelled', lastError: 'event missing', updatedAt: now } });
        continue;
      }
      jobs.push({ delivery: deliveryFromDoc(doc), event });
    }
    return jobs;
  }

  /**
   * One transaction for the whole batch. The deliveries and their slots'
   * leases are read first (snapshot), each settlement is fenced on them
   * ({@link isCurrentClaim}), then written with an update conditional on the
   * claim. Attempt numbers are the store's count of attempts in the round
   * after this one, so they stay right even if the engine's copy was stale.
   */
  async settle(settlements: readonly Settlement[], now: number): Promise<SettleResult> {
    if (settlements.length === 0) return { applied: [], fenced: [] };
    return this.#run('settle', (state) =>
      this.#transaction(state, async (session) => {
        const applied: string[] = [];
        const fenced: string[] = [];
        const ids = [...new Set(settlements.map((s) => s.deliveryId))];
        const docs = new Map((await state.deliveries.find({ _id: { $in: ids } }, { session }).toArray()).map((d) => [d._id, d]));
        const slots = [...new Set([...docs.values()].map((d) => d.slot))];
        const leases = new Map((await state.leases.find({ _id: { $in: slots } }, { session }).toArray()).map((l) => [l._id, l]));
        for (const settlement of settlements) {
          const id = settlement.deliveryId;
          const doc = docs.get(id);
          if (!isCurrentClaim(doc, doc === undefined ? undefined : leases.get(doc.slot), settlement.epoch)) {
            fenced.push(id);
            continue;
          }
          const updated = await state.deliveries.findOneAndUpdate(settleFilter(settlement), settleUpdate(settlement, now), {
            session,
            returnDocument: 'after',
          });
          if (updated === null) {
            fenced.push(id);
            continue;
          }
          docs.set(id, updated);
          applied.push(id);
          if (settlement.kind === 'release') continue;
          await state.attempts.insertOne(attemptToDoc(id, settlement.attempt, updated.attempts, updated.round), { session });
          if (settlement.kind === 'delivered') {
            await state.endpoints.updateOne(clearFailingFilter(updated.endpointId), CLEAR_FAILING_UPDATE, { session });
            continue;
          }
          await state.endpoints.updateOne(markFailingFilter(updated.endpointId), markFailingUpdate(settlement.attempt.startedAt), { session });
          if (settlement.kind === 'dead') {
            const event = await state.events.findOne({ _id: updated.eventId }, { session });
            if (event === null) {
              throw new StoreError(`mongodb: cannot dead-letter delivery '${id}': its event '${updated.eventId}' is missing`);
            }
            await state.deadLetters.insertOne(
              {
                _id: settlement.deadLetterId,
                deliveryId: id,
                eventId: updated.eventId,
                endpointId: updated.endpointId,
                tenantId: updated.tenantId,
                eventType: updated.eventType,
                payload: event.payload,
                reason: settlement.reason,
                lastOutcome: settlement.attempt.outcome,
                round: updated.round,
                createdAt: now,
                replayedAt: null,
                ord: new ObjectId(),
                at: new Date(now),
              },
              { session },
            );
          }
        }
        return { applied, fenced };
      }),
    );
  }

  async getDelivery(id: string): Promise<Delivery | undefined> {
    return this.#run('getDelivery', async ({ deliveries }) => {
      const doc = await deliveries.findOne({ _id: id });
      return doc === null ? undefined : deliveryFromDoc(doc);
    });
  }

  async listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    const limit = clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT);
    if (limit === 0) return [];
    return this.#run('listDeliveries', async ({ deliveries }) =>
      (await deliveries.find(deliveryListFilter(filter)).sort(DELIVERY_LIST_SORT).limit(limit).toArray()).map(deliveryFromDoc),
    );
  }

  async listAttempts(deliveryId: string): Promise<Attempt[]> {
    return this.#run('listAttempts', async ({ attempts }) =>
      (await attempts.find({ deliveryId }).sort({ round: 1, number: 1, _id: 1 }).toArray()).map(attemptFromDoc),
    );
  }

  async countDeliveries(): Promise<Readonly<Record<DeliveryStatus, number>>> {
    return this.#run('countDeliveries', async ({ deliveries }) => {
      const found = await deliveries.aggregate<{ _id: unknown; n: number }>([{ $group: { _id: '$status', n: { $sum: 1 } } }]).toArray();
      return countsByStatus(Object.values(Status), found);
    });
  }

  async nextDueAt(): Promise<number | undefined> {
    return this.#run('nextDueAt', async ({ deliveries, endpoints }) => {
      const disabled = await endpoints.distinct('_id', { status: { $ne: 'enabled' } });
      const [next] = await deliveries
        .find({ status: 'pending', endpointId: { $nin: disabled } }, { projection: { nextAttemptAt: 1 } })
        .sort({ nextAttemptAt: 1 })
        .limit(1)
        .toArray();
      return next?.nextAttemptAt;
    });
  }

  // Dead letters

  /** A dead letter's attempts are those of the round that died; earlier rounds have their own dead letters. */
  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    return this.#run('getDeadLetter', async (state) => {
      const doc = await state.deadLetters.findOne({ _id: id });
      if (doc === null) return undefined;
      return (await this.#withAttempts(state, [doc]))[0];
    });
  }

  async listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    const limit = clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT);
    if (limit === 0) return [];
    return this.#run('listDeadLetters', async (state) => {
      const docs = await state.deadLetters.find(deadLetterListFilter(filter)).sort(DEAD_LETTER_LIST_SORT).limit(limit).toArray();
      return this.#withAttempts(state, docs);
    });
  }

  /**
   * By filter, every match is replayed (`limit` and `includeReplayed` are
   * ignored), `CHUNK` per transaction. Dead letters whose endpoint has been
   * deleted are skipped (their delivery would wait forever).
   */
  async replayDeadLetters(selection: { readonly ids: readonly string[] } | DeadLetterFilter, now: number): Promise<string[]> {
    return this.#run('replayDeadLetters', async (state) => {
      const replayed: string[] = [];
      const replay = (rows: readonly DeadLetterDoc[]) =>
        this.#transaction(state, async (session) => {
          const done: string[] = [];
          const endpointIds = [...new Set(rows.map((r) => r.endpointId))];
          const existing = new Set(
            (await state.endpoints.find({ _id: { $in: endpointIds } }, { session, projection: { _id: 1 } }).toArray()).map((e) => e._id),
          );
          for (const row of rows) {
            if (!existing.has(row.endpointId)) continue;
            const moved = await state.deliveries.updateOne(replayDeliveryFilter(row.deliveryId), replayDeliveryUpdate(now), { session });
            if (moved.modifiedCount === 0) continue;
            await state.deadLetters.updateOne({ _id: row._id }, { $set: { replayedAt: now } }, { session });
            done.push(row._id);
          }
          return done;
        });
      if ('ids' in selection) {
        for (let i = 0; i < selection.ids.length; i += CHUNK) {
          const ids = [...new Set(selection.ids.slice(i, i + CHUNK))];
          const rows = await state.deadLetters.find({ _id: { $in: ids }, replayedAt: null }).sort({ createdAt: 1, _id: 1 }).toArray();
          if (rows.length > 0) replayed.push(...(await replay(rows)));
        }
        return replayed;
      }
      // Keyset pagination: skipped rows stay unreplayed, so "the next unreplayed ones" would loop forever.
      const base = deadLetterListFilter({ ...selection, includeReplayed: false });
      let after: { createdAt: number; id: string } | undefined;
      for (;;) {
        const rows = await state.deadLetters
          .find({ $and: [base, afterKeyFilter(after)] })
          .sort({ createdAt: 1, _id: 1 })
          .limit(CHUNK)
          .toArray();
        if (rows.length > 0) replayed.push(...(await replay(rows)));
        const last = rows.at(-1);
        if (rows.length < CHUNK || last === undefined) return replayed;
        after = { createdAt: last.createdAt, id: last._id };
      }
    });
  }

  // Retention

  /**
   * The TTL indexes delete old attempts and dead letters on their own; this
   * deletes them too (for a horizon other than the TTL's, and at once), then
   * the fanned-out events older than the horizon whose deliveries are all
   * finished before it and that no unreplayed dead letter needs, with their
   * deliveries, `CHUNK` events per transaction.
   */
  async purge(before: number): Promise<PurgeResult> {
    return this.#run('purge', async (state) => {
      const attempts = (await state.attempts.deleteMany({ startedAt: { $lt: before } })).deletedCount;
      const deadLetters = (await state.deadLetters.deleteMany({ createdAt: { $lt: before } })).deletedCount;
      let events = 0;
      let after: string | undefined;
      for (;;) {
        const batch = await state.events
          .find(
            { createdAt: { $lt: before }, fannedOut: true, ...(after === undefined ? {} : { _id: { $gt: after } }) },
            { projection: { _id: 1 } },
          )
          .sort({ _id: 1 })
          .limit(CHUNK)
          .toArray();
        const last = batch.at(-1);
        if (last === undefined) break;
        after = last._id;
        const ids = batch.map((e) => e._id);
        const blocked = new Set([
          ...(await state.deliveries.distinct('eventId', unfinishedDeliveriesFilter(ids, before))),
          ...(await state.deadLetters.distinct('eventId', { eventId: { $in: ids }, replayedAt: null })),
        ]);
        const purgeable = ids.filter((id) => !blocked.has(id));
        if (purgeable.length > 0) {
          events += await this.#transaction(state, async (session) => {
            await state.deliveries.deleteMany({ eventId: { $in: purgeable } }, { session });
            return (await state.events.deleteMany({ _id: { $in: purgeable } }, { session })).deletedCount;
          });
        }
        if (batch.length < CHUNK) break;
      }
      return { attempts, deadLetters, events };
    });
  }

  async #withAttempts(state: OpenState, docs: readonly DeadLetterDoc[]): Promise<DeadLetter[]> {
    if (docs.length === 0) return [];
    const deliveryIds = [...new Set(docs.map((d) => d.deliveryId))];
    const all = await state.attempts.find({ deliveryId: { $in: deliveryIds } }).sort({ deliveryId: 1, round: 1, number: 1, _id: 1 }).toArray();
    return docs.map((doc) =>
      deadLetterFromDoc(
        doc,
        all.filter((a) => a.deliveryId === doc.deliveryId && a.round === doc.round),
      ),
    );
  }

  #grant(owner: string, slots: ReadonlySet<number>): void {
    this.#granted.set(owner, slots);
    this.#feed?.setSlots(this.#feedSlots());
  }

  /** The feed's slot filter: pinned slots, else those granted to owners through this store, else all. */
  #feedSlots(): readonly number[] | undefined {
    if (this.#pinnedSlots !== undefined) return this.#pinnedSlots;
    if (this.#granted.size === 0) return undefined;
    const union = new Set<number>();
    for (const slots of this.#granted.values()) for (const slot of slots) union.add(slot);
    return [...union];
  }

  async #open(): Promise<OpenState> {
    let uri = this.#uri;
    let client: MongoClient | undefined;
    try {
      if (this.#embedded !== undefined) {
        this.#server = await this.#embedded();
        uri = this.#server.uri;
      }
      if (uri === undefined) throw new ValidationError('uri', 'is required');
      const info = parseMongoUri(uri);
      client = new MongoClient(uri, {
        writeConcern: { w: 'majority' },
        serverSelectionTimeoutMS: this.#serverSelectionTimeoutMs,
        appName: 'herald',
      });
      await client.connect();
      const admin = client.db('admin');
      const hello = await admin.command({ hello: 1 }).catch(async (error: unknown) => {
        // Servers before 4.4.2 (and 4.2.10, 4.0.21) know only the legacy name.
        if (serverErrorCode(error) === COMMAND_NOT_FOUND) return admin.command({ isMaster: 1 });
        throw error;
      });
      const buildInfo = await admin.command({ buildInfo: 1 });
      const check = checkServerSupport({ hello, buildInfo });
      if (!check.ok) throw new StoreError(`mongodb: ${redactMongoUri(uri)}: ${check.problem}`);
      const db = client.db(this.#dbName ?? info.dbName);
      await ensureSchema(db, { retentionMs: this.#retentionMs });
      return {
        client,
        db,
        support: check.support,
        meta: db.collection<MetaDoc>(Collections.META),
        endpoints: db.collection<EndpointDoc>(Collections.ENDPOINTS),
        events: db.collection<EventDoc>(Collections.EVENTS),
        deliveries: db.collection<DeliveryDoc>(Collections.DELIVERIES),
        attempts: db.collection<AttemptDoc>(Collections.ATTEMPTS),
        deadLetters: db.collection<DeadLetterDoc>(Collections.DEAD_LETTERS),
        leases: db.collection<LeaseDoc>(Collections.LEASES),
        nodes: db.collection<NodeDoc>(Collections.NODES),
      };
    } catch (error) {
      await client?.close().catch(() => undefined);
      const server = this.#server;
      this.#server = undefined;
      await server?.stop().catch(() => undefined);
      if (error instanceof HeraldError) throw error;
      const where = uri === undefined ? 'the embedded server' : redactMongoUri(uri);
      throw new StoreError(`mongodb: cannot open ${where}: ${redactMongoUri(messageOf(error))}`, { cause: error });
    }
  }

  #ready(): OpenState {
    if (this.#closed) throw new ClosedError('MongoStore');
    if (this.#state === undefined) throw new StoreError('MongoStore: call init() before using the store');
    return this.#state;
  }

  /** Runs one port operation, turning driver errors into `StoreError`s that name it. */
  async #run<T>(operation: string, fn: (state: OpenState) => Promise<T>): Promise<T> {
    const state = this.#ready();
    try {
      return await fn(state);
    } catch (error) {
      if (error instanceof HeraldError) throw error;
      if (this.#closed) throw new ClosedError('MongoStore');
      throw new StoreError(`mongodb: ${operation} failed: ${redactMongoUri(messageOf(error))}`, { cause: error });
    }
  }

  /** Runs `fn` in a transaction (retried by the driver on transient errors); `fn` must pass the session on. */
  async #transaction<T>(state: OpenState, fn: (session: ClientSession) => Promise<T>): Promise<T> {
    const session = state.client.startSession();
    try {
      return await session.withTransaction(fn, TRANSACTION);
    } finally {
      await session.endSession();
    }
  }
}

/** "CommandNotFound". */
const COMMAND_NOT_FOUND = 59;

function warnRestart(restart: ChangeFeedRestart): void {
  const why = restart.error === undefined ? '' : `: ${redactMongoUri(messageOf(restart.error))}`;
  process.emitWarning(
    `mongodb change feed restarted (${restart.reason}, restart ${restart.restarts}, ${restart.resumed ? 'resuming from its token' : 'from now, after a sweep'})${why}`,
    { code: 'HERALD_CHANGE_FEED_RESTART' },
  );
}
