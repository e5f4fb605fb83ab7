/**
 * The SQLite store on a thread of its own: the same `SqliteStore`, its
 * connection and every statement in a worker thread, so SQL runs on one core
 * while HTTP, signing and the engine run on the other (as a job queue gets for
 * free from its database server). Each port call is one message each way;
 * calls run on the thread in the order they are made. The thread commits
 * writes in groups (`CommitGroup`): the engine does not wait for one call
 * before making the next (settles, refills and fan-outs run side by side), so
 * the calls that arrive while a transaction runs share the next one, and a page
 * that several of them touch is written once.
 *
 *   created ──init()──► open (thread started) ──close()──► closed (thread ended)
 *   open ──the thread dies──► failed: every call rejects with a StoreError saying why
 *
 * The thread runs on the system clock: use `SqliteStore` itself with an
 * injected clock (tests). Errors keep their class and code across the thread.
 * The thread keeps the process alive only while a call waits for it.
 */
import { Worker } from 'node:worker_threads';
import { ClosedError, StoreError } from '../../errors.ts';
import type { DeadLetter, Delivery, DeliveryJob, DeliveryStatus, Endpoint, OutboxEvent, Attempt, ReplayJobRecord, TenantToken } from '../../model.ts';
import { workerExecArgv } from '../../worker-exec-argv.ts';
import { isTypeScriptModule, workerModule } from '../../worker-module.ts';
import type {
  EndpointChange,
  ReplayableDeadLetter,
  ReplayJobEnd,
  ReplayJobProgress,
  ClaimRequest,
  DeadLetterFilter,
  DeliveryFilter,
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
import type { SqliteStoreOptions } from './sqlite-store.ts';
import { rebuildError, type StoreThreadMethod, type StoreThreadReply, type StoreThreadRequest } from './store-thread-messages.ts';

const THREAD_FILE = workerModule(import.meta.url, './store-thread');

/**
 * The thread's entry, in JavaScript. From the TypeScript sources, on Node 20 the loader
 * registered in this thread (tsx) does not reach a worker's own imports, so the entry registers
 * tsx there, then imports the thread's module; compiled, it imports the module.
 */
const THREAD_ENTRY = `${
  isTypeScriptModule(THREAD_FILE)
    ? `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then(({ register }) => { register(); return import(${JSON.stringify(THREAD_FILE.href)}); })`
    : `import(${JSON.stringify(THREAD_FILE.href)})`
}.catch((error) => { setImmediate(() => { throw error; }); });`;

export type SqliteStoreThreadOptions = Omit<SqliteStoreOptions, 'clock' | 'groupCommit'>;

/**
 * The thread's V8 young generation, in MB. Left to V8, it grows to the main thread's size under
 * a burst of claims and fan-outs and keeps it, although what the thread allocates (rows, their
 * messages) dies within a call; capped, the thread holds less memory at the same CPU per
 * delivery (docs/PERFORMANCE.md, Memory).
 */
const THREAD_YOUNG_GENERATION_MB = 6;

export class SqliteStoreThread implements Store {
  readonly #options: SqliteStoreThreadOptions;
  #worker: Worker | undefined;
  readonly #calls = new Map<number, { resolve(value: unknown): void; reject(error: unknown): void }>();
  #nextId = 1;
  /** Why the thread stopped, once it has: every call after it fails with this. */
  #failure: StoreError | undefined;
  readonly #listeners = new Set<() => void>();
  #closed = false;

  constructor(options: SqliteStoreThreadOptions) {
    this.#options = options;
  }

  async init(options: { readonly slotCount: number }): Promise<{ readonly slotCount: number }> {
    if (this.#closed) throw new ClosedError('SqliteStoreThread');
    if (this.#failure !== undefined) throw this.#failure;
    this.#worker ??= this.#start();
    return this.#call('init', [options]);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    const worker = this.#worker;
    try {
      // A thread that has stopped has nothing left to close.
      if (worker !== undefined && this.#failure === undefined) await this.#call('close', []);
    } finally {
      this.#closed = true;
      this.#listeners.clear();
      await worker?.terminate();
      this.#worker = undefined;
    }
  }

  watch(listener: () => void): () => void {
    if (this.#listeners.size === 0) this.#post({ type: 'watch' });
    this.#listeners.add(listener);
    return () => {
      if (!this.#listeners.delete(listener) || this.#listeners.size > 0 || this.#closed) return;
      this.#post({ type: 'unwatch' });
    };
  }

  createEndpoint(endpoint: Endpoint): Promise<void> {
    return this.#call('createEndpoint', [endpoint]);
  }
  endpointChangesAfter(after: number, limit: number): Promise<EndpointChange[]> {
    return this.#call('endpointChangesAfter', [after, limit]);
  }
  lastEndpointChange(): Promise<number> {
    return this.#call('lastEndpointChange', []);
  }
  getEndpoint(id: string): Promise<Endpoint | undefined> {
    return this.#call('getEndpoint', [id]);
  }
  listEndpoints(filter?: { readonly tenantId?: string }): Promise<Endpoint[]> {
    return this.#call('listEndpoints', [filter]);
  }
  updateEndpoint(id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined> {
    return this.#call('updateEndpoint', [id, patch, now]);
  }
  deleteEndpoint(id: string, now: number): Promise<boolean> {
    return this.#call('deleteEndpoint', [id, now]);
  }
  resumeDeliveries(endpointId: string, now: number): Promise<number> {
    return this.#call('resumeDeliveries', [endpointId, now]);
  }
  tenantExists(tenantId: string): Promise<boolean> {
    return this.#call('tenantExists', [tenantId]);
  }
  appendEvents(events: readonly OutboxEvent[]): Promise<void> {
    return this.#call('appendEvents', [events]);
  }
  unfannedEvents(limit: number, exceptTenantIds?: readonly string[]): Promise<OutboxEvent[]> {
    return this.#call('unfannedEvents', [limit, exceptTenantIds]);
  }
  countUnfannedEvents(cap: number): Promise<number> {
    return this.#call('countUnfannedEvents', [cap]);
  }
  recordFanOuts(fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]> {
    return this.#call('recordFanOuts', [fanOuts, now, claim]);
  }
  getEvent(id: string): Promise<OutboxEvent | undefined> {
    return this.#call('getEvent', [id]);
  }
  serverTime(): Promise<number | undefined> {
    return this.#call('serverTime', []);
  }
  heartbeat(node: NodeHeartbeat): Promise<void> {
    return this.#call('heartbeat', [node]);
  }
  listNodes(seenSince: number): Promise<NodeRecord[]> {
    return this.#call('listNodes', [seenSince]);
  }
  removeNode(id: string): Promise<void> {
    return this.#call('removeNode', [id]);
  }
  acquireLeases(request: LeaseRequest): Promise<SlotLease[]> {
    return this.#call('acquireLeases', [request]);
  }
  releaseLeases(owner: string, slots: readonly number[]): Promise<void> {
    return this.#call('releaseLeases', [owner, slots]);
  }
  listLeases(): Promise<SlotLease[]> {
    return this.#call('listLeases', []);
  }
  countOpenBySlot(now: number): Promise<SlotOpenCount[]> {
    return this.#call('countOpenBySlot', [now]);
  }
  getSlotWeights(): Promise<SlotWeights | undefined> {
    return this.#call('getSlotWeights', []);
  }
  putSlotWeights(weights: SlotWeights): Promise<void> {
    return this.#call('putSlotWeights', [weights]);
  }
  claimDue(request: ClaimRequest): Promise<DeliveryJob[]> {
    return this.#call('claimDue', [request]);
  }
  claimForEndpoints(request: EndpointClaimRequest): Promise<DeliveryJob[]> {
    return this.#call('claimForEndpoints', [request]);
  }
  settle(settlements: readonly Settlement[], now: number): Promise<SettleResult> {
    return this.#call('settle', [settlements, now]);
  }
  getDelivery(id: string): Promise<Delivery | undefined> {
    return this.#call('getDelivery', [id]);
  }
  listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    return this.#call('listDeliveries', [filter]);
  }
  listDeliveriesAfterSequence(endpointId: string, after: number, limit: number): Promise<Delivery[]> {
    return this.#call('listDeliveriesAfterSequence', [endpointId, after, limit]);
  }
  listAttempts(deliveryId: string): Promise<Attempt[]> {
    return this.#call('listAttempts', [deliveryId]);
  }
  countDeliveries(): Promise<Readonly<Record<DeliveryStatus, number>>> {
    return this.#call('countDeliveries', []);
  }
  nextDueAt(): Promise<number | undefined> {
    return this.#call('nextDueAt', []);
  }
  getDeadLetter(id: string): Promise<DeadLetter | undefined> {
    return this.#call('getDeadLetter', [id]);
  }
  listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetter[]> {
    return this.#call('listDeadLetters', [filter]);
  }
  replayDeadLetters(selection: { readonly ids: readonly string[] } | DeadLetterFilter, now: number): Promise<string[]> {
    return this.#call('replayDeadLetters', [selection, now]);
  }
  triageDeadLetters(request: TriageRequest, now: number): Promise<TriageOutcome> {
    return this.#call('triageDeadLetters', [request, now]);
  }
  countReplayableDeadLetters(filter: DeadLetterFilter): Promise<number> {
    return this.#call('countReplayableDeadLetters', [filter]);
  }

  replayableDeadLetterPage(
    filter: DeadLetterFilter,
    afterId: string | null,
    limit: number,
    exceptEndpointIds: readonly string[] = [],
  ): Promise<ReplayableDeadLetter[]> {
    return this.#call('replayableDeadLetterPage', [filter, afterId, limit, exceptEndpointIds]);
  }
  countLiveReplays(endpointIds: readonly string[]): Promise<Readonly<Record<string, number>>> {
    return this.#call('countLiveReplays', [endpointIds]);
  }
  createReplayJob(job: ReplayJobRecord): Promise<void> {
    return this.#call('createReplayJob', [job]);
  }
  getReplayJob(id: string): Promise<ReplayJobRecord | undefined> {
    return this.#call('getReplayJob', [id]);
  }
  listReplayJobs(limit: number): Promise<ReplayJobRecord[]> {
    return this.#call('listReplayJobs', [limit]);
  }
  leaseReplayJobs(owner: string, now: number, leaseUntil: number): Promise<ReplayJobRecord[]> {
    return this.#call('leaseReplayJobs', [owner, now, leaseUntil]);
  }
  saveReplayJobProgress(id: string, owner: string, progress: ReplayJobProgress): Promise<boolean> {
    return this.#call('saveReplayJobProgress', [id, owner, progress]);
  }
  endReplayJob(id: string, owner: string | null, end: ReplayJobEnd): Promise<ReplayJobRecord | undefined> {
    return this.#call('endReplayJob', [id, owner, end]);
  }
  releaseReplayJobs(owner: string): Promise<void> {
    return this.#call('releaseReplayJobs', [owner]);
  }

  unreviewedDeadLetters(cap: number): Promise<UnreviewedDeadLetters> {
    return this.#call('unreviewedDeadLetters', [cap]);
  }

  failureGroups(filter: FailureGroupFilter): Promise<FailureGroup[]> {
    return this.#call('failureGroups', [filter]);
  }

  replayFailureGroup(group: FailureGroupKey, now: number): Promise<FailureGroupReplay> {
    return this.#call('replayFailureGroup', [group, now]);
  }
  createTenantToken(token: TenantToken): Promise<void> {
    return this.#call('createTenantToken', [token]);
  }
  getTenantToken(id: string): Promise<TenantToken | undefined> {
    return this.#call('getTenantToken', [id]);
  }
  listTenantTokens(tenantId: string): Promise<TenantToken[]> {
    return this.#call('listTenantTokens', [tenantId]);
  }
  deleteTenantToken(tenantId: string, id: string): Promise<boolean> {
    return this.#call('deleteTenantToken', [tenantId, id]);
  }
  createEventType(type: EventType): Promise<void> {
    return this.#call('createEventType', [type]);
  }
  getEventType(name: string): Promise<EventType | undefined> {
    return this.#call('getEventType', [name]);
  }
  listEventTypes(): Promise<EventType[]> {
    return this.#call('listEventTypes', []);
  }
  updateEventType(name: string, patch: EventTypePatch, now: number): Promise<EventType | undefined> {
    return this.#call('updateEventType', [name, patch, now]);
  }
  deleteEventType(name: string): Promise<boolean> {
    return this.#call('deleteEventType', [name]);
  }
  eventTypeCatalogVersion(): Promise<number> {
    return this.#call('eventTypeCatalogVersion', []);
  }
  eventTypeCatalog(): Promise<EventTypeCatalog> {
    return this.#call('eventTypeCatalog', []);
  }
  addDeliveryMinutes(increments: readonly DeliveryMinuteIncrement[]): Promise<void> {
    return this.#call('addDeliveryMinutes', [increments]);
  }
  deliveryMinutes(query: DeliveryMinutesQuery): Promise<DeliveryMinute[]> {
    return this.#call('deliveryMinutes', [query]);
  }
  deliveryTotals(query: DeliveryMinutesQuery): Promise<EndpointDeliveryTotals[]> {
    return this.#call('deliveryTotals', [query]);
  }
  purge(before: number): Promise<PurgeResult> {
    return this.#call('purge', [before]);
  }
  purgeDeliveryMinutes(before: number): Promise<number> {
    return this.#call('purgeDeliveryMinutes', [before]);
  }

  #start(): Worker {
    const worker = new Worker(THREAD_ENTRY, {
      eval: true,
      workerData: this.#options,
      execArgv: workerExecArgv(THREAD_FILE),
      resourceLimits: { maxYoungGenerationSizeMb: THREAD_YOUNG_GENERATION_MB },
    });
    worker.unref();
    worker.on('message', (reply: StoreThreadReply) => this.#receive(reply));
    if (this.#listeners.size > 0) worker.postMessage({ type: 'watch' } satisfies StoreThreadRequest);
    // The thread itself failed (it could not load, or crashed): every waiting call learns it.
    const fail = (error: unknown): void => {
      const failure = new StoreError(`sqlite: the store thread stopped: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
      this.#failure ??= failure;
      for (const call of this.#calls.values()) call.reject(failure);
      this.#calls.clear();
      this.#worker = undefined;
    };
    worker.on('error', fail);
    worker.on('exit', (code) => {
      if (!this.#closed) fail(new Error(`exit code ${code}`));
    });
    return worker;
  }

  #call<T>(method: StoreThreadMethod, args: readonly unknown[]): Promise<T> {
    if (this.#closed) return Promise.reject(new ClosedError('SqliteStoreThread'));
    if (this.#failure !== undefined) return Promise.reject(this.#failure);
    if (this.#worker === undefined) return Promise.reject(new StoreError('SqliteStoreThread: call init() before using the store'));
    const id = this.#nextId++;
    return new Promise<T>((resolve, reject) => {
      if (this.#calls.size === 0) this.#worker?.ref();
      this.#calls.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.#post({ type: 'call', id, method, args });
    });
  }

  #post(request: StoreThreadRequest): void {
    this.#worker?.postMessage(request);
  }

  #receive(reply: StoreThreadReply): void {
    if (reply.type === 'changed') {
      for (const listener of this.#listeners) listener();
      return;
    }
    const call = this.#calls.get(reply.id);
    if (call === undefined) return;
    this.#calls.delete(reply.id);
    if (this.#calls.size === 0) this.#worker?.unref();
    if (reply.type === 'result') call.resolve(reply.value);
    else call.reject(rebuildError(reply.error));
  }
}
