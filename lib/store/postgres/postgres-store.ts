/**
 * The PostgreSQL store: the Store port over node-postgres, for a server
 * shared by every Herald process and by producers publishing inside their
 * own transactions (`publishPg`).
 *
 *   created ──init()──► open ──close()──► closed
 *
 * `init()` opens the pool and creates or migrates Herald's schema
 * (`schema.ts`). Methods other than `init` and `close` reject with a
 * `StoreError` before `init()` and with a `ClosedError` after `close()`;
 * driver errors become `StoreError`s naming the operation.
 *
 * Each concern's statements live in a module of their own (`endpoints.ts`,
 * `fan-out.ts`, `leases.ts`, `claims.ts`, `settle.ts`, `delivery-log.ts`,
 * `dead-letters.ts`, `delivery-minutes.ts`, `retention.ts`); the pool and the
 * transactions are `connection.ts`'s. The hot ones (fan-out, claims, settle)
 * are one statement each, atomic on their own, so a pump costs one round
 * trip per step; processes claim in parallel, each in its own slots, rows
 * another holds skipped (`SKIP LOCKED`), every settle fenced by its epoch.
 *
 * The work signal is `LISTEN herald_work` on a connection of its own
 * (`work-signal.ts`), started by the first `watch()` and stopped with the
 * last: the outbox's trigger notifies on every insert, and Herald's own
 * writes that make work for other processes notify at commit. Notices from
 * this store's own connections (its `application_name`) are ignored.
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
import type { FailureGroup, FailureGroupFilter, FailureGroupKey, FailureGroupReplay } from '../failure-groups.ts';
import type { TriageOutcome } from '../triage.ts';
import { purgeInChunks, purgeInOrder } from '../chunked-purge.ts';
import { replayFailureGroupInChunks, replayInChunks, type ReplaySelection } from '../chunked-replay.ts';
import { checkSlotCount } from '../slot-count.ts';
import { PostgresConnection } from './connection.ts';
import { REPLAY_CHUNK } from './dead-letters.ts';
import { clampLimit, MAX_LIST_LIMIT } from '../list-limit.ts';
import { PURGE_CHUNK } from './retention.ts';
import { queriesFor, type PostgresQueries } from './queries.ts';
import type { DeliveryMinute, DeliveryMinuteIncrement, DeliveryMinutesQuery, EndpointDeliveryTotals } from '../delivery-minutes.ts';
import type { EventType, EventTypeCatalog, EventTypePatch } from '../event-type-port.ts';
import { DEFAULT_POSTGRES_SCHEMA, validSchemaName } from './schema.ts';
import type { Sql } from './sql.ts';
import { PostgresWorkSignal, type WorkSignalRestart } from './work-signal.ts';

export interface PostgresStoreOptions {
  /** A `postgres://` connection string (without Herald's `schema` parameter: see `parsePostgresSetting`). */
  readonly connectionString: string;
  /** The schema Herald's tables live in. @default 'herald' */
  readonly schema?: string;
  readonly clock: Clock;
  /**
   * Connections in the pool. A pump uses one at a time per step; the admin API, the lease
   * keeper and settles run beside it.
   * @default 10
   */
  readonly poolSize?: number;
  /**
   * How long a statement may run before the server cancels it (`statement_timeout`), so a call
   * stuck behind a lock fails and is retried instead of hanging.
   * @default 30000
   */
  readonly statementTimeoutMs?: number;
  /** How long to wait for a connection (from the pool or the server) before failing. @default 5000 */
  readonly connectTimeoutMs?: number;
  /** Told when the work signal's connection drops and is opened again. */
  readonly onWorkSignalRestart?: (restart: WorkSignalRestart) => void;
}

const DEFAULTS = Object.freeze({
  schema: DEFAULT_POSTGRES_SCHEMA,
  poolSize: 10,
  statementTimeoutMs: 30_000,
  connectTimeoutMs: 5_000,
});

export class PostgresStore implements Store {
  readonly #connectionString: string;
  readonly #schema: string;
  readonly #clock: Clock;
  readonly #poolSize: number;
  readonly #connectTimeoutMs: number;
  readonly #onWorkSignalRestart: ((restart: WorkSignalRestart) => void) | undefined;
  /** This store's connections' `application_name`: its own notices carry it and are ignored. */
  readonly #applicationName = `herald ${randomBytes(6).toString('hex')}`;

  /** Each concern's queries (`queries.ts`). */
  readonly #queries: PostgresQueries;

  readonly #connection: PostgresConnection;
  #slotCount = 0;
  #signal: PostgresWorkSignal | undefined;
  readonly #listeners = new Set<() => void>();

  constructor(options: PostgresStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('PostgresStore options', 'must be an object with connectionString and clock');
    }
    if (typeof options.connectionString !== 'string' || options.connectionString.trim() === '') {
      throw new ValidationError('connectionString', 'must be a non-empty postgres:// connection string');
    }
    const clock = options.clock as Partial<Clock> | undefined;
    if (typeof clock?.now !== 'function' || typeof clock.setTimeout !== 'function') {
      throw new ValidationError('clock', 'must be a Clock with now() and setTimeout()');
    }
    this.#connectionString = options.connectionString;
    this.#schema = validSchemaName(options.schema ?? DEFAULTS.schema);
    this.#clock = options.clock;
    this.#poolSize = positiveInteger(options.poolSize ?? DEFAULTS.poolSize, 'poolSize');
    const statementTimeoutMs = positiveInteger(options.statementTimeoutMs ?? DEFAULTS.statementTimeoutMs, 'statementTimeoutMs');
    this.#connectTimeoutMs = positiveInteger(options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs, 'connectTimeoutMs');
    this.#onWorkSignalRestart = options.onWorkSignalRestart;
    this.#connection = new PostgresConnection({
      connectionString: this.#connectionString,
      schema: this.#schema,
      applicationName: this.#applicationName,
      poolSize: this.#poolSize,
      statementTimeoutMs,
      connectTimeoutMs: this.#connectTimeoutMs,
    });
    this.#queries = queriesFor(this.#schema);
  }

  /** The schema Herald's tables live in. */
  get schema(): string {
    return this.#schema;
  }

  /** Connections in this process's pool (the work signal's connection is one more). */
  get poolSize(): number {
    return this.#poolSize;
  }

  /** How many times the work signal's connection dropped and was opened again. */
  get workSignalRestarts(): number {
    return this.#signal?.restarts ?? 0;
  }

  async init(options: { readonly slotCount: number }): Promise<{ readonly slotCount: number }> {
    const wanted = checkSlotCount(options.slotCount);
    await this.#connection.open();
    return this.#run('init', async (sql) => {
      // The first start fixes the slot count for the data: endpoints hash into it forever after.
      this.#slotCount = await this.#queries.leases.fixSlotCount(sql, wanted);
      return { slotCount: this.#slotCount };
    });
  }

  async close(): Promise<void> {
    if (this.#connection.closed) return;
    this.#listeners.clear();
    const signal = this.#signal;
    this.#signal = undefined;
    await this.#connection.close(async () => {
      await signal?.stop();
    });
  }

  watch(listener: () => void): () => void {
    const { pg } = this.#connection.ready();
    this.#listeners.add(listener);
    if (this.#signal === undefined) {
      const ownPrefix = `${this.#schema} `;
      const ownNotice = `${this.#schema} ${this.#applicationName}`;
      this.#signal = new PostgresWorkSignal({
        connect: () => new pg.Client({
          connectionString: this.#connectionString,
          application_name: `${this.#applicationName} listener`,
          connectionTimeoutMillis: this.#connectTimeoutMs,
          // A server that vanishes without closing the socket is noticed by keepalive probes, not only by the sweep.
          keepAlive: true,
        }),
        accept: (payload) => payload.startsWith(ownPrefix) && payload !== ownNotice,
        onChange: () => {
          for (const notify of [...this.#listeners]) notify();
        },
        ...(this.#onWorkSignalRestart === undefined ? {} : { onRestart: this.#onWorkSignalRestart }),
        clock: this.#clock,
      });
      this.#signal.start();
    }
    return () => {
      this.#listeners.delete(listener);
      if (this.#listeners.size > 0 || this.#signal === undefined) return;
      const signal = this.#signal;
      this.#signal = undefined;
      void signal.stop();
    };
  }

  /**
   * Resolves once the work signal listens (at once when nothing watches): commits from then on
   * wake the watchers. For tests and orderly starts.
   */
  whenWatching(): Promise<void> {
    return this.#signal?.whenListening() ?? Promise.resolve();
  }

  // Endpoints

  async createEndpoint(endpoint: Endpoint): Promise<void> {
    return this.#run('createEndpoint', (sql) => this.#queries.endpoints.create(sql, endpoint));
  }

  async endpointChangesAfter(after: number, limit: number): Promise<EndpointChange[]> {
    return this.#run('endpointChangesAfter', (sql) => this.#queries.endpointChanges.after(sql, after, limit));
  }

  async lastEndpointChange(): Promise<number> {
    return this.#run('lastEndpointChange', (sql) => this.#queries.endpointChanges.last(sql));
  }

  async getEndpoint(id: string): Promise<Endpoint | undefined> {
    return this.#run('getEndpoint', (sql) => this.#queries.endpoints.get(sql, id));
  }

  async listEndpoints(filter?: { readonly tenantId?: string }): Promise<Endpoint[]> {
    return this.#run('listEndpoints', (sql) => this.#queries.endpoints.list(sql, filter?.tenantId));
  }

  async updateEndpoint(id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
    return this.#transaction('updateEndpoint', (tx) => this.#queries.endpoints.update(tx, id, patch, now));
  }

  async deleteEndpoint(id: string, now: number): Promise<boolean> {
    return this.#run('deleteEndpoint', (sql) => this.#queries.endpoints.delete(sql, id, now));
  }

  async resumeDeliveries(endpointId: string, now: number): Promise<number> {
    return this.#run('resumeDeliveries', (sql) => this.#queries.endpoints.resumeDeliveries(sql, endpointId, now));
  }

  async tenantExists(tenantId: string): Promise<boolean> {
    return this.#run('tenantExists', (sql) => this.#queries.endpoints.tenantExists(sql, tenantId));
  }

  // Outbox

  async appendEvents(events: readonly OutboxEvent[]): Promise<void> {
    return this.#run('appendEvents', (sql) => this.#queries.fanOut.append(sql, events));
  }

  async unfannedEvents(limit: number, exceptTenantIds?: readonly string[]): Promise<OutboxEvent[]> {
    return this.#run('unfannedEvents', (sql) => this.#queries.fanOut.unfanned(sql, limit, exceptTenantIds));
  }

  async countUnfannedEvents(cap: number): Promise<number> {
    return this.#run('countUnfannedEvents', (sql) => this.#queries.fanOut.countUnfanned(sql, cap));
  }

  async recordFanOuts(fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]> {
    if (fanOuts.length === 0) return [];
    return this.#run('recordFanOuts', (sql) => this.#queries.fanOut.record(sql, fanOuts, now, claim));
  }

  async getEvent(id: string): Promise<OutboxEvent | undefined> {
    return this.#run('getEvent', (sql) => this.#queries.fanOut.getEvent(sql, id));
  }

  // Membership

  async serverTime(): Promise<number | undefined> {
    return this.#run('serverTime', (sql) => this.#queries.leases.serverTime(sql));
  }

  async heartbeat(node: NodeHeartbeat): Promise<void> {
    return this.#run('heartbeat', (sql) => this.#queries.leases.heartbeat(sql, node));
  }

  async listNodes(seenSince: number): Promise<NodeRecord[]> {
    return this.#run('listNodes', (sql) => this.#queries.leases.listNodes(sql, seenSince));
  }

  async removeNode(id: string): Promise<void> {
    return this.#run('removeNode', (sql) => this.#queries.leases.removeNode(sql, id));
  }

  // Leases

  async acquireLeases(request: LeaseRequest): Promise<SlotLease[]> {
    return this.#run('acquireLeases', (sql) => this.#queries.leases.acquire(sql, request));
  }

  async releaseLeases(owner: string, slots: readonly number[]): Promise<void> {
    return this.#run('releaseLeases', (sql) => this.#queries.leases.release(sql, owner, slots));
  }

  async listLeases(): Promise<SlotLease[]> {
    return this.#run('listLeases', (sql) => this.#queries.leases.list(sql));
  }

  async countOpenBySlot(now: number): Promise<SlotOpenCount[]> {
    return this.#run('countOpenBySlot', (sql) => this.#queries.leases.countOpenBySlot(sql, now));
  }

  async getSlotWeights(): Promise<SlotWeights | undefined> {
    return this.#run('getSlotWeights', (sql) => this.#queries.leases.getSlotWeights(sql));
  }

  async putSlotWeights(weights: SlotWeights): Promise<void> {
    return this.#run('putSlotWeights', (sql) => this.#queries.leases.putSlotWeights(sql, weights));
  }

  // Deliveries

  async claimDue(request: ClaimRequest): Promise<DeliveryJob[]> {
    return this.#run('claimDue', (sql) => this.#queries.claims.claimDue(sql, request));
  }

  async claimForEndpoints(request: EndpointClaimRequest): Promise<DeliveryJob[]> {
    return this.#run('claimForEndpoints', (sql) => this.#queries.claims.claimForEndpoints(sql, request, this.#slotCount));
  }

  async settle(settlements: readonly Settlement[], now: number): Promise<SettleResult> {
    if (settlements.length === 0) return { applied: [], fenced: [] };
    // A dead letter whose event is missing fails the batch: only a transaction takes back the rest.
    if (settlements.some((s) => s.kind === 'dead')) {
      return this.#transaction('settle', (tx) => this.#queries.settle.settle(tx, settlements, now));
    }
    return this.#run('settle', (sql) => this.#queries.settle.settle(sql, settlements, now));
  }

  async getDelivery(id: string): Promise<Delivery | undefined> {
    return this.#run('getDelivery', (sql) => this.#queries.log.get(sql, id));
  }

  async listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    return this.#run('listDeliveries', (sql) => this.#queries.log.list(sql, filter));
  }

  async listDeliveriesAfterSequence(endpointId: string, after: number, limit: number): Promise<Delivery[]> {
    return this.#run('listDeliveriesAfterSequence', (sql) => this.#queries.log.afterSequence(sql, endpointId, after, limit));
  }

  async listAttempts(deliveryId: string): Promise<Attempt[]> {
    return this.#run('listAttempts', (sql) => this.#queries.log.listAttempts(sql, deliveryId));
  }

  async countDeliveries(): Promise<Readonly<Record<DeliveryStatus, number>>> {
    return this.#run('countDeliveries', (sql) => this.#queries.log.count(sql));
  }

  async nextDueAt(): Promise<number | undefined> {
    return this.#run('nextDueAt', (sql) => this.#queries.log.nextDueAt(sql));
  }

  // Dead letters

  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    return this.#run('getDeadLetter', (sql) => this.#queries.deadLetters.get(sql, id));
  }

  async listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    return this.#run('listDeadLetters', (sql) => this.#queries.deadLetters.list(sql, filter));
  }

  /**
   * By filter, every match is replayed (`limit` and `includeReplayed` are ignored), a chunk per
   * statement. Dead letters whose endpoint has been deleted are skipped.
   */
  async replayDeadLetters(selection: ReplaySelection, now: number): Promise<string[]> {
    const replayIds = (ids: readonly string[]): Promise<string[]> => this.#run('replayDeadLetters', (sql) => this.#queries.deadLetters.replay(sql, ids, now));
    return replayInChunks(selection, {
      chunkSize: REPLAY_CHUNK,
      replayIds,
      // The page is read, then replayed by a statement of its own: no transaction holds the rows
      // in between, and the replay takes only those still unreplayed with their delivery dead.
      replayPage: async (filter, after) => {
        const page = await this.#run('replayDeadLetters', (sql) => this.#queries.deadLetters.unreplayedPage(sql, filter, after));
        return { page, replayed: page.length > 0 ? await replayIds(page.map((row) => row.id)) : [] };
      },
      start: { createdAt: Number.MIN_SAFE_INTEGER, seq: 0 },
      keyOf: (row) => ({ createdAt: row.createdAt, seq: row.seq }),
    });
  }

  async triageDeadLetters(request: TriageRequest, now: number): Promise<TriageOutcome> {
    return this.#run('triageDeadLetters', (sql) => this.#queries.deadLetters.triage(sql, request, now));
  }

  async countReplayableDeadLetters(filter: DeadLetterFilter): Promise<number> {
    return this.#run('countReplayableDeadLetters', (sql) => this.#queries.deadLetters.countReplayable(sql, filter));
  }

  async replayableDeadLetterPage(
    filter: DeadLetterFilter,
    afterId: string | null,
    limit: number,
    exceptEndpointIds: readonly string[] = [],
  ): Promise<ReplayableDeadLetter[]> {
    return this.#run('replayableDeadLetterPage', (sql) =>
      this.#queries.deadLetters.replayablePage(sql, filter, afterId, clampLimit(limit, MAX_LIST_LIMIT), exceptEndpointIds),
    );
  }

  async countLiveReplays(endpointIds: readonly string[]): Promise<Readonly<Record<string, number>>> {
    if (endpointIds.length === 0) return {};
    return this.#run('countLiveReplays', (sql) => this.#queries.replayJobs.liveReplays(sql, endpointIds));
  }

  // Replay jobs

  async createReplayJob(job: ReplayJobRecord): Promise<void> {
    return this.#run('createReplayJob', (sql) => this.#queries.replayJobs.create(sql, job));
  }

  async getReplayJob(id: string): Promise<ReplayJobRecord | undefined> {
    return this.#run('getReplayJob', (sql) => this.#queries.replayJobs.get(sql, id));
  }

  async listReplayJobs(limit: number): Promise<ReplayJobRecord[]> {
    return this.#run('listReplayJobs', (sql) => this.#queries.replayJobs.list(sql, limit));
  }

  async leaseReplayJobs(owner: string, now: number, leaseUntil: number): Promise<ReplayJobRecord[]> {
    return this.#run('leaseReplayJobs', (sql) => this.#queries.replayJobs.lease(sql, owner, now, leaseUntil));
  }

  async saveReplayJobProgress(id: string, owner: string, progress: ReplayJobProgress): Promise<boolean> {
    return this.#run('saveReplayJobProgress', (sql) => this.#queries.replayJobs.saveProgress(sql, id, owner, progress));
  }

  async endReplayJob(id: string, owner: string | null, end: ReplayJobEnd): Promise<ReplayJobRecord | undefined> {
    return this.#run('endReplayJob', (sql) => this.#queries.replayJobs.end(sql, id, owner, end));
  }

  async releaseReplayJobs(owner: string): Promise<void> {
    return this.#run('releaseReplayJobs', (sql) => this.#queries.replayJobs.release(sql, owner));
  }

  async unreviewedDeadLetters(cap: number): Promise<UnreviewedDeadLetters> {
    return this.#run('unreviewedDeadLetters', (sql) => this.#queries.deadLetters.unreviewed(sql, cap));
  }

  async failureGroups(filter: FailureGroupFilter): Promise<FailureGroup[]> {
    return this.#run('failureGroups', (sql) => this.#queries.failures.groups(sql, filter));
  }

  /** The retrying deliveries first (one statement), then the dead letters, a chunk per statement. */
  async replayFailureGroup(group: FailureGroupKey, now: number): Promise<FailureGroupReplay> {
    return replayFailureGroupInChunks(
      group,
      () => this.#run('replayFailureGroup', (sql) => this.#queries.failures.resume(sql, group, now)),
      (filter) => this.replayDeadLetters(filter, now),
    );
  }

  // Tenant tokens

  async createTenantToken(token: TenantToken): Promise<void> {
    return this.#run('createTenantToken', (sql) => this.#queries.tenantTokens.create(sql, token));
  }

  async getTenantToken(id: string): Promise<TenantToken | undefined> {
    return this.#run('getTenantToken', (sql) => this.#queries.tenantTokens.get(sql, id));
  }

  async listTenantTokens(tenantId: string): Promise<TenantToken[]> {
    return this.#run('listTenantTokens', (sql) => this.#queries.tenantTokens.list(sql, tenantId));
  }

  async deleteTenantToken(tenantId: string, id: string): Promise<boolean> {
    return this.#run('deleteTenantToken', (sql) => this.#queries.tenantTokens.delete(sql, tenantId, id));
  }

  // Event types (lib/store/event-type-port.ts): each write bumps the catalog version with it

  async createEventType(type: EventType): Promise<void> {
    return this.#run('createEventType', (sql) => this.#queries.eventTypes.create(sql, type));
  }

  async getEventType(name: string): Promise<EventType | undefined> {
    return this.#run('getEventType', (sql) => this.#queries.eventTypes.get(sql, name));
  }

  async listEventTypes(): Promise<EventType[]> {
    return this.#run('listEventTypes', (sql) => this.#queries.eventTypes.list(sql));
  }

  async updateEventType(name: string, patch: EventTypePatch, now: number): Promise<EventType | undefined> {
    return this.#transaction('updateEventType', (tx) => this.#queries.eventTypes.update(tx, name, patch, now));
  }

  async deleteEventType(name: string): Promise<boolean> {
    return this.#run('deleteEventType', (sql) => this.#queries.eventTypes.delete(sql, name));
  }

  async eventTypeCatalogVersion(): Promise<number> {
    return this.#run('eventTypeCatalogVersion', (sql) => this.#queries.eventTypes.version(sql));
  }

  async eventTypeCatalog(): Promise<EventTypeCatalog> {
    return this.#run('eventTypeCatalog', (sql) => this.#queries.eventTypes.catalog(sql));
  }

  // Delivery minutes

  /** One statement for the whole batch. */
  async addDeliveryMinutes(increments: readonly DeliveryMinuteIncrement[]): Promise<void> {
    if (increments.length === 0) return;
    return this.#run('addDeliveryMinutes', (sql) => this.#queries.minutes.add(sql, increments));
  }

  async deliveryMinutes(query: DeliveryMinutesQuery): Promise<DeliveryMinute[]> {
    return this.#run('deliveryMinutes', (sql) => this.#queries.minutes.read(sql, query));
  }

  async deliveryTotals(query: DeliveryMinutesQuery): Promise<EndpointDeliveryTotals[]> {
    return this.#run('deliveryTotals', (sql) => this.#queries.minutes.totals(sql, query));
  }

  // Retention

  /** `PURGE_CHUNK` rows per statement, each its own operation (as `purge`). */
  async purgeDeliveryMinutes(before: number): Promise<number> {
    return purgeInChunks(PURGE_CHUNK, () => this.#run('purgeDeliveryMinutes', (sql) => this.#queries.retention.purgeDeliveryMinutes(sql, before)));
  }

  /** A statement of at most `PURGE_CHUNK` rows per operation: no long transaction keeps vacuum from reclaiming rows. */
  async purge(before: number): Promise<PurgeResult> {
    const drain = (purgeChunk: (sql: Sql) => Promise<number>): Promise<number> => purgeInChunks(PURGE_CHUNK, () => this.#run('purge', purgeChunk));
    const { retention } = this.#queries;
    // First-attempt successes kept on their deliveries' rows (settle.ts) count as attempts: those that
    // go with their deliveries, then, once the events are purged, those left on deliveries that stay.
    let inlineAttempts = 0;
    const result = await purgeInOrder({
      attempts: () => drain((sql) => retention.purgeAttempts(sql, before)),
      deadLetters: () => drain((sql) => retention.purgeDeadLetters(sql, before)),
      events: () => drain(async (sql) => {
        const gone = await retention.purgeEvents(sql, before);
        inlineAttempts += gone.inlineAttempts;
        return gone.events;
      }),
      replayJobs: () => drain((sql) => retention.purgeReplayJobs(sql, before)),
      endpointChanges: () => drain((sql) => this.#queries.endpointChanges.purge(sql, before)),
    });
    inlineAttempts += await drain((sql) => retention.purgeInlineAttempts(sql, before));
    return { ...result, attempts: result.attempts + inlineAttempts };
  }

  /** Runs one port operation on the pool (`PostgresConnection.run`). */
  #run<T>(operation: string, fn: (sql: Sql) => Promise<T>): Promise<T> {
    return this.#connection.run(operation, fn);
  }

  /** Runs `fn` in one transaction (`PostgresConnection.transaction`). */
  #transaction<T>(operation: string, fn: (tx: Sql) => Promise<T>): Promise<T> {
    return this.#connection.transaction(operation, fn);
  }
}

function positiveInteger(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new ValidationError(field, `must be a positive integer (got ${String(value)})`);
  }
  return value;
}
