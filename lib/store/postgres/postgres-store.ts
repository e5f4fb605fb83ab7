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
 * `dead-letters.ts`, `delivery-minutes.ts`, `retention.ts`). The hot ones (fan-out, claims, settle)
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
import type { Pool, PoolClient } from 'pg';
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
import {
  failureGroupsLimit,
  mergeFailureGroups,
  withSamples,
  type FailureGroup,
  type FailureGroupFilter,
  type FailureGroupKey,
  type FailureGroupReplay,
} from '../../dead-letters/failure-groups.ts';
import type { TriageOutcome } from '../../dead-letters/triage.ts';
import { redactUri } from '../store-setting.ts';
import { ClaimQueries } from './claims.ts';
import { DeadLetterQueries, REPLAY_CHUNK } from './dead-letters.ts';
import { clampLimit, DeliveryLogQueries, MAX_LIST_LIMIT } from './delivery-log.ts';
import { EndpointChangeQueries } from './endpoint-changes.ts';
import { EndpointQueries } from './endpoints.ts';
import { FailureGroupQueries } from './failure-groups.ts';
import { FanOutQueries } from './fan-out.ts';
import { LeaseQueries } from './leases.ts';
import { PURGE_CHUNK, RetentionQueries } from './retention.ts';
import { DeliveryMinuteQueries } from './delivery-minutes.ts';
import { loadPgDriver, type PgDriver } from './driver.ts';
import type { DeliveryMinute, DeliveryMinuteIncrement, DeliveryMinutesQuery, EndpointDeliveryTotals } from '../../status/delivery-minutes.ts';
import { DEFAULT_POSTGRES_SCHEMA, migratePostgresSchema, validSchemaName } from './schema.ts';
import { SettleQueries } from './settle.ts';
import { sqlOn, type Sql } from './sql.ts';
import { ReplayJobQueries } from './replay-jobs.ts';
import { TenantTokenQueries } from './tenant-tokens.ts';
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

const MAX_SLOT_COUNT = 65_536;
/** PostgreSQL's int8: epoch milliseconds, epochs and counts, all far below 2^53. */
const INT8_OID = 20;

interface OpenState {
  readonly pg: PgDriver;
  readonly pool: Pool;
  readonly sql: Sql;
}

export class PostgresStore implements Store {
  readonly #connectionString: string;
  readonly #schema: string;
  readonly #clock: Clock;
  readonly #poolSize: number;
  readonly #statementTimeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #onWorkSignalRestart: ((restart: WorkSignalRestart) => void) | undefined;
  /** This store's connections' `application_name`: its own notices carry it and are ignored. */
  readonly #applicationName = `herald ${randomBytes(6).toString('hex')}`;

  readonly #endpoints: EndpointQueries;
  readonly #endpointChanges: EndpointChangeQueries;
  readonly #fanOut: FanOutQueries;
  readonly #leases: LeaseQueries;
  readonly #claims: ClaimQueries;
  readonly #settle: SettleQueries;
  readonly #log: DeliveryLogQueries;
  readonly #deadLetters: DeadLetterQueries;
  readonly #failures: FailureGroupQueries;
  readonly #retention: RetentionQueries;
  readonly #tenantTokens: TenantTokenQueries;
  readonly #replayJobs: ReplayJobQueries;
  readonly #minutes: DeliveryMinuteQueries;

  #state: OpenState | undefined;
  #opening: Promise<OpenState> | undefined;
  #slotCount = 0;
  #closed = false;
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
    this.#statementTimeoutMs = positiveInteger(options.statementTimeoutMs ?? DEFAULTS.statementTimeoutMs, 'statementTimeoutMs');
    this.#connectTimeoutMs = positiveInteger(options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs, 'connectTimeoutMs');
    this.#onWorkSignalRestart = options.onWorkSignalRestart;
    const s = this.#schema;
    this.#endpointChanges = new EndpointChangeQueries(s);
    this.#endpoints = new EndpointQueries(s, this.#endpointChanges);
    this.#fanOut = new FanOutQueries(s);
    this.#leases = new LeaseQueries(s);
    this.#claims = new ClaimQueries(s);
    this.#settle = new SettleQueries(s);
    this.#log = new DeliveryLogQueries(s);
    this.#deadLetters = new DeadLetterQueries(s);
    this.#failures = new FailureGroupQueries(s);
    this.#retention = new RetentionQueries(s);
    this.#tenantTokens = new TenantTokenQueries(s);
    this.#replayJobs = new ReplayJobQueries(s);
    this.#minutes = new DeliveryMinuteQueries(s);
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
    const wanted = options.slotCount;
    if (!Number.isInteger(wanted) || wanted < 1 || wanted > MAX_SLOT_COUNT) {
      throw new ValidationError('slotCount', `must be an integer from 1 to ${MAX_SLOT_COUNT} (got ${String(wanted)})`);
    }
    if (this.#closed) throw new ClosedError('PostgresStore');
    this.#opening ??= this.#open();
    this.#state ??= await this.#opening;
    return this.#run('init', async (sql) => {
      // The first start fixes the slot count for the data: endpoints hash into it forever after.
      const [row] = await sql.query<{ value: string }>(
        `WITH added AS (
           INSERT INTO ${this.#schema}.meta (key, value) VALUES ('slot_count', $1) ON CONFLICT (key) DO NOTHING RETURNING value
         )
         SELECT value FROM added UNION ALL SELECT value FROM ${this.#schema}.meta WHERE key = 'slot_count'`,
        [String(wanted)],
      );
      this.#slotCount = Number(row!.value);
      return { slotCount: this.#slotCount };
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#listeners.clear();
    const signal = this.#signal;
    this.#signal = undefined;
    await signal?.stop();
    const state = this.#state ?? (await this.#opening?.catch(() => undefined));
    this.#state = undefined;
    try {
      await state?.pool.end();
    } catch (error) {
      throw new StoreError(`postgres: close failed: ${messageOf(error)}`, { cause: error });
    }
  }

  watch(listener: () => void): () => void {
    const { pg } = this.#ready();
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
    return this.#run('createEndpoint', (sql) => this.#endpoints.create(sql, endpoint));
  }

  async endpointChangesAfter(after: number, limit: number): Promise<EndpointChange[]> {
    return this.#run('endpointChangesAfter', (sql) => this.#endpointChanges.after(sql, after, limit));
  }

  async lastEndpointChange(): Promise<number> {
    return this.#run('lastEndpointChange', (sql) => this.#endpointChanges.last(sql));
  }

  async getEndpoint(id: string): Promise<Endpoint | undefined> {
    return this.#run('getEndpoint', (sql) => this.#endpoints.get(sql, id));
  }

  async listEndpoints(filter?: { readonly tenantId?: string }): Promise<Endpoint[]> {
    return this.#run('listEndpoints', (sql) => this.#endpoints.list(sql, filter?.tenantId));
  }

  async updateEndpoint(id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
    return this.#transaction('updateEndpoint', (tx) => this.#endpoints.update(tx, id, patch, now));
  }

  async deleteEndpoint(id: string, now: number): Promise<boolean> {
    return this.#run('deleteEndpoint', (sql) => this.#endpoints.delete(sql, id, now));
  }

  async resumeDeliveries(endpointId: string, now: number): Promise<number> {
    return this.#run('resumeDeliveries', (sql) => this.#endpoints.resumeDeliveries(sql, endpointId, now));
  }

  async tenantExists(tenantId: string): Promise<boolean> {
    return this.#run('tenantExists', (sql) => this.#endpoints.tenantExists(sql, tenantId));
  }

  // Outbox

  async appendEvents(events: readonly OutboxEvent[]): Promise<void> {
    return this.#run('appendEvents', (sql) => this.#fanOut.append(sql, events));
  }

  async unfannedEvents(limit: number, exceptTenantIds?: readonly string[]): Promise<OutboxEvent[]> {
    return this.#run('unfannedEvents', (sql) => this.#fanOut.unfanned(sql, limit, exceptTenantIds));
  }

  async countUnfannedEvents(cap: number): Promise<number> {
    return this.#run('countUnfannedEvents', (sql) => this.#fanOut.countUnfanned(sql, cap));
  }

  async recordFanOuts(fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]> {
    if (fanOuts.length === 0) return [];
    return this.#run('recordFanOuts', (sql) => this.#fanOut.record(sql, fanOuts, now, claim));
  }

  async getEvent(id: string): Promise<OutboxEvent | undefined> {
    return this.#run('getEvent', (sql) => this.#fanOut.getEvent(sql, id));
  }

  // Membership

  async serverTime(): Promise<number | undefined> {
    return this.#run('serverTime', (sql) => this.#leases.serverTime(sql));
  }

  async heartbeat(node: NodeHeartbeat): Promise<void> {
    return this.#run('heartbeat', (sql) => this.#leases.heartbeat(sql, node));
  }

  async listNodes(seenSince: number): Promise<NodeRecord[]> {
    return this.#run('listNodes', (sql) => this.#leases.listNodes(sql, seenSince));
  }

  async removeNode(id: string): Promise<void> {
    return this.#run('removeNode', (sql) => this.#leases.removeNode(sql, id));
  }

  // Leases

  async acquireLeases(request: LeaseRequest): Promise<SlotLease[]> {
    return this.#run('acquireLeases', (sql) => this.#leases.acquire(sql, request));
  }

  async releaseLeases(owner: string, slots: readonly number[]): Promise<void> {
    return this.#run('releaseLeases', (sql) => this.#leases.release(sql, owner, slots));
  }

  async listLeases(): Promise<SlotLease[]> {
    return this.#run('listLeases', (sql) => this.#leases.list(sql));
  }

  async countOpenBySlot(now: number): Promise<SlotOpenCount[]> {
    return this.#run('countOpenBySlot', (sql) => this.#leases.countOpenBySlot(sql, now));
  }

  async getSlotWeights(): Promise<SlotWeights | undefined> {
    return this.#run('getSlotWeights', (sql) => this.#leases.getSlotWeights(sql));
  }

  async putSlotWeights(weights: SlotWeights): Promise<void> {
    return this.#run('putSlotWeights', (sql) => this.#leases.putSlotWeights(sql, weights));
  }

  // Deliveries

  async claimDue(request: ClaimRequest): Promise<DeliveryJob[]> {
    return this.#run('claimDue', (sql) => this.#claims.claimDue(sql, request));
  }

  async claimForEndpoints(request: EndpointClaimRequest): Promise<DeliveryJob[]> {
    return this.#run('claimForEndpoints', (sql) => this.#claims.claimForEndpoints(sql, request, this.#slotCount));
  }

  async settle(settlements: readonly Settlement[], now: number): Promise<SettleResult> {
    if (settlements.length === 0) return { applied: [], fenced: [] };
    // A dead letter whose event is missing fails the batch: only a transaction takes back the rest.
    if (settlements.some((s) => s.kind === 'dead')) {
      return this.#transaction('settle', (tx) => this.#settle.settle(tx, settlements, now));
    }
    return this.#run('settle', (sql) => this.#settle.settle(sql, settlements, now));
  }

  async getDelivery(id: string): Promise<Delivery | undefined> {
    return this.#run('getDelivery', (sql) => this.#log.get(sql, id));
  }

  async listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    return this.#run('listDeliveries', (sql) => this.#log.list(sql, filter));
  }

  async listDeliveriesAfterSequence(endpointId: string, after: number, limit: number): Promise<Delivery[]> {
    return this.#run('listDeliveriesAfterSequence', (sql) => this.#log.afterSequence(sql, endpointId, after, limit));
  }

  async listAttempts(deliveryId: string): Promise<Attempt[]> {
    return this.#run('listAttempts', (sql) => this.#log.listAttempts(sql, deliveryId));
  }

  async countDeliveries(): Promise<Readonly<Record<DeliveryStatus, number>>> {
    return this.#run('countDeliveries', (sql) => this.#log.count(sql));
  }

  async nextDueAt(): Promise<number | undefined> {
    return this.#run('nextDueAt', (sql) => this.#log.nextDueAt(sql));
  }

  // Dead letters

  async getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    return this.#run('getDeadLetter', (sql) => this.#deadLetters.get(sql, id));
  }

  async listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    return this.#run('listDeadLetters', (sql) => this.#deadLetters.list(sql, filter));
  }

  /**
   * By filter, every match is replayed (`limit` and `includeReplayed` are ignored), a chunk per
   * statement. Dead letters whose endpoint has been deleted are skipped.
   */
  async replayDeadLetters(selection: { readonly ids: readonly string[] } | DeadLetterFilter, now: number): Promise<string[]> {
    const replayed: string[] = [];
    if ('ids' in selection) {
      for (let i = 0; i < selection.ids.length; i += REPLAY_CHUNK) {
        const ids = selection.ids.slice(i, i + REPLAY_CHUNK);
        replayed.push(...(await this.#run('replayDeadLetters', (sql) => this.#deadLetters.replay(sql, ids, now))));
      }
      return replayed;
    }
    // Keyset pagination: skipped rows stay unreplayed, so "the next unreplayed ones" would loop forever.
    let after = { createdAt: Number.MIN_SAFE_INTEGER, seq: 0 };
    for (;;) {
      const page = await this.#run('replayDeadLetters', (sql) => this.#deadLetters.unreplayedPage(sql, selection, after));
      if (page.length > 0) {
        const ids = page.map((row) => row.id);
        replayed.push(...(await this.#run('replayDeadLetters', (sql) => this.#deadLetters.replay(sql, ids, now))));
      }
      const last = page.at(-1);
      if (last === undefined || page.length < REPLAY_CHUNK) return replayed;
      after = { createdAt: last.createdAt, seq: last.seq };
    }
  }

  async triageDeadLetters(request: TriageRequest, now: number): Promise<TriageOutcome> {
    return this.#run('triageDeadLetters', (sql) => this.#deadLetters.triage(sql, request, now));
  }

  async countReplayableDeadLetters(filter: DeadLetterFilter): Promise<number> {
    return this.#run('countReplayableDeadLetters', (sql) => this.#deadLetters.countReplayable(sql, filter));
  }

  async replayableDeadLetterPage(
    filter: DeadLetterFilter,
    afterId: string | null,
    limit: number,
    exceptEndpointIds: readonly string[] = [],
  ): Promise<ReplayableDeadLetter[]> {
    return this.#run('replayableDeadLetterPage', (sql) =>
      this.#deadLetters.replayablePage(sql, filter, afterId, clampLimit(limit, MAX_LIST_LIMIT), exceptEndpointIds),
    );
  }

  async countLiveReplays(endpointIds: readonly string[]): Promise<Readonly<Record<string, number>>> {
    if (endpointIds.length === 0) return {};
    return this.#run('countLiveReplays', (sql) => this.#replayJobs.liveReplays(sql, endpointIds));
  }

  // Replay jobs

  async createReplayJob(job: ReplayJobRecord): Promise<void> {
    return this.#run('createReplayJob', (sql) => this.#replayJobs.create(sql, job));
  }

  async getReplayJob(id: string): Promise<ReplayJobRecord | undefined> {
    return this.#run('getReplayJob', (sql) => this.#replayJobs.get(sql, id));
  }

  async listReplayJobs(limit: number): Promise<ReplayJobRecord[]> {
    return this.#run('listReplayJobs', (sql) => this.#replayJobs.list(sql, limit));
  }

  async leaseReplayJobs(owner: string, now: number, leaseUntil: number): Promise<ReplayJobRecord[]> {
    return this.#run('leaseReplayJobs', (sql) => this.#replayJobs.lease(sql, owner, now, leaseUntil));
  }

  async saveReplayJobProgress(id: string, owner: string, progress: ReplayJobProgress): Promise<boolean> {
    return this.#run('saveReplayJobProgress', (sql) => this.#replayJobs.saveProgress(sql, id, owner, progress));
  }

  async endReplayJob(id: string, owner: string | null, end: ReplayJobEnd): Promise<ReplayJobRecord | undefined> {
    return this.#run('endReplayJob', (sql) => this.#replayJobs.end(sql, id, owner, end));
  }

  async releaseReplayJobs(owner: string): Promise<void> {
    return this.#run('releaseReplayJobs', (sql) => this.#replayJobs.release(sql, owner));
  }

  async unreviewedDeadLetters(cap: number): Promise<UnreviewedDeadLetters> {
    return this.#run('unreviewedDeadLetters', (sql) => this.#deadLetters.unreviewed(sql, cap));
  }

  async failureGroups(filter: FailureGroupFilter): Promise<FailureGroup[]> {
    return this.#run('failureGroups', async (sql) => {
      const [retrying, dead] = await Promise.all([this.#failures.retrying(sql, filter), this.#failures.dead(sql, filter)]);
      const groups = mergeFailureGroups(retrying, dead, failureGroupsLimit(filter));
      return withSamples(groups, (source, key) => this.#failures.latest(sql, source, key));
    });
  }

  /** The retrying deliveries first (one statement), then the dead letters, a chunk per statement. */
  async replayFailureGroup(group: FailureGroupKey, now: number): Promise<FailureGroupReplay> {
    const retrying = await this.#run('replayFailureGroup', (sql) => this.#failures.resume(sql, group, now));
    const replayed = await this.replayDeadLetters({ endpointId: group.endpointId, failureKind: group.kind }, now);
    return { deadLetters: replayed.length, retrying };
  }

  // Tenant tokens

  async createTenantToken(token: TenantToken): Promise<void> {
    return this.#run('createTenantToken', (sql) => this.#tenantTokens.create(sql, token));
  }

  async getTenantToken(id: string): Promise<TenantToken | undefined> {
    return this.#run('getTenantToken', (sql) => this.#tenantTokens.get(sql, id));
  }

  async listTenantTokens(tenantId: string): Promise<TenantToken[]> {
    return this.#run('listTenantTokens', (sql) => this.#tenantTokens.list(sql, tenantId));
  }

  async deleteTenantToken(tenantId: string, id: string): Promise<boolean> {
    return this.#run('deleteTenantToken', (sql) => this.#tenantTokens.delete(sql, tenantId, id));
  }

  // Delivery minutes

  /** One statement for the whole batch. */
  async addDeliveryMinutes(increments: readonly DeliveryMinuteIncrement[]): Promise<void> {
    if (increments.length === 0) return;
    return this.#run('addDeliveryMinutes', (sql) => this.#minutes.add(sql, increments));
  }

  async deliveryMinutes(query: DeliveryMinutesQuery): Promise<DeliveryMinute[]> {
    return this.#run('deliveryMinutes', (sql) => this.#minutes.read(sql, query));
  }

  async deliveryTotals(query: DeliveryMinutesQuery): Promise<EndpointDeliveryTotals[]> {
    return this.#run('deliveryTotals', (sql) => this.#minutes.totals(sql, query));
  }

  // Retention

  async purgeDeliveryMinutes(before: number): Promise<number> {
    let total = 0;
    for (;;) {
      const removed = await this.#run('purgeDeliveryMinutes', (sql) => this.#retention.purgeDeliveryMinutes(sql, before));
      total += removed;
      if (removed < PURGE_CHUNK) return total;
    }
  }

  async purge(before: number): Promise<PurgeResult> {
    const drain = async (purgeChunk: (sql: Sql) => Promise<number>): Promise<number> => {
      let total = 0;
      for (;;) {
        const removed = await this.#run('purge', purgeChunk);
        total += removed;
        if (removed < PURGE_CHUNK) return total;
      }
    };
    const attempts = await drain((sql) => this.#retention.purgeAttempts(sql, before));
    const deadLetters = await drain((sql) => this.#retention.purgeDeadLetters(sql, before));
    const events = await drain((sql) => this.#retention.purgeEvents(sql, before));
    const replayJobs = await drain((sql) => this.#retention.purgeReplayJobs(sql, before));
    await drain((sql) => this.#endpointChanges.purge(sql, before));
    return { attempts, deadLetters, events, replayJobs };
  }

  async #open(): Promise<OpenState> {
    const pg = await loadPgDriver({ key: 'store', value: redactUri(this.#connectionString) });
    const pool = new pg.Pool({
      connectionString: this.#connectionString,
      max: this.#poolSize,
      application_name: this.#applicationName,
      connectionTimeoutMillis: this.#connectTimeoutMs,
      statement_timeout: this.#statementTimeoutMs,
      types: {
        getTypeParser: ((oid: number, format?: string) =>
          oid === INT8_OID ? Number : pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
      },
    });
    // An idle connection the server drops (restart, admin kill) is reported here; the pool replaces
    // it. Without a listener the error would end the process.
    pool.on('error', () => {});
    try {
      await migratePostgresSchema(pool, this.#schema);
    } catch (error) {
      await pool.end().catch(() => undefined);
      if (error instanceof HeraldError) throw new StoreError(redactUri(error.message), { cause: error });
      throw error;
    }
    return { pg, pool, sql: sqlOn(pool) };
  }

  #ready(): OpenState {
    if (this.#closed) throw new ClosedError('PostgresStore');
    if (this.#state === undefined) throw new StoreError('PostgresStore: call init() before using the store');
    return this.#state;
  }

  /** Runs one port operation on the pool (each statement its own transaction), driver errors as `StoreError`s. */
  async #run<T>(operation: string, fn: (sql: Sql) => Promise<T>): Promise<T> {
    const { sql } = this.#ready();
    try {
      return await fn(sql);
    } catch (error) {
      throw this.#storeError(operation, error);
    }
  }

  /** Runs `fn` in one transaction on one connection, rolled back if it throws. */
  async #transaction<T>(operation: string, fn: (tx: Sql) => Promise<T>): Promise<T> {
    const { pool } = this.#ready();
    let client: PoolClient;
    try {
      client = await pool.connect();
    } catch (error) {
      throw this.#storeError(operation, error);
    }
    let broken: unknown;
    try {
      await client.query('BEGIN');
      const result = await fn(sqlOn(client));
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch((rollbackError: unknown) => {
        broken = rollbackError;
      });
      throw this.#storeError(operation, error);
    } finally {
      // A connection that cannot even roll back is not given back to the pool.
      client.release(broken instanceof Error ? broken : undefined);
    }
  }

  #storeError(operation: string, error: unknown): HeraldError {
    if (error instanceof HeraldError) return error;
    if (this.#closed) return new ClosedError('PostgresStore');
    return new StoreError(`postgres: ${operation} failed: ${redactUri(messageOf(error))}`, { cause: error });
  }
}

function positiveInteger(value: number, field: string): number {
  if (!Number.isInteger(value) || value < 1) {
    throw new ValidationError(field, `must be a positive integer (got ${String(value)})`);
  }
  return value;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
