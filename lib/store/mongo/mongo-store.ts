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
 * `dead-letters.ts`, `delivery-minutes.ts`, `retention.ts`); the client, the
 * transactions and the error mapping are `connection.ts`'s, the change feed
 * and the owned slots `work-signal.ts`'s.
 *
 * The work signal is a change stream (`work-signal.ts`), started by the first
 * `watch()` and stopped with the last. Delivery inserts are filtered on the
 * server to the slots this process owns: by default the slots this store has
 * granted through `acquireLeases` (and not released), or those given to
 * {@link MongoStore.setOwnedSlots}. Events and deliveries this store inserts
 * carry its `origin` and are not signalled back to it.
 */
import { randomBytes } from 'node:crypto';
import type { Clock } from '../../clock.ts';
import { ValidationError } from '../../errors.ts';
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
import type { TriageOutcome } from '../triage.ts';
import { claimDue, claimForEndpoints, UnsentClaims } from './claims.ts';
import { MongoConnection, type OpenState } from './connection.ts';
import type { FailureGroup, FailureGroupFilter, FailureGroupKey, FailureGroupReplay } from '../failure-groups.ts';
import { failureGroups, replayFailureGroup } from './failure-groups.ts';
import { countReplayableDeadLetters, getDeadLetter, listDeadLetters, replayableDeadLetterPage, replayDeadLetters, triageDeadLetters, unreviewedDeadLetters } from './dead-letters.ts';
import { countDeliveries, getDelivery, listAttempts, listDeliveries, listDeliveriesAfterSequence, nextDueAt } from './delivery-log.ts';
import type { StartEmbeddedServer } from './embedded-server.ts';
import { endpointChangesAfter, lastEndpointChange } from './endpoint-changes.ts';
import { createEndpoint, deleteEndpoint, getEndpoint, listEndpoints, resumeDeliveries, tenantExists, updateEndpoint } from './endpoints.ts';
import { appendEvents, countUnfannedEvents, fanOutBatch, getEvent, recordFanOuts, unfannedEvents } from './fan-out.ts';
import { acquireLeases, countOpenBySlot, fixSlotCount, getSlotWeights, heartbeat, listLeases, listNodes, putSlotWeights, releaseLeases, removeNode, serverTime } from './leases.ts';
import { parseMongoUri } from './mongo-uri.ts';
import { clampLimit, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT } from '../list-limit.ts';
import { purge, purgeDeliveryMinutes } from './retention.ts';
import { addDeliveryMinutes, deliveryMinutes, deliveryTotals } from './delivery-minutes.ts';
import type { DeliveryMinute, DeliveryMinuteIncrement, DeliveryMinutesQuery, EndpointDeliveryTotals } from '../delivery-minutes.ts';
import type { EventType, EventTypeCatalog, EventTypePatch } from '../event-type-port.ts';
import type { ServerSupport } from './server-check.ts';
import { checkSlotCount } from '../slot-count.ts';
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
import { createEventType, deleteEventType, getEventType, listEventTypes, readCatalog, readCatalogVersion, updateEventType } from './event-types.ts';
import { settle } from './settle.ts';
import { MongoWorkSignal } from './work-signal.ts';
import type { MongoWorkSignalOptions } from './work-signal-options.ts';

const MINUTE = 60 * 1_000;
const DAY = 24 * 60 * MINUTE;

/** The change feed's options are the work signal's (`MongoWorkSignalOptions`). */
export interface MongoStoreOptions extends MongoWorkSignalOptions {
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
   * How long `init()` and each operation wait for a suitable server.
   * @default 10000
   */
  readonly serverSelectionTimeoutMs?: number;
}

const DEFAULTS = Object.freeze({
  retentionMs: 30 * DAY,
  serverSelectionTimeoutMs: 10_000,
} satisfies Required<Omit<MongoStoreOptions, 'uri' | 'embedded' | 'dbName' | 'clock' | keyof MongoWorkSignalOptions>>);

export class MongoStore implements Store {
  readonly #clock: Clock;
  readonly #connection: MongoConnection;
  /** Fixed by the first `init()` on this data; deliveries' slots are derived from it. */
  #slotCount = 0;
  /** Marks what this store inserts (events, deliveries), so its own change feed skips it. */
  readonly #origin = randomBytes(12).toString('hex');
  /** Claims that failed after their bulk write, given back before the next claim (`claims.ts`). */
  readonly #unsentClaims = new UnsentClaims();
  readonly #signal: MongoWorkSignal;

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
    this.#clock = options.clock;
    // The work signal checks its options before serverSelectionTimeoutMs is, as they are listed.
    this.#signal = new MongoWorkSignal({ ...options, origin: this.#origin });
    const serverSelectionTimeoutMs = options.serverSelectionTimeoutMs ?? DEFAULTS.serverSelectionTimeoutMs;
    if (!Number.isInteger(serverSelectionTimeoutMs) || serverSelectionTimeoutMs < 1) {
      throw new ValidationError('serverSelectionTimeoutMs', `must be an integer of at least 1 (got ${String(serverSelectionTimeoutMs)})`);
    }
    this.#connection = new MongoConnection({
      uri: options.uri,
      embedded: options.embedded,
      dbName: options.dbName,
      retentionMs,
      serverSelectionTimeoutMs,
      origin: this.#origin,
    });
  }

  /** Change-feed restarts since the store opened (lost tokens, invalidations, errors). */
  get changeFeedRestarts(): number {
    return this.#signal.restarts;
  }

  /** What the server is, once `init()` has run. */
  get serverSupport(): ServerSupport | undefined {
    return this.#connection.serverSupport;
  }

  /**
   * Filters the change feed's delivery inserts to these slots (the ones this
   * process owns), overriding what the store learned from `acquireLeases`;
   * `undefined` goes back to that. Reopens the stream from its current token
   * when the set changes; nothing is missed.
   */
  setOwnedSlots(slots: readonly number[] | undefined): void {
    this.#signal.setOwnedSlots(slots);
  }

  /** Resolves once the change stream is open (changes committed from then on are signalled). */
  whenChangeFeedReady(): Promise<void> {
    return this.#signal.whenReady();
  }

  async init(options: { readonly slotCount: number }): Promise<{ readonly slotCount: number }> {
    const wanted = checkSlotCount(options.slotCount);
    await this.#connection.open();
    return this.#run('init', async (state) => {
      // The first start fixes the slot count for the data: endpoints hash into it forever after.
      this.#slotCount = await fixSlotCount(state, wanted);
      return { slotCount: this.#slotCount };
    });
  }

  async close(): Promise<void> {
    if (this.#connection.closed) return;
    await this.#connection.close(async (state) => {
      await this.#signal.stop();
      // Claims that failed half way: the last chance to give them back before the slots change hands.
      if (state !== undefined) await this.#unsentClaims.retry(state, this.#clock.now());
    });
  }

  watch(listener: () => void): () => void {
    return this.#signal.watch(this.#connection.ready(), listener);
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
    this.#signal.granted(owner, slots, held.map((lease) => lease.slot));
    return held;
  }

  async releaseLeases(owner: string, slots: readonly number[]): Promise<void> {
    if (slots.length === 0) return;
    await this.#run('releaseLeases', (state) => releaseLeases(state, owner, slots));
    this.#signal.granted(owner, slots, []);
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

  // Event types (lib/store/event-type-port.ts): each write bumps the catalog version in its transaction

  async createEventType(type: EventType): Promise<void> {
    return this.#run('createEventType', (state) => createEventType(state, type));
  }

  async getEventType(name: string): Promise<EventType | undefined> {
    return this.#run('getEventType', (state) => getEventType(state, name));
  }

  async listEventTypes(): Promise<EventType[]> {
    return this.#run('listEventTypes', (state) => listEventTypes(state));
  }

  async updateEventType(name: string, patch: EventTypePatch, now: number): Promise<EventType | undefined> {
    return this.#run('updateEventType', (state) => updateEventType(state, name, patch, now));
  }

  async deleteEventType(name: string): Promise<boolean> {
    return this.#run('deleteEventType', (state) => deleteEventType(state, name));
  }

  async eventTypeCatalogVersion(): Promise<number> {
    return this.#run('eventTypeCatalogVersion', (state) => readCatalogVersion(state));
  }

  async eventTypeCatalog(): Promise<EventTypeCatalog> {
    return this.#run('eventTypeCatalog', (state) => readCatalog(state));
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

  /** Runs one port operation on the connection (`MongoConnection.run`). */
  #run<T>(operation: string, fn: (state: OpenState) => Promise<T>): Promise<T> {
    return this.#connection.run(operation, fn);
  }
}
