/**
 * Herald: one node of the delivery engine, and the operations the library and the admin API
 * offer on it. A façade: each operation is one service's (the endpoint admin, secrets,
 * publishing, the delivery log, the dead-letter desk, replay jobs, tenant tokens, the status
 * snapshot), and the parts behind them are built, started and stopped by `NodeParts`
 * (lib/node-parts.ts, which draws the start and stop order).
 *
 *   Herald.open() ──► opened ──start()──► running ──close()──► closed
 */
import { EventEmitter } from 'node:events';
import { systemClock, systemRandom, type Clock, type Random } from './clock.ts';
import { localNodesFolder, storeKeyOf, type ProcessProbe } from './cluster/local-nodes.ts';
import type { HeraldConfig } from './config/config.ts';
import type { DeadLetterView } from './dead-letters/dead-letter-desk.ts';
import type { ReplayJob, ReplayJobOptions } from './dead-letters/replay-jobs.ts';
import type { EndpointView } from './endpoints/endpoint-admin.ts';
import type { FilterTestResult } from './endpoints/subscription.ts';
import type { ReencryptOutcome } from './endpoints/secret-admin.ts';
import type { SequencePage, SequencePageRequest } from './endpoints/sequence-page.ts';
import type { EngineEvents } from './engine/engine-events.ts';
import type { EventTypeAdmin } from './event-types/event-type-admin.ts';
import { newId } from './ids.ts';
import type { Attempt, Delivery, OutboxEvent, ReplayJobFilter, TraceContext } from './model.ts';
import { NodeParts } from './node-parts.ts';
import type { SecretBox } from './signing/secret-box.ts';
import { resolveSecretKeys, SecretKeyOrigin, type SecretKeys } from './signing/secret-key-source.ts';
import type { DeliverySeries, SeriesRequest } from './status/delivery-series.ts';
import type { ClusterStats } from './status/cluster-stats.ts';
import type { StatusSnapshot } from './status/node-status.ts';
import type { SeriesScope } from './store/delivery-minutes.ts';
import type { FailureGroup, FailureGroupFilter, FailureGroupReplay } from './store/failure-groups.ts';
import { openStore } from './store/open-store.ts';
import type { DeadLetterFilter, DeliveryFilter, SlotLease, Store } from './store/port.ts';
import type { StoreAvailability } from './store/store-health.ts';
import type { OperatorTriageState, TriageOutcome } from './store/triage.ts';
import type { TenantTokens } from './tenants/tenant-tokens.ts';

export interface HeraldDeps {
  /**
   * This node's own clock. Herald reads every time other nodes compare from the cluster clock
   * built on it: corrected by its measured offset to the store's clock (lib/cluster/cluster-clock.ts;
   * offset 0 on SQLite). @default systemClock
   */
  readonly clock?: Clock;
  readonly random?: Random;
  /** A store to use instead of the one `config.store` names (tests). Its node records are then not kept. */
  readonly store?: Store;
  /** How dead predecessors on this host are told apart from live processes (tests). */
  readonly processProbe?: ProcessProbe;
  /**
   * The keys endpoint secrets are sealed with, instead of those `config.secrets` gives (tests).
   * Without it and without a configured key, only a SQLite store named by `config.store` gets a
   * generated `dataDir/secret-key`; any other store keeps secrets plain.
   */
  readonly secretBox?: SecretBox;
}

export class Herald {
  readonly config: HeraldConfig;
  /** Typed engine events: attempts, breaker changes, pauses, operational events, failures. */
  readonly events: EventEmitter<EngineEvents>;
  readonly nodeId = newId('node');
  /** Tokens that let a tenant's developers use the API on their own data (lib/tenants/caller-scope.ts). */
  readonly tenantTokens: TenantTokens;
  /** The event-type catalog: types, their JSON Schemas checked at publish (lib/event-types/). */
  readonly eventTypes: EventTypeAdmin;
  /** Where the secret key came from, and what the operator should hear about it at start. */
  readonly secretKeys: SecretKeys;
  readonly #parts: NodeParts;
  readonly #slotCount: number;
  #started = false;

  static async open(config: HeraldConfig, deps: HeraldDeps = {}): Promise<Herald> {
    const clock = deps.clock ?? systemClock;
    const events = new EventEmitter<EngineEvents>();
    const store =
      deps.store ??
      (await openStore(config.store, {
        clock,
        pollIntervalMs: config.engine.pollIntervalMs,
        // The thread runs on the system clock: a store on an injected clock stays on this thread.
        thread: config.engine.storeThread && clock === systemClock,
        retentionMs: config.retention.keepMs,
        // The MongoDB change feed reports its restarts; they become engine events (log, metrics).
        onChangeFeedRestart: (restart) => events.emit('feedRestart', { reason: restart.reason }),
        // So does the PostgreSQL work signal when its LISTEN connection drops and comes back.
        onWorkSignalRestart: (restart) => events.emit('feedRestart', { reason: restart.reason }),
      }));
    // Before the store opens: a bad key file stops the start with a ConfigError, not half-way.
    const secretKeys =
      deps.secretBox === undefined
        ? resolveSecretKeys(config.secrets, deps.store === undefined && config.store.startsWith('sqlite:') ? config.dataDir : null)
        : { box: deps.secretBox, origin: SecretKeyOrigin.CONFIG, path: null, warnings: [] };
    const { slotCount } = await store.init({ slotCount: config.engine.slotCount });
    // Only the data `config.store` names is known to live beside a folder; an injected store's is not.
    const folder = deps.store === undefined ? localNodesFolder(config.store, config.dataDir) : undefined;
    const local = folder === undefined ? undefined : { folder, storeKey: storeKeyOf(config.store), probe: deps.processProbe };
    return new Herald(config, { store, slotCount, clock, random: deps.random ?? systemRandom, events, local, secretKeys });
  }

  private constructor(
    config: HeraldConfig,
    opened: {
      readonly store: Store;
      readonly slotCount: number;
      readonly clock: Clock;
      readonly random: Random;
      readonly events: EventEmitter<EngineEvents>;
      readonly local: { readonly folder: string; readonly storeKey: string; readonly probe: ProcessProbe | undefined } | undefined;
      readonly secretKeys: SecretKeys;
    },
  ) {
    this.config = config;
    this.events = opened.events;
    this.secretKeys = opened.secretKeys;
    this.#slotCount = opened.slotCount;
    this.#parts = new NodeParts(
      { nodeId: this.nodeId, config, slotCount: opened.slotCount, secretBox: opened.secretKeys.box },
      { store: opened.store, clock: opened.clock, random: opened.random, events: opened.events, local: opened.local },
    );
    this.tenantTokens = this.#parts.tenantTokens;
    this.eventTypes = this.#parts.eventTypes;
  }

  /** The store this node uses (the producer API writes to the same data). */
  get store(): Store {
    return this.#parts.store;
  }

  get slotCount(): number {
    return this.#slotCount;
  }

  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    await this.#parts.start();
  }

  async close(): Promise<void> {
    await this.#parts.close();
  }

  /** Tells the engine there are new events (call it after a publish in this process). */
  signal(): void {
    this.#parts.supervisor.published();
  }

  /** Resolves when the supervisor has no pump running (tests). */
  async idle(): Promise<void> {
    await this.#parts.supervisor.settled();
    await this.#parts.replays.settled();
    await this.#parts.supervisor.settled();
  }

  /**
   * Looks at the oldest unreviewed dead letter now, as the timer does every
   * `deadLetters.checkIntervalMs`: emits `deadletters.unreviewed` when it is newly overdue.
   */
  async reviewDeadLetters(): Promise<void> {
    await this.#parts.reviewWatch.check();
  }

  /** Deletes attempts and dead letters older than the retention period, and delivery minutes older than theirs. */
  async purge(): Promise<void> {
    await this.#parts.purge();
  }

  /** Writes the delivery counts gathered on this node now, as the recorder does at each minute's end (tests, operations). */
  async flushDeliveryMinutes(): Promise<void> {
    await this.#parts.minutes.flush();
  }

  /** The delivery charts' series of one endpoint or all in `within` (lib/status/delivery-log.ts). @throws NotFoundError (`endpointId`). */
  async deliverySeries(request: SeriesRequest, within: SeriesScope): Promise<DeliverySeries> {
    return this.#parts.deliveryLog.series(request, within);
  }

  /** The cluster's attempts and failure rate per endpoint over the last hour, from every node's delivery minutes. */
  async deliveryStats(within: Exclude<SeriesScope, { kind: 'endpoints' }>): Promise<ClusterStats> {
    return this.#parts.deliveryLog.stats(within);
  }

  // Endpoints (lib/endpoints/endpoint-admin.ts, secret-admin.ts)

  /** @returns the endpoint and its first secret, shown this once. @throws ValidationError, ConflictError. */
  async createEndpoint(input: unknown): Promise<{ endpoint: EndpointView; secret: string }> {
    return this.#parts.endpoints.create(input);
  }

  async listEndpoints(filter: { tenantId?: string } = {}): Promise<EndpointView[]> {
    return this.#parts.endpoints.list(filter);
  }

  async getEndpoint(id: string): Promise<EndpointView> {
    return this.#parts.endpoints.get(id);
  }

  /** The endpoint's deliveries numbered after `request.after`, in sequence order. @throws NotFoundError (`endpointId`). */
  async listEndpointEvents(endpointId: string, request: SequencePageRequest): Promise<SequencePage> {
    return this.#parts.endpoints.listEvents(endpointId, request);
  }

  async updateEndpoint(id: string, input: unknown): Promise<EndpointView> {
    return this.#parts.endpoints.update(id, input);
  }

  /** Whether an event `{type?, payload}` would reach the endpoint, and which condition failed. @throws ValidationError, NotFoundError. */
  async testEndpointFilter(id: string, input: unknown): Promise<FilterTestResult> {
    return this.#parts.endpoints.testFilter(id, input);
  }

  async deleteEndpoint(id: string): Promise<void> {
    await this.#parts.endpoints.delete(id);
  }

  /** Re-enables an endpoint: its waiting deliveries go out again, its failure history starts afresh. */
  async enableEndpoint(id: string): Promise<EndpointView> {
    return this.#parts.endpoints.enable(id);
  }

  async disableEndpoint(id: string): Promise<EndpointView> {
    return this.#parts.endpoints.disable(id);
  }

  /**
   * A new current secret; the previous one keeps signing for `signing.rotationOverlapMs`. `input`:
   * `{ signatureScheme: 'hmac-sha256' | 'ed25519' }`, by default the current secret's scheme.
   * @returns `secret`: the new `whsec_` (shown this once), or the `whpk_` of a new ed25519 key.
   * @throws ValidationError; NotFoundError; ConflictError when another rotation of this endpoint's secrets landed first.
   */
  async rotateSecret(id: string, input?: unknown): Promise<{ endpoint: EndpointView; secret: string }> {
    return this.#parts.secrets.rotate(id, input);
  }

  /** Rewrites every endpoint's secrets under the current key (`herald secrets reencrypt`). */
  async reencryptSecrets(onProgress?: (done: number, total: number) => void): Promise<ReencryptOutcome> {
    return this.#parts.secrets.reencrypt(onProgress);
  }

  // Events (lib/producer/publisher.ts)

  /** Publishes events over the API (outside the producer's database transaction). */
  async publish(input: unknown): Promise<OutboxEvent[]> {
    return this.#parts.publisher.publish(input);
  }

  /** Sends a `herald.test` event to this one endpoint through the usual path. @throws NotFoundError (`endpointId`). */
  async sendTestEvent(endpointId: string): Promise<{ event: OutboxEvent; deliveryId: string }> {
    return this.#parts.publisher.sendTestEvent(endpointId);
  }

  // Delivery log (lib/status/delivery-log.ts)

  async listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    return this.#parts.deliveryLog.list(filter);
  }

  async getDelivery(id: string): Promise<Delivery> {
    return this.#parts.deliveryLog.get(id);
  }

  /** One delivery, the payload it sends and its event's trace context; `null` once the retention purge has deleted the event. */
  async getDeliveryWithPayload(id: string): Promise<Delivery & { readonly payload: string | null; readonly traceContext: TraceContext | null }> {
    return this.#parts.deliveryLog.getWithPayload(id);
  }

  async listAttempts(deliveryId: string): Promise<Attempt[]> {
    return this.#parts.deliveryLog.attempts(deliveryId);
  }

  // Dead letters (lib/dead-letters/dead-letter-desk.ts, replay-jobs.ts)

  async listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetterView[]> {
    return this.#parts.deadLetters.list(filter);
  }

  async getDeadLetter(id: string): Promise<DeadLetterView> {
    return this.#parts.deadLetters.get(id);
  }

  /** Acknowledges or discards one open dead letter with `{note, by}`. @throws ValidationError, NotFoundError, ConflictError. */
  async triageDeadLetter(id: string, state: OperatorTriageState, input: unknown): Promise<DeadLetterView> {
    return this.#parts.deadLetters.triage(id, state, input);
  }

  /** The same for `{ids, note, by}`: the open ones are set, the others skipped with why. */
  async triageDeadLetters(state: OperatorTriageState, input: unknown): Promise<TriageOutcome> {
    return this.#parts.deadLetters.triageMany(state, input);
  }

  /** Replays one dead letter: same event id, a new round of attempts. */
  async replayDeadLetter(id: string): Promise<void> {
    await this.#parts.deadLetters.replay(id);
  }

  /** Replays every dead letter not yet replayed that matches the filter; returns their ids. */
  async replayDeadLetters(filter: DeadLetterFilter): Promise<string[]> {
    return this.#parts.deadLetters.replayMany(filter);
  }

  /** How many dead letters `replayDeadLetters(filter)` would replay now; changes nothing (a dry run). */
  async countReplayableDeadLetters(filter: DeadLetterFilter): Promise<number> {
    return this.#parts.deadLetters.countReplayable(filter);
  }

  /** Starts a paced replay of the open dead letters matching `filter`, kept in the store and run by this node. */
  async startReplay(filter: ReplayJobFilter, options: ReplayJobOptions = {}): Promise<ReplayJob> {
    return this.#parts.replays.create(filter, options);
  }

  /** Any node's job, read from the store. @throws NotFoundError. */
  async getReplay(id: string): Promise<ReplayJob> {
    return this.#parts.replays.get(id);
  }

  /** The newest 100 replay jobs of every node, newest first. */
  async listReplays(): Promise<ReplayJob[]> {
    return this.#parts.replays.list();
  }

  /** Stops a running replay job, whichever node runs it; the rest of its dead letters stay dead. @throws NotFoundError. */
  async cancelReplay(id: string): Promise<ReplayJob> {
    return this.#parts.replays.cancel(id);
  }

  /** The failing deliveries (retrying, dead) grouped by endpoint and failure kind, the largest first. */
  async failureGroups(filter: FailureGroupFilter = {}): Promise<FailureGroup[]> {
    return this.#parts.deadLetters.failureGroups(filter);
  }

  /** Replays a group `{endpointId, kind}`: retrying deliveries due now, open dead letters replayed. */
  async replayFailureGroup(input: unknown): Promise<FailureGroupReplay> {
    return this.#parts.deadLetters.replayFailureGroup(input);
  }

  // Status (lib/status/node-status.ts)

  /** Never throws for the store: an unreachable store shows in `store` (and `deliveries` is empty). */
  async status(): Promise<StatusSnapshot> {
    return this.#parts.status.snapshot();
  }

  /** Whether the store takes this process's work, from its recent calls (see `StoreHealth`). */
  get storeAvailability(): StoreAvailability {
    return this.#parts.storeHealth.availability;
  }

  get leases(): readonly SlotLease[] {
    return this.#parts.leases.held;
  }
}
