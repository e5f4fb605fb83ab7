/**
 * The MongoDB store: the Store port over the official driver, for a replica
 * set (or a sharded cluster) shared by every Herald process and by producers
 * publishing inside their own transactions.
 *
 *   created ──init()──► open ──close()──► closed
 *
 * `init()` connects, checks that the deployment offers change streams and
 * transactions (a replica set or sharded cluster on MongoDB 4.4+, see
 * `server-check.ts`) and
 * creates the collections and indexes (`schema.ts`). Methods other than
 * `init` and `close` reject with a `StoreError` before `init()` and with a
 * `ClosedError` after `close()`; driver errors become `StoreError`s naming
 * the operation, passwords redacted.
 *
 * Writes use majority write concern. Every method that writes more than one
 * document atomically runs in one transaction (snapshot reads, majority
 * commit): fan-out, settle, replay (per chunk), purge (per chunk). Claims
 * need none: each delivery is claimed by its own conditional update in one
 * unordered bulk write, and the lease epoch fences the rest (a claim that
 * fails half way is given back: `claims.ts`). Deleting an endpoint needs none
 * either, and must not have one: its backlog is cancelled in chunks after
 * the endpoint is gone (`endpoints.ts`).
 *
 * Each concern's queries and writes live in a module of its own, as
 * functions over the open collections (`endpoints.ts`, `fan-out.ts`,
 * `leases.ts`, `claims.ts`, `settle.ts`, `delivery-log.ts`,
 * `dead-letters.ts`, `delivery-minutes.ts`, `retention.ts`); this class keeps the connection, the
 * transactions, the error mapping, the change feed and the owned slots.
 *
 * The work signal is a change stream (`change-feed.ts`), started by the first
 * `watch()` and stopped with the last. Delivery inserts are filtered on the
 * server to the slots this process owns: by default the slots this store has
 * granted through `acquireLeases` (and not released), or those given to
 * {@link MongoStore.setOwnedSlots}. Events and deliveries this store inserts
 * carry its `origin` and are not signalled back to it.
 */
import { hostname } from 'node:os';
import type { ClientSession, Db, Document, MongoClient, TransactionOptions } from 'mongodb';
import type { Clock } from '../../clock.ts';
import { ClosedError, HeraldError, StoreError, ValidationError } from '../../errors.ts';
import type { Attempt, DeadLetter, Delivery, DeliveryJob, DeliveryStatus, Endpoint, OutboxEvent, ReplayJobRecord, TenantToken } from '../../model.ts';
import type {
  ReplayableDeadLetter,
  ReplayJobEnd,
  ReplayJobProgress,
  ClaimRequest,
  DeadLetterFilter,
  DeliveryFilter,
  EndpointChange,
  EndpointClaimRequest,
  EndpointPatch,
  FanOut,
  FanOutClaim,
  LeaseRequest,
  NodeHeartbeat,
  NodeRecord,
  PurgeResult,
  SettleResult,
  Settlement,
  SlotLease,
  SlotOpenCount,
  SlotWeights,
  Store,
  TriageRequest,
  UnreviewedDeadLetters,
} from '../port.ts';
import type { TriageOutcome } from '../../dead-letters/triage.ts';
import { ChangeFeed } from './change-feed.ts';
import type { ChangeFeedRestart, ChangeStreamLike } from './change-feed.ts';
import { claimDue, claimForEndpoints, UnsentClaims } from './claims.ts';
import type { StoreDb } from './collections.ts';
import type { FailureGroup, FailureGroupFilter, FailureGroupKey, FailureGroupReplay } from '../../dead-letters/failure-groups.ts';
import { failureGroups, replayFailureGroup } from './failure-groups.ts';
import { countReplayableDeadLetters, getDeadLetter, listDeadLetters, replayableDeadLetterPage, replayDeadLetters, triageDeadLetters, unreviewedDeadLetters } from './dead-letters.ts';
import { countDeliveries, getDelivery, listAttempts, listDeliveries, listDeliveriesAfterSequence, nextDueAt } from './delivery-log.ts';
import type { EmbeddedServer, StartEmbeddedServer } from './embedded-server.ts';
import { endpointChangesAfter, lastEndpointChange } from './endpoint-changes.ts';
import { createEndpoint, deleteEndpoint, getEndpoint, listEndpoints, resumeDeliveries, tenantExists, updateEndpoint } from './endpoints.ts';
import { appendEvents, countUnfannedEvents, fanOutBatch, getEvent, recordFanOuts, unfannedEvents } from './fan-out.ts';
import { acquireLeases, countOpenBySlot, getSlotWeights, heartbeat, listLeases, listNodes, putSlotWeights, releaseLeases, removeNode, serverTime } from './leases.ts';
import { isDuplicateKeyError, isIncompatibleServerError, messageOf, MongoErrorCode, serverErrorCode } from './mongo-errors.ts';
import { loadMongoDriver, newObjectId } from './driver.ts';
import { EMBEDDED_MONGODB_SETTING, parseMongoUri, redactMongoUri } from './mongo-uri.ts';
import { clampLimit, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, staleResumeTokensFilter } from './queries.ts';
import { ResumeTokenKeeper } from './resume-tokens.ts';
import { purge, purgeDeliveryMinutes } from './retention.ts';
import { addDeliveryMinutes, deliveryMinutes, deliveryTotals } from './delivery-minutes.ts';
import type { DeliveryMinute, DeliveryMinuteIncrement, DeliveryMinutesQuery, EndpointDeliveryTotals } from '../../status/delivery-minutes.ts';
import { checkServerSupport, tooOldProblem } from './server-check.ts';
import type { ServerSupport } from './server-check.ts';
import { Collections, ensureSchema, MetaKeys } from './schema.ts';
import type {
  AttemptDoc,
  DeadLetterDoc,
  DeliveryDoc,
  DeliveryMinuteDoc,
  EndpointDoc,
  EndpointSequenceDoc,
  EventDoc,
  LeaseDoc,
  MetaDoc,
  NodeDoc,
  ReplayJobDoc,
  EndpointChangeDoc,
  TenantTokenDoc,
} from './schema.ts';
import {
  countLiveReplays,
  createReplayJob,
  endReplayJob,
  getReplayJob,
  leaseReplayJobs,
  listReplayJobs,
  releaseReplayJobs,
  saveReplayJobProgress,
} from './replay-jobs.ts';
import { createTenantToken, deleteTenantToken, getTenantToken, listTenantTokens } from './tenant-tokens.ts';
import { settle } from './settle.ts';

const MINUTE = 60 * 1_000;
const DAY = 24 * 60 * MINUTE;

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
   * The change feed's name, under which its resume token is kept in `meta`
   * (`resume_token:<key>`): each node its own, so nodes do not write one
   * document in turn nor resume from each other's position. Processes that
   * share a host give each its own key; a key not saved for a week is deleted.
   * @default the host name (`os.hostname()`)
   */
  readonly changeFeedKey?: string;
  /**
   * How long the server holds a change-stream `getMore` open waiting for changes.
   * @default 1000
   */
  readonly maxAwaitTimeMs?: number;
  /**
   * At most one resume-token write per this period after a change was signalled.
   * @default 1000
   */
  readonly resumeTokenSaveIntervalMs?: number;
  /**
   * At most one resume-token write per this period while nothing is signalled: the write is itself
   * a change the stream sees, so saving an idle token as often as a busy one writes once a second
   * forever. Keep it well inside the oplog's window.
   * @default 600000 (10 minutes)
   */
  readonly resumeTokenIdleSaveIntervalMs?: number;
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
  changeFeedKey: hostname() || 'default',
  maxAwaitTimeMs: 1_000,
  resumeTokenSaveIntervalMs: 1_000,
  resumeTokenIdleSaveIntervalMs: 10 * MINUTE,
  restartDelayMs: 1_000,
  maxRestartDelayMs: 30_000,
  serverSelectionTimeoutMs: 10_000,
  onChangeFeedRestart: warnRestart,
} satisfies Required<Omit<MongoStoreOptions, 'uri' | 'embedded' | 'dbName' | 'clock'>>);

const MAX_SLOT_COUNT = 65_536;
/** Resume-token documents of other keys not saved for this long are deleted (their feeds are gone). */
const STALE_RESUME_TOKEN_MS = 7 * DAY;

const TRANSACTION: TransactionOptions = Object.freeze({
  readConcern: { level: 'snapshot' as const },
  writeConcern: { w: 'majority' as const },
  readPreference: 'primary' as const,
});

/** The open client, and the collections and transaction runner the concern modules are given. */
interface OpenState extends StoreDb {
  readonly client: MongoClient;
  readonly db: Db;
  readonly support: ServerSupport;
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
  readonly #resumeTokenIdleSaveIntervalMs: number;
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
  /** Claims that failed after their bulk write, given back before the next claim (`claims.ts`). */
  readonly #unsentClaims = new UnsentClaims();

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
    this.#resumeTokenIdleSaveIntervalMs = positive(
      'resumeTokenIdleSaveIntervalMs',
      options.resumeTokenIdleSaveIntervalMs,
      DEFAULTS.resumeTokenIdleSaveIntervalMs,
      0,
    );
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
    // Claims that failed half way: the last chance to give them back before the slots change hands.
    if (state !== undefined) await this.#unsentClaims.retry(state, this.#clock.now());
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
          prune: async (savedBefore, keep) => {
            await state.meta.deleteMany(staleResumeTokensFilter(savedBefore, keep));
          },
        },
        {
          key: this.#changeFeedKey,
          saveIntervalMs: this.#resumeTokenSaveIntervalMs,
          idleSaveIntervalMs: this.#resumeTokenIdleSaveIntervalMs,
          staleAfterMs: STALE_RESUME_TOKEN_MS,
        },
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
          origin: state.origin,
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
    return this.#run('createEndpoint', (state) => createEndpoint(state, endpoint));
  }

  async getEndpoint(id: string): Promise<Endpoint | undefined> {
    return this.#run('getEndpoint', (state) => getEndpoint(state, id));
  }

  async endpointChangesAfter(after: number, limit: number): Promise<EndpointChange[]> {
    return this.#run('endpointChangesAfter', (state) => endpointChangesAfter(state, after, limit));
  }

  async lastEndpointChange(): Promise<number> {
    return this.#run('lastEndpointChange', (state) => lastEndpointChange(state));
  }

  async listEndpoints(filter?: { readonly tenantId?: string }): Promise<Endpoint[]> {
    return this.#run('listEndpoints', (state) => listEndpoints(state, filter));
  }

  async updateEndpoint(id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
    return this.#run('updateEndpoint', (state) => updateEndpoint(state, id, patch, now));
  }

  async deleteEndpoint(id: string, now: number): Promise<boolean> {
    return this.#run('deleteEndpoint', (state) => deleteEndpoint(state, id, now));
  }

  async resumeDeliveries(endpointId: string, now: number): Promise<number> {
    return this.#run('resumeDeliveries', (state) => resumeDeliveries(state, endpointId, now));
  }

  async tenantExists(tenantId: string): Promise<boolean> {
    return this.#run('tenantExists', (state) => tenantExists(state, tenantId));
  }

  // Outbox

  /** Idempotent: an event whose id is already stored is left as it is. One transaction for the batch. */
  async appendEvents(events: readonly OutboxEvent[]): Promise<void> {
    if (events.length === 0) return;
    return this.#run('appendEvents', (state) => appendEvents(state, events));
  }

  async unfannedEvents(limit: number, exceptTenantIds?: readonly string[]): Promise<OutboxEvent[]> {
    const n = clampLimit(limit, Number.MAX_SAFE_INTEGER);
    if (n === 0) return [];
    return this.#run('unfannedEvents', (state) => unfannedEvents(state, n, exceptTenantIds));
  }

  async countUnfannedEvents(cap: number): Promise<number> {
    const n = clampLimit(cap, Number.MAX_SAFE_INTEGER);
    if (n === 0) return 0;
    return this.#run('countUnfannedEvents', (state) => countUnfannedEvents(state, n));
  }

  async recordFanOuts(fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]> {
    if (fanOuts.length === 0) return [];
    const batch = fanOutBatch(fanOuts, claim);
    return this.#run('recordFanOuts', (state) => recordFanOuts(state, batch, now, claim));
  }

  async getEvent(id: string): Promise<OutboxEvent | undefined> {
    return this.#run('getEvent', (state) => getEvent(state, id));
  }

  // Membership

  async serverTime(): Promise<number | undefined> {
    return this.#run('serverTime', (state) => serverTime(state.db));
  }

  async heartbeat(node: NodeHeartbeat): Promise<void> {
    return this.#run('heartbeat', (state) => heartbeat(state, node));
  }

  async listNodes(seenSince: number): Promise<NodeRecord[]> {
    return this.#run('listNodes', (state) => listNodes(state, seenSince));
  }

  async removeNode(id: string): Promise<void> {
    return this.#run('removeNode', (state) => removeNode(state, id));
  }

  // Leases

  /** No transaction (see `leases.ts`); the slots held afterwards feed the change feed's default filter. */
  async acquireLeases(request: LeaseRequest): Promise<SlotLease[]> {
    const { owner, slots, now, leaseMs } = request;
    if (slots.length === 0) return [];
    const held = await this.#run('acquireLeases', (state) => acquireLeases(state, owner, slots, now, leaseMs));
    const granted = new Set(this.#granted.get(owner) ?? []);
    for (const slot of slots) granted.delete(slot);
    for (const lease of held) granted.add(lease.slot);
    this.#grant(owner, granted);
    return held;
  }

  async releaseLeases(owner: string, slots: readonly number[]): Promise<void> {
    if (slots.length === 0) return;
    await this.#run('releaseLeases', (state) => releaseLeases(state, owner, slots));
    const granted = new Set(this.#granted.get(owner) ?? []);
    for (const slot of slots) granted.delete(slot);
    this.#grant(owner, granted);
  }

  /** Leases that have an owner, expired or not; released slots are left out. */
  async listLeases(): Promise<SlotLease[]> {
    return this.#run('listLeases', (state) => listLeases(state));
  }

  async countOpenBySlot(now: number): Promise<SlotOpenCount[]> {
    return this.#run('countOpenBySlot', (state) => countOpenBySlot(state, now));
  }

  async getSlotWeights(): Promise<SlotWeights | undefined> {
    return this.#run('getSlotWeights', (state) => getSlotWeights(state));
  }

  async putSlotWeights(weights: SlotWeights): Promise<void> {
    return this.#run('putSlotWeights', (state) => putSlotWeights(state, weights));
  }

  // Deliveries

  /** How candidates are found and claimed: see `claims.ts`. */
  async claimDue(request: ClaimRequest): Promise<DeliveryJob[]> {
    const limit = Math.floor(request.limit);
    const perEndpoint = Math.floor(request.perEndpointLimit);
    if (limit <= 0 || perEndpoint <= 0) return [];
    return this.#run('claimDue', (state) => claimDue(state, request, limit, perEndpoint, this.#unsentClaims));
  }

  async claimForEndpoints(request: EndpointClaimRequest): Promise<DeliveryJob[]> {
    const { owner, now } = request;
    const wanted = request.endpoints.filter((want) => want.limit >= 1);
    if (wanted.length === 0) return [];
    const slotCount = this.#slotCount;
    return this.#run('claimForEndpoints', (state) => claimForEndpoints(state, owner, now, wanted, slotCount, this.#unsentClaims));
  }

  /** One transaction for the whole batch (fencing and attempt numbers: see `settle.ts`). */
  async settle(settlements: readonly Settlement[], now: number): Promise<SettleResult> {
    if (settlements.length === 0) return { applied: [], fenced: [] };
    return this.#run('settle', (state) => settle(state, settlements, now));
  }

  async getDelivery(id: string): Promise<Delivery | undefined> {
    return this.#run('getDelivery', (state) => getDelivery(state, id));
  }

  async listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    const limit = clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT);
    if (limit === 0) return [];
    return this.#run('listDeliveries', (state) => listDeliveries(state, filter, limit));
  }

  async listDeliveriesAfterSequence(endpointId: string, after: number, limit: number): Promise<Delivery[]> {
    const n = clampLimit(limit, MAX_LIST_LIMIT);
    if (n === 0) return [];
    return this.#run('listDeliveriesAfterSequence', (state) => listDeliveriesAfterSequence(state, endpointId, after, n));
  }

  async listAttempts(deliveryId: string): Promise<Attempt[]> {
    return this.#run('listAttempts', (state) => listAttempts(state, deliveryId));
  }

  async countDeliveries(): Promise<Readonly<Record<DeliveryStatus, number>>> {
    return this.#run('countDeliveries', (state) => countDeliveries(state));
  }

  async nextDueAt(): Promise<number | undefined> {
    return this.#run('nextDueAt', (state) => nextDueAt(state));
  }

  // Dead letters

  /** A dead letter's attempts are those of the round that died; earlier rounds have their own dead letters. */
  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    return this.#run('getDeadLetter', (state) => getDeadLetter(state, id));
  }

  async listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    const limit = clampLimit(filter.limit ?? DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT);
    if (limit === 0) return [];
    return this.#run('listDeadLetters', (state) => listDeadLetters(state, filter, limit));
  }

  /**
   * By filter, every match is replayed (`limit` and `includeReplayed` are
   * ignored), in chunks of a transaction each; dead letters whose endpoint
   * has been deleted are skipped (see `dead-letters.ts`).
   */
  async replayDeadLetters(selection: { readonly ids: readonly string[] } | DeadLetterFilter, now: number): Promise<string[]> {
    return this.#run('replayDeadLetters', (state) => replayDeadLetters(state, selection, now));
  }

  async triageDeadLetters(request: TriageRequest, now: number): Promise<TriageOutcome> {
    return this.#run('triageDeadLetters', (state) => triageDeadLetters(state, request, now));
  }

  async countReplayableDeadLetters(filter: DeadLetterFilter): Promise<number> {
    return this.#run('countReplayableDeadLetters', (state) => countReplayableDeadLetters(state, filter));
  }

  async replayableDeadLetterPage(
    filter: DeadLetterFilter,
    afterId: string | null,
    limit: number,
    exceptEndpointIds: readonly string[] = [],
  ): Promise<ReplayableDeadLetter[]> {
    return this.#run('replayableDeadLetterPage', (state) =>
      replayableDeadLetterPage(state, filter, afterId, clampLimit(limit, MAX_LIST_LIMIT), exceptEndpointIds),
    );
  }

  async countLiveReplays(endpointIds: readonly string[]): Promise<Readonly<Record<string, number>>> {
    if (endpointIds.length === 0) return {};
    return this.#run('countLiveReplays', (state) => countLiveReplays(state, endpointIds));
  }

  // Replay jobs

  async createReplayJob(job: ReplayJobRecord): Promise<void> {
    return this.#run('createReplayJob', (state) => createReplayJob(state, job));
  }

  async getReplayJob(id: string): Promise<ReplayJobRecord | undefined> {
    return this.#run('getReplayJob', (state) => getReplayJob(state, id));
  }

  async listReplayJobs(limit: number): Promise<ReplayJobRecord[]> {
    return this.#run('listReplayJobs', (state) => listReplayJobs(state, limit));
  }

  async leaseReplayJobs(owner: string, now: number, leaseUntil: number): Promise<ReplayJobRecord[]> {
    return this.#run('leaseReplayJobs', (state) => leaseReplayJobs(state, owner, now, leaseUntil));
  }

  async saveReplayJobProgress(id: string, owner: string, progress: ReplayJobProgress): Promise<boolean> {
    return this.#run('saveReplayJobProgress', (state) => saveReplayJobProgress(state, id, owner, progress));
  }

  async endReplayJob(id: string, owner: string | null, end: ReplayJobEnd): Promise<ReplayJobRecord | undefined> {
    return this.#run('endReplayJob', (state) => endReplayJob(state, id, owner, end));
  }

  async releaseReplayJobs(owner: string): Promise<void> {
    return this.#run('releaseReplayJobs', (state) => releaseReplayJobs(state, owner));
  }

  async unreviewedDeadLetters(cap: number): Promise<UnreviewedDeadLetters> {
    return this.#run('unreviewedDeadLetters', (state) => unreviewedDeadLetters(state, cap));
  }

  async failureGroups(filter: FailureGroupFilter): Promise<FailureGroup[]> {
    return this.#run('failureGroups', (state) => failureGroups(state, filter));
  }

  async replayFailureGroup(group: FailureGroupKey, now: number): Promise<FailureGroupReplay> {
    return this.#run('replayFailureGroup', (state) => replayFailureGroup(state, group, now));
  }

  // Tenant tokens

  async createTenantToken(token: TenantToken): Promise<void> {
    return this.#run('createTenantToken', (state) => createTenantToken(state, token));
  }

  async getTenantToken(id: string): Promise<TenantToken | undefined> {
    return this.#run('getTenantToken', (state) => getTenantToken(state, id));
  }

  async listTenantTokens(tenantId: string): Promise<TenantToken[]> {
    return this.#run('listTenantTokens', (state) => listTenantTokens(state, tenantId));
  }

  async deleteTenantToken(tenantId: string, id: string): Promise<boolean> {
    return this.#run('deleteTenantToken', (state) => deleteTenantToken(state, tenantId, id));
  }

  // Delivery minutes

  /** One bulk write of upserts in one transaction. */
  async addDeliveryMinutes(increments: readonly DeliveryMinuteIncrement[]): Promise<void> {
    if (increments.length === 0) return;
    return this.#run('addDeliveryMinutes', (state) => addDeliveryMinutes(state, increments));
  }

  async deliveryMinutes(query: DeliveryMinutesQuery): Promise<DeliveryMinute[]> {
    return this.#run('deliveryMinutes', (state) => deliveryMinutes(state, query));
  }

  async deliveryTotals(query: DeliveryMinutesQuery): Promise<EndpointDeliveryTotals[]> {
    return this.#run('deliveryTotals', (state) => deliveryTotals(state, query));
  }

  // Retention

  /** What goes and when: see `retention.ts` (the TTL indexes delete old attempts and dead letters too). */
  async purge(before: number): Promise<PurgeResult> {
    return this.#run('purge', (state) => purge(state, before));
  }

  async purgeDeliveryMinutes(before: number): Promise<number> {
    return this.#run('purgeDeliveryMinutes', (state) => purgeDeliveryMinutes(state, before));
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
    // Before anything starts: without the driver there is nothing to connect with.
    const driver = await loadMongoDriver({ key: 'store', value: uri === undefined ? EMBEDDED_MONGODB_SETTING : redactMongoUri(uri) });
    let client: MongoClient | undefined;
    try {
      if (this.#embedded !== undefined) {
        this.#server = await this.#embedded();
        uri = this.#server.uri;
      }
      if (uri === undefined) throw new ValidationError('uri', 'is required');
      const info = parseMongoUri(uri);
      client = new driver.MongoClient(uri, {
        writeConcern: { w: 'majority' },
        serverSelectionTimeoutMS: this.#serverSelectionTimeoutMs,
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
      const db = client.db(this.#dbName ?? info.dbName);
      await ensureSchema(db, { retentionMs: this.#retentionMs });
      // Marks what this store inserts (events, deliveries), so its own change feed skips it.
      return openState(client, db, check.support, newObjectId().toHexString());
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

function warnRestart(restart: ChangeFeedRestart): void {
  const why = restart.error === undefined ? '' : `: ${redactMongoUri(messageOf(restart.error))}`;
  process.emitWarning(
    `mongodb change feed restarted (${restart.reason}, restart ${restart.restarts}, ${restart.resumed ? 'resuming from its token' : 'from now, after a sweep'})${why}`,
    { code: 'HERALD_CHANGE_FEED_RESTART' },
  );
}
