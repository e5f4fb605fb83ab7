/**
 * The embedded store: one SQLite file in WAL mode, shared by every Herald
 * process on the machine (and by producers publishing from their own
 * connections).
 *
 *   created ──init()──► open ──close()──► closed
 *
 * Methods other than `init` and `close` reject with a `StoreError` before
 * `init()` and with a `ClosedError` after `close()`. Every method that
 * writes more than one row runs in one `BEGIN IMMEDIATE` transaction: taking
 * the write lock up front means a method finds the lock held before it has
 * changed anything, never while a read transaction tries to upgrade. How an
 * operation waits for the lock, and group commit (the store's own thread
 * turns it on), are the connection's (`connection.ts`).
 *
 * Each concern's statements, prepared once per connection, and the
 * synchronous logic over them live in a module of their own (`endpoints.ts`,
 * `fan-out.ts`, `leases.ts`, `claims.ts`, `settle.ts`, `delivery-log.ts`,
 * `dead-letters.ts`, `delivery-minutes.ts`, `retention.ts`, `tenant-tokens.ts`);
 * the connection, the lock and the transactions are `connection.ts`'s; this
 * class says which mode each port method runs in.
 *
 * The work signal for other processes is `PRAGMA data_version`, checked
 * whenever the write-ahead log is written and polled (`work-signal.ts`).
 */
import type { Clock, TimerHandle } from '../../clock.ts';
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
import type { DeliveryMinute, DeliveryMinuteIncrement, DeliveryMinutesQuery, EndpointDeliveryTotals } from '../delivery-minutes.ts';
import type { EventType, EventTypeCatalog, EventTypePatch } from '../event-type-port.ts';
import { purgeInChunks, purgeInOrder } from '../chunked-purge.ts';
import { replayFailureGroupInChunks, replayInChunks, type ReplaySelection } from '../chunked-replay.ts';
import { checkSlotCount } from '../slot-count.ts';
import type { DeadLetterRow } from '../sql-rows.ts';
import { SqliteConnection, type OpenState } from './connection.ts';
import { REPLAY_CHUNK } from './dead-letters.ts';
import { clampLimit, MAX_LIST_LIMIT } from '../list-limit.ts';
import type { LockAccess } from './lock-waiter.ts';
import { PURGE_CHUNK } from './retention.ts';
import { watchDataVersion } from './work-signal.ts';

export interface SqliteStoreOptions {
  /** The database file; its folder is created if missing. `:memory:` works for a single connection. */
  readonly path: string;
  readonly clock: Clock;
  /**
   * How often `watch()` polls `PRAGMA data_version` for commits by other connections (it
   * also checks whenever the file system reports a write to the write-ahead log).
   * @default 50
   */
  readonly pollIntervalMs?: number;
  /**
   * How long an operation waits in all for another connection's write lock before it fails
   * with a `StoreError`.
   * @default 5000
   */
  readonly busyTimeoutMs?: number;
  /**
   * How long an operation may block the event loop waiting for the lock (SQLite's own busy
   * wait) before it waits on the clock instead. Short locks (another Herald process's
   * transaction) are waited out here; long ones (a producer's slow transaction) cannot
   * freeze the process for longer than this.
   * @default 20
   */
  readonly blockingWaitMs?: number;
  /**
   * How often an operation waiting on the clock tries the lock again (without blocking).
   * @default 10
   */
  readonly lockRetryIntervalMs?: number;
  /**
   * Run the writes issued while a group waits in one transaction (`CommitGroup`). It pays where
   * writes arrive while others run: on the store's own thread (`SqliteStoreThread` turns it on).
   * Reads run at once as ever.
   * @default false
   */
  readonly groupCommit?: boolean;
}

const DEFAULTS = Object.freeze({
  pollIntervalMs: 50,
  busyTimeoutMs: 5_000,
  blockingWaitMs: 20,
  lockRetryIntervalMs: 10,
  groupCommit: false,
} satisfies Required<Omit<SqliteStoreOptions, 'path' | 'clock'>>);

export class SqliteStore implements Store {
  readonly #clock: Clock;
  readonly #pollIntervalMs: number;
  /** The write-ahead log `watch` listens to for other connections' commits (none in memory). */
  readonly #walPath: string | undefined;
  readonly #connection: SqliteConnection;
  /** Fixed by the first `init()` on this data; deliveries' slots are derived from it. */
  #slotCount = 0;
  readonly #watchers = new Set<TimerHandle>();

  constructor(options: SqliteStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw new ValidationError('SqliteStore options', 'must be an object with path and clock');
    }
    if (typeof options.path !== 'string' || options.path.trim() === '') {
      throw new ValidationError('path', `must be a non-empty file path (got ${JSON.stringify(options.path)})`);
    }
    const clock = options.clock as Partial<Clock> | undefined;
    if (typeof clock?.now !== 'function' || typeof clock.setInterval !== 'function') {
      throw new ValidationError('clock', 'must be a Clock with now() and setInterval()');
    }
    const pollIntervalMs = options.pollIntervalMs ?? DEFAULTS.pollIntervalMs;
    if (!Number.isInteger(pollIntervalMs) || pollIntervalMs < 1) {
      throw new ValidationError('pollIntervalMs', `must be a positive integer (got ${String(pollIntervalMs)})`);
    }
    const busyTimeoutMs = nonNegativeInteger(options.busyTimeoutMs ?? DEFAULTS.busyTimeoutMs, 'busyTimeoutMs');
    const blockingWaitMs = nonNegativeInteger(options.blockingWaitMs ?? DEFAULTS.blockingWaitMs, 'blockingWaitMs');
    const lockRetryIntervalMs = options.lockRetryIntervalMs ?? DEFAULTS.lockRetryIntervalMs;
    if (!Number.isInteger(lockRetryIntervalMs) || lockRetryIntervalMs < 1) {
      throw new ValidationError('lockRetryIntervalMs', `must be a positive integer (got ${String(lockRetryIntervalMs)})`);
    }
    this.#clock = options.clock;
    this.#pollIntervalMs = pollIntervalMs;
    this.#walPath = options.path === ':memory:' ? undefined : `${options.path}-wal`;
    this.#connection = new SqliteConnection({
      path: options.path,
      clock: options.clock,
      busyTimeoutMs,
      blockingWaitMs: Math.min(blockingWaitMs, busyTimeoutMs),
      lockRetryIntervalMs,
      groupCommit: options.groupCommit ?? DEFAULTS.groupCommit,
    });
  }

  async init(options: { readonly slotCount: number }): Promise<{ readonly slotCount: number }> {
    const wanted = checkSlotCount(options.slotCount);
    await this.#connection.open();
    return this.#run('init', ({ db, leases }) => {
      // The first start fixes the slot count for the data: endpoints hash into it forever after.
      this.#slotCount = db.transaction(() => leases.fixSlotCount(wanted)).immediate();
      return { slotCount: this.#slotCount };
    });
  }

  async close(): Promise<void> {
    if (this.#connection.closed) return;
    try {
      await this.#connection.close();
    } finally {
      for (const watcher of this.#watchers) watcher.cancel();
      this.#watchers.clear();
    }
  }

  watch(listener: () => void): () => void {
    const timer = watchDataVersion(
      { dataVersion: this.#connection.ready().dataVersion, clock: this.#clock, pollIntervalMs: this.#pollIntervalMs, walPath: this.#walPath },
      listener,
    );
    this.#watchers.add(timer);
    return () => {
      timer.cancel();
      this.#watchers.delete(timer);
    };
  }

  // Endpoints

  async createEndpoint(endpoint: Endpoint): Promise<void> {
    return this.#run('createEndpoint', ({ db, endpoints, endpointChanges }) =>
      db.transaction(() => {
        endpoints.create(endpoint);
        endpointChanges.record(endpoint.id, endpoint.createdAt);
      }).immediate());
  }

  async getEndpoint(id: string): Promise<Endpoint | undefined> {
    return this.#run('getEndpoint', ({ endpoints }) => endpoints.get(id), 'read');
  }

  async listEndpoints(filter?: { readonly tenantId?: string }): Promise<Endpoint[]> {
    return this.#run('listEndpoints', ({ endpoints }) => endpoints.list(filter?.tenantId), 'read');
  }

  async updateEndpoint(id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
    return this.#run('updateEndpoint', ({ db, endpoints, endpointChanges }) =>
      db.transaction(() => {
        const updated = endpoints.update(id, patch, now);
        if (updated !== undefined) endpointChanges.record(id, now);
        return updated;
      }).immediate());
  }

  async deleteEndpoint(id: string, now: number): Promise<boolean> {
    return this.#run('deleteEndpoint', ({ db, endpoints, endpointChanges }) =>
      db.transaction(() => {
        const deleted = endpoints.delete(id, now);
        if (deleted) endpointChanges.record(id, now);
        return deleted;
      }).immediate());
  }

  async endpointChangesAfter(after: number, limit: number): Promise<EndpointChange[]> {
    return this.#run('endpointChangesAfter', ({ endpointChanges }) => endpointChanges.after(after, limit), 'read');
  }

  async lastEndpointChange(): Promise<number> {
    return this.#run('lastEndpointChange', ({ endpointChanges }) => endpointChanges.last(), 'read');
  }

  async resumeDeliveries(endpointId: string, now: number): Promise<number> {
    return this.#run('resumeDeliveries', ({ endpoints }) => endpoints.resumeDeliveries(endpointId, now));
  }

  async tenantExists(tenantId: string): Promise<boolean> {
    return this.#run('tenantExists', ({ endpoints }) => endpoints.tenantExists(tenantId), 'read');
  }

  // Outbox

  /** Idempotent: an event whose id is already stored is left as it is. */
  async appendEvents(events: readonly OutboxEvent[]): Promise<void> {
    return this.#run('appendEvents', ({ db, fanOut }) => db.transaction(() => fanOut.append(events)).immediate());
  }

  async unfannedEvents(limit: number, exceptTenantIds?: readonly string[]): Promise<OutboxEvent[]> {
    return this.#run('unfannedEvents', ({ fanOut }) => fanOut.unfanned(limit, exceptTenantIds), 'read');
  }

  async countUnfannedEvents(cap: number): Promise<number> {
    return this.#run('countUnfannedEvents', ({ fanOut }) => fanOut.countUnfanned(cap), 'read');
  }

  async recordFanOuts(fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]> {
    if (fanOuts.length === 0) return [];
    return this.#run('recordFanOuts', ({ db, fanOut }) => db.transaction(() => fanOut.record(fanOuts, now, claim)).immediate());
  }

  async getEvent(id: string): Promise<OutboxEvent | undefined> {
    return this.#run('getEvent', ({ fanOut }) => fanOut.getEvent(id), 'read');
  }

  // Leases

  async acquireLeases(request: LeaseRequest): Promise<SlotLease[]> {
    const { owner, slots, now, leaseMs } = request;
    const askedAt = this.#clock.now();
    return this.#run('acquireLeases', ({ db, leases }) =>
      db.transaction(() => {
        // Count the lease from the moment the write lock is ours: waiting for it behind another
        // connection must not shorten the lease we write (a lapse means a takeover and a duplicate
        // send). The wait is measured on this store's clock and added to the caller's `now`, so the
        // two clocks need not agree (the store may run on a thread of its own, on the system clock).
        // A call that got the lock at its first try waited at most `blockingWaitMs` (and the calls
        // before it in its commit group): milliseconds against a lease of seconds, not counted.
        const at = this.#connection.waitedForLock ? now + Math.max(0, this.#clock.now() - askedAt) : now;
        return leases.acquire(owner, slots, at, leaseMs);
      }).immediate(),
      'urgent',
    );
  }

  async releaseLeases(owner: string, slots: readonly number[]): Promise<void> {
    return this.#run('releaseLeases', ({ leases }) => leases.release(owner, slots));
  }

  // Membership

  /** None of its own: one SQLite file is on one host, whose clock every node on it reads. */
  async serverTime(): Promise<number | undefined> {
    return undefined;
  }

  async heartbeat(node: NodeHeartbeat): Promise<void> {
    return this.#run('heartbeat', ({ leases }) => leases.heartbeat(node), 'urgent');
  }

  async listNodes(seenSince: number): Promise<NodeRecord[]> {
    return this.#run('listNodes', ({ leases }) => leases.listNodes(seenSince), 'read');
  }

  async removeNode(id: string): Promise<void> {
    return this.#run('removeNode', ({ leases }) => leases.removeNode(id));
  }

  /** Leases that have an owner, expired or not; released slots are left out. */
  async listLeases(): Promise<SlotLease[]> {
    return this.#run('listLeases', ({ leases }) => leases.list(), 'read');
  }

  async countOpenBySlot(now: number): Promise<SlotOpenCount[]> {
    return this.#run('countOpenBySlot', ({ leases }) => leases.countOpenBySlot(now), 'read');
  }

  async getSlotWeights(): Promise<SlotWeights | undefined> {
    return this.#run('getSlotWeights', ({ leases }) => leases.getSlotWeights(), 'read');
  }

  async putSlotWeights(weights: SlotWeights): Promise<void> {
    return this.#run('putSlotWeights', ({ leases }) => leases.putSlotWeights(weights));
  }

  // Deliveries

  async claimDue(request: ClaimRequest): Promise<DeliveryJob[]> {
    if (request.limit <= 0 || request.perEndpointLimit <= 0) return [];
    return this.#run('claimDue', ({ db, claims }) => db.transaction(() => claims.claimDue(request)).immediate());
  }

  async claimForEndpoints(request: EndpointClaimRequest): Promise<DeliveryJob[]> {
    const { owner, now } = request;
    const wanted = request.endpoints.filter((want) => want.limit >= 1);
    if (wanted.length === 0) return [];
    const slotCount = this.#slotCount;
    return this.#run('claimForEndpoints', ({ db, claims }) =>
      db.transaction(() => claims.claimForEndpoints(owner, now, wanted, slotCount)).immediate(),
    );
  }

  /** One transaction for the whole batch (attempt numbers: see `settle.ts`). */
  async settle(settlements: readonly Settlement[], now: number): Promise<SettleResult> {
    return this.#run('settle', ({ db, settle }) => db.transaction(() => settle.settle(settlements, now)).immediate());
  }

  async getDelivery(id: string): Promise<Delivery | undefined> {
    return this.#run('getDelivery', ({ log }) => log.get(id), 'read');
  }

  async listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    return this.#run('listDeliveries', ({ log }) => log.list(filter), 'read');
  }

  async listDeliveriesAfterSequence(endpointId: string, after: number, limit: number): Promise<Delivery[]> {
    return this.#run('listDeliveriesAfterSequence', ({ log }) => log.afterSequence(endpointId, after, limit), 'read');
  }

  async listAttempts(deliveryId: string): Promise<Attempt[]> {
    return this.#run('listAttempts', ({ log }) => log.listAttempts(deliveryId), 'read');
  }

  async countDeliveries(): Promise<Readonly<Record<DeliveryStatus, number>>> {
    return this.#run('countDeliveries', ({ log }) => log.count(), 'read');
  }

  async nextDueAt(): Promise<number | undefined> {
    return this.#run('nextDueAt', ({ log }) => log.nextDueAt(), 'read');
  }

  // Dead letters

  /** A dead letter's attempts are those of the round that died; earlier rounds have their own dead letters. */
  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    return this.#run('getDeadLetter', ({ deadLetters }) => deadLetters.get(id), 'read');
  }

  async listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    return this.#run('listDeadLetters', ({ deadLetters }) => deadLetters.list(filter), 'read');
  }

  /**
   * By filter, every match is replayed (`limit` and `includeReplayed` are
   * ignored), `REPLAY_CHUNK` per transaction so a huge replay never holds the
   * write lock for long. Dead letters whose endpoint has been deleted are skipped.
   */
  async replayDeadLetters(selection: ReplaySelection, now: number): Promise<string[]> {
    // One transaction per chunk, each its own operation: another process gets the lock in
    // between, and a chunk that finds the lock held waits without blocking the event loop.
    // A page is read in its chunk's operation, on the connection the transaction then runs on.
    const replayChunk = ({ db, deadLetters }: OpenState, rows: readonly DeadLetterRow[]): string[] =>
      db.transaction(() => deadLetters.replay(rows, now)).immediate();
    return replayInChunks(selection, {
      chunkSize: REPLAY_CHUNK,
      replayIds: (ids) => this.#run('replayDeadLetters', (state) => replayChunk(state, state.deadLetters.unreplayed(ids))),
      replayPage: (filter, after) =>
        this.#run('replayDeadLetters', (state) => {
          const page = state.deadLetters.unreplayedPage(filter, after);
          return { page, replayed: page.length > 0 ? replayChunk(state, page) : [] };
        }),
      start: { createdAt: Number.MIN_SAFE_INTEGER, id: '' },
      keyOf: (row) => ({ createdAt: row.created_at, id: row.id }),
    });
  }

  async triageDeadLetters(request: TriageRequest, now: number): Promise<TriageOutcome> {
    return this.#run('triageDeadLetters', ({ db, deadLetters }) => db.transaction(() => deadLetters.triage(request, now)).immediate());
  }

  async countReplayableDeadLetters(filter: DeadLetterFilter): Promise<number> {
    return this.#run('countReplayableDeadLetters', ({ deadLetters }) => deadLetters.countReplayable(filter), 'read');
  }

  async replayableDeadLetterPage(
    filter: DeadLetterFilter,
    afterId: string | null,
    limit: number,
    exceptEndpointIds: readonly string[] = [],
  ): Promise<ReplayableDeadLetter[]> {
    return this.#run(
      'replayableDeadLetterPage',
      ({ deadLetters }) => deadLetters.replayablePage(filter, afterId, clampLimit(limit, MAX_LIST_LIMIT), exceptEndpointIds),
      'read',
    );
  }

  async countLiveReplays(endpointIds: readonly string[]): Promise<Readonly<Record<string, number>>> {
    if (endpointIds.length === 0) return {};
    return this.#run('countLiveReplays', ({ replayJobs }) => replayJobs.liveReplays(endpointIds), 'read');
  }

  // Replay jobs

  async createReplayJob(job: ReplayJobRecord): Promise<void> {
    return this.#run('createReplayJob', ({ replayJobs }) => replayJobs.create(job));
  }

  async getReplayJob(id: string): Promise<ReplayJobRecord | undefined> {
    return this.#run('getReplayJob', ({ replayJobs }) => replayJobs.get(id), 'read');
  }

  async listReplayJobs(limit: number): Promise<ReplayJobRecord[]> {
    return this.#run('listReplayJobs', ({ replayJobs }) => replayJobs.list(limit), 'read');
  }

  async leaseReplayJobs(owner: string, now: number, leaseUntil: number): Promise<ReplayJobRecord[]> {
    return this.#run('leaseReplayJobs', ({ replayJobs }) => replayJobs.lease(owner, now, leaseUntil));
  }

  async saveReplayJobProgress(id: string, owner: string, progress: ReplayJobProgress): Promise<boolean> {
    return this.#run('saveReplayJobProgress', ({ replayJobs }) => replayJobs.saveProgress(id, owner, progress));
  }

  async endReplayJob(id: string, owner: string | null, end: ReplayJobEnd): Promise<ReplayJobRecord | undefined> {
    return this.#run('endReplayJob', ({ replayJobs }) => replayJobs.end(id, owner, end));
  }

  async releaseReplayJobs(owner: string): Promise<void> {
    return this.#run('releaseReplayJobs', ({ replayJobs }) => replayJobs.release(owner));
  }

  async unreviewedDeadLetters(cap: number): Promise<UnreviewedDeadLetters> {
    return this.#run('unreviewedDeadLetters', ({ db, deadLetters }) => db.transaction(() => deadLetters.unreviewed(cap))(), 'read');
  }

  /** Both sides counted and sampled in one read transaction: one snapshot. */
  async failureGroups(filter: FailureGroupFilter): Promise<FailureGroup[]> {
    return this.#run('failureGroups', ({ db, failures }) => db.transaction(() => failures.groups(filter))(), 'read');
  }

  /** The retrying deliveries first (one statement), then the dead letters, `REPLAY_CHUNK` per transaction. */
  async replayFailureGroup(group: FailureGroupKey, now: number): Promise<FailureGroupReplay> {
    return replayFailureGroupInChunks(
      group,
      () => this.#run('replayFailureGroup', ({ failures }) => failures.resume(group, now)),
      (filter) => this.replayDeadLetters(filter, now),
    );
  }

  // Tenant tokens

  async createTenantToken(token: TenantToken): Promise<void> {
    return this.#run('createTenantToken', ({ tenantTokens }) => tenantTokens.create(token));
  }

  async getTenantToken(id: string): Promise<TenantToken | undefined> {
    return this.#run('getTenantToken', ({ tenantTokens }) => tenantTokens.get(id), 'read');
  }

  async listTenantTokens(tenantId: string): Promise<TenantToken[]> {
    return this.#run('listTenantTokens', ({ tenantTokens }) => tenantTokens.list(tenantId), 'read');
  }

  async deleteTenantToken(tenantId: string, id: string): Promise<boolean> {
    return this.#run('deleteTenantToken', ({ tenantTokens }) => tenantTokens.delete(tenantId, id));
  }

  // Event types (lib/store/event-type-port.ts): each write bumps the catalog version in its transaction

  async createEventType(type: EventType): Promise<void> {
    return this.#run('createEventType', ({ eventTypes }) => eventTypes.create(type));
  }

  async getEventType(name: string): Promise<EventType | undefined> {
    return this.#run('getEventType', ({ eventTypes }) => eventTypes.get(name), 'read');
  }

  async listEventTypes(): Promise<EventType[]> {
    return this.#run('listEventTypes', ({ eventTypes }) => eventTypes.list(), 'read');
  }

  async updateEventType(name: string, patch: EventTypePatch, now: number): Promise<EventType | undefined> {
    return this.#run('updateEventType', ({ eventTypes }) => eventTypes.update(name, patch, now));
  }

  async deleteEventType(name: string): Promise<boolean> {
    return this.#run('deleteEventType', ({ eventTypes }) => eventTypes.delete(name));
  }

  async eventTypeCatalogVersion(): Promise<number> {
    return this.#run('eventTypeCatalogVersion', ({ eventTypes }) => eventTypes.version(), 'read');
  }

  async eventTypeCatalog(): Promise<EventTypeCatalog> {
    return this.#run('eventTypeCatalog', ({ eventTypes }) => eventTypes.catalog(), 'read');
  }

  // Delivery minutes

  /** One transaction for the whole batch. */
  async addDeliveryMinutes(increments: readonly DeliveryMinuteIncrement[]): Promise<void> {
    if (increments.length === 0) return;
    return this.#run('addDeliveryMinutes', ({ db, minutes }) => db.transaction(() => minutes.add(increments)).immediate());
  }

  async deliveryMinutes(query: DeliveryMinutesQuery): Promise<DeliveryMinute[]> {
    return this.#run('deliveryMinutes', ({ minutes }) => minutes.read(query), 'read');
  }

  async deliveryTotals(query: DeliveryMinutesQuery): Promise<EndpointDeliveryTotals[]> {
    return this.#run('deliveryTotals', ({ minutes }) => minutes.totals(query), 'read');
  }

  // Retention

  /** `PURGE_CHUNK` rows per statement, each its own operation (as `purge`). */
  async purgeDeliveryMinutes(before: number): Promise<number> {
    return purgeInChunks(PURGE_CHUNK, () => this.#run('purgeDeliveryMinutes', ({ retention }) => retention.purgeDeliveryMinutes(before)));
  }

  async purge(before: number): Promise<PurgeResult> {
    // One statement or transaction of at most PURGE_CHUNK rows per operation, as in replay.
    const drain = (purgeChunk: (state: OpenState) => number): Promise<number> => purgeInChunks(PURGE_CHUNK, () => this.#run('purge', purgeChunk));
    // First-attempt successes kept on their deliveries' rows (settle.ts) count as attempts: those that
    // go with their deliveries, then, once the events are purged, those left on deliveries that stay.
    let inlineAttempts = 0;
    const result = await purgeInOrder({
      attempts: () => drain(({ retention }) => retention.purgeAttempts(before)),
      deadLetters: () => drain(({ retention }) => retention.purgeDeadLetters(before)),
      events: () => drain(({ db, retention }) => db.transaction(() => {
        const gone = retention.purgeEvents(before);
        inlineAttempts += gone.inlineAttempts;
        return gone.events;
      }).immediate()),
      replayJobs: () => drain(({ retention }) => retention.purgeReplayJobs(before)),
      endpointChanges: () => drain(({ endpointChanges }) => endpointChanges.purge(before)),
    });
    inlineAttempts += await drain(({ retention }) => retention.purgeInlineAttempts(before));
    return { ...result, attempts: result.attempts + inlineAttempts };
  }

  /** Runs one port operation on the connection (`SqliteConnection.run`). */
  #run<T>(operation: string, fn: (state: OpenState) => T, access?: LockAccess): Promise<T> {
    return this.#connection.run(operation, fn, access);
  }
}

function nonNegativeInteger(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 0) {
    throw new ValidationError(field, `must be a non-negative integer (got ${String(value)})`);
  }
  return value;
}
