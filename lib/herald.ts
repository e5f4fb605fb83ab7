/**
 * Herald: one node of the delivery engine, and the operations the admin API
 * and the library offer on it.
 *
 * Lifecycle: `Herald.open()` opens the store and builds the parts, all on the
 * cluster clock (lib/cluster/cluster-clock.ts); `start()` measures that clock's
 * offset to the store's, records this process beside the data (releasing the leases of a
 * provably dead predecessor on this host, lib/cluster/local-nodes.ts), takes
 * slot leases and starts the supervisor; `close()` shuts down in this order:
 * supervisor (stop claiming; running attempts settle, queued ones are given
 * back) → delivery minutes flushed → leases released → node record removed → ticker, breakers → signing
 * pool → sender → store.
 */
import { EventEmitter } from 'node:events';
import { systemClock, systemRandom, type Clock, type Random } from './clock.ts';
import { ClusterClock } from './cluster/cluster-clock.ts';
import { LeaseKeeper } from './cluster/lease-keeper.ts';
import { SlotWeigher } from './cluster/slot-weigher.ts';
import { LocalNodes, localNodesFolder, storeKeyOf, type ProcessProbe } from './cluster/local-nodes.ts';
import type { HeraldConfig } from './config/config.ts';
import { deliveryHeaders } from './delivery/delivery-headers.ts';
import { createSender, type Sender } from './delivery/sender.ts';
import {
  validateEndpointChanges,
  validateNewEndpoint,
  type EndpointChanges,
} from './endpoints/endpoint-input.ts';
import { validateFailureGroupInput } from './dead-letters/failure-group-input.ts';
import type { FailureGroup, FailureGroupFilter, FailureGroupReplay } from './store/failure-groups.ts';
import { ReplayJobs, type ReplayJob, type ReplayJobOptions } from './dead-letters/replay-jobs.ts';
import { ReviewWatch, UNREVIEWED_COUNT_CAP } from './dead-letters/review-watch.ts';
import type { OperatorTriageState, TriageOutcome } from './store/triage.ts';
import { validateBulkTriageInput, validateTriageInput } from './dead-letters/triage-input.ts';
import { BreakerFamily, type BreakerState } from './engine/breaker.ts';
import type { EngineEvents } from './engine/engine-events.ts';
import { ORIGIN_DEPTH_PER_CONNECTION, SendPermits } from './engine/send-permits.ts';
import { Supervisor } from './engine/supervisor.ts';
import { Ticker } from './engine/ticker.ts';
import { TickerWakeTimers } from './engine/wake-timers.ts';
import { ConflictError, ErrorCode, hasCode, NotFoundError, SecretUnreadableError, ValidationError } from './errors.ts';
import { deliveryIdFor, newId } from './ids.ts';
import {
  DisabledReason,
  type AdaptiveConcurrency,
  type Attempt,
  type DeadLetter,
  type Delivery,
  type Endpoint,
  type OutboxEvent,
  type RateLimit,
  type ReplayJobFilter,
  type SigningSecret,
} from './model.ts';
import { rowsToRead, sequencePageOf, type SequencePage, type SequencePageRequest } from './endpoints/sequence-page.ts';
import { outboxEventOf, validateEventInputs } from './producer/validate-event.ts';
import { generateSecret } from './signing/secret.ts';
import type { SecretBox } from './signing/secret-box.ts';
import { resolveSecretKeys, SecretKeyOrigin, type SecretKeys } from './signing/secret-key-source.ts';
import { SigningKeys } from './signing/signing-keys.ts';
import { SigningPool } from './signing/signing-pool.ts';
import { openStore } from './store/open-store.ts';
import type { DeadLetterFilter, DeliveryFilter, NodeRecord, SlotLease, Store } from './store/port.ts';
import { StoreHealth, type StoreAvailability } from './store/store-health.ts';
import { TenantTokens } from './tenants/tenant-tokens.ts';

/** The type of the event `sendTestEvent` sends: consumers can recognise it and answer 2xx without acting. */
export const TEST_EVENT_TYPE = 'herald.test';
import { isInScope, type SeriesScope } from './store/delivery-minutes.ts';
import { ALL_ENDPOINTS, seriesOf, seriesRange, type DeliverySeries, type SeriesRequest } from './status/delivery-series.ts';
import { clusterStatsOf, LAST_FAILURE_GROUPS, statsRange, type ClusterStats } from './status/cluster-stats.ts';
import { DeliveryMinuteRecorder } from './status/minute-recorder.ts';

/** How many times `reencryptSecrets()` reads an endpoint again when its secrets changed under it. */
const REENCRYPT_ROUNDS = 5;

/** The status counts the outbox's waiting events up to this many (a count walks an index entry per event). */
export const OUTBOX_COUNT_CAP = 100_000;

/** An endpoint as the API shows it: never its secrets. */
export type EndpointView = Omit<Endpoint, 'secrets' | 'rateLimit' | 'adaptiveConcurrency'> & {
  /** `null`: no rate limit. */
  readonly rateLimit: RateLimit | null;
  /** `null`: a fixed concurrency. */
  readonly adaptiveConcurrency: AdaptiveConcurrency | null;
  readonly secretCount: number;
  /** When the previous secret stops signing, during a rotation. */
  readonly previousSecretExpiresAt: number | null;
};

/** What `reencryptSecrets()` did: endpoints looked at, rewritten under the current key, and those it could not open. */
export interface ReencryptOutcome {
  readonly checked: number;
  readonly rewritten: number;
  readonly unreadable: ReadonlyArray<{ readonly endpointId: string; readonly error: SecretUnreadableError }>;
}

/** A dead letter as the API shows it: with its age, by this node's clock. */
export type DeadLetterView = DeadLetter & { readonly ageMs: number };

export interface StatusSnapshot {
  readonly node: string;
  readonly startedAt: number;
  readonly slotsOwned: number;
  readonly slotCount: number;
  readonly inFlight: number;
  /** This node's clock's offset to the cluster's (the store's): cluster time − its time, in ms, as last measured. */
  readonly clockOffsetMs: number;
  /** Deliveries by status, all nodes together (empty when the store did not answer). */
  readonly deliveries: Readonly<Record<string, number>>;
  /**
   * Events in the outbox not yet fanned out into deliveries, all nodes together, counted up to
   * `OUTBOX_COUNT_CAP` (0 when the store did not answer). While the mailboxes are full, new events
   * wait here rather than as pending deliveries.
   */
  readonly unfannedEvents: number;
  readonly fencedWrites: number;
  /**
   * The dead letters nobody has reviewed yet (state `new`), all nodes together, counted up to
   * `UNREVIEWED_COUNT_CAP`, the oldest one's age (0 when none), and the limit it is held to
   * (`deadLetters.reviewWithinMs`). Zeros when the store did not answer.
   */
  readonly deadLetters: {
    readonly unreviewed: number;
    readonly oldestUnreviewedAt: number | null;
    readonly oldestUnreviewedAgeMs: number;
    readonly reviewWithinMs: number;
  };
  /**
   * `reachable`: the store answered the status query (how fast, by the clock). `available`: it also
   * takes this process's work — no call stuck waiting (a lock held by another process) and no
   * recent store failure (a full disk); the readiness probe's verdict. `error` says why not.
   */
  readonly store: {
    readonly reachable: boolean;
    readonly available: boolean;
    readonly latencyMs: number;
    readonly error: string | null;
  };
  /**
   * The cluster as this node sees it: live nodes, the leases it holds, slots it is handing over;
   * and every live node (a heartbeat within a lease period) as the store has it, with the figures
   * of its last heartbeat and the leases it holds now (empty when the store did not answer).
   */
  readonly cluster: {
    readonly nodes: readonly ClusterNodeStatus[];
    readonly liveNodes: readonly string[];
    readonly leases: ReadonlyArray<{ readonly slot: number; readonly epoch: number; readonly until: number }>;
    readonly draining: readonly number[];
  };
  readonly actors: ReadonlyArray<{
    readonly endpointId: string;
    readonly breaker: BreakerState;
    readonly queued: number;
    readonly running: number;
    /** Requests allowed in flight now: the adaptive limit, or the endpoint's fixed `concurrency`. */
    readonly concurrencyLimit: number;
    readonly pausedUntil: number | null;
    readonly lastError: string | null;
  }>;
}

/** One live node of the cluster in the status. Times are the cluster's clock's. */
export interface ClusterNodeStatus {
  readonly id: string;
  readonly startedAt: number;
  readonly lastHeartbeatAt: number;
  /** Unexpired leases it holds. */
  readonly slotsHeld: number;
  /** HTTP requests in flight, as of its last heartbeat. */
  readonly inFlight: number;
  /** Its clock's offset to the cluster's, as of its last heartbeat. */
  readonly clockOffsetMs: number;
}

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
  readonly events = new EventEmitter<EngineEvents>();
  readonly nodeId = newId('node');
  /** Tokens that let a tenant's developers use the API on their own data (lib/tenants/caller-scope.ts). */
  readonly tenantTokens: TenantTokens;
  readonly #clock: Clock;
  readonly #clusterClock: ClusterClock;
  readonly #random: Random;
  readonly #store: Store;
  readonly #storeHealth: StoreHealth;
  readonly #slotCount: number;
  readonly #sender: Sender;
  readonly #signer: SigningPool;
  readonly #secretBox: SecretBox;
  /** Where the secret key came from, and what the operator should hear about it at start. */
  readonly secretKeys: SecretKeys;
  readonly #ticker: Ticker;
  readonly #breakers: BreakerFamily;
  readonly #permits: SendPermits;
  readonly #leases: LeaseKeeper;
  /** This process's record beside the data, and the reaping of dead predecessors (none for an injected store). */
  readonly #localNodes: LocalNodes | undefined;
  readonly #supervisor: Supervisor;
  #startedAt: number;
  #purgeTimer: { cancel(): void } | undefined;
  readonly #reviewWatch: ReviewWatch;
  readonly #replays: ReplayJobs;
  readonly #minutes: DeliveryMinuteRecorder;
  #fencedWrites = 0;
  #started = false;

  static async open(config: HeraldConfig, deps: HeraldDeps = {}): Promise<Herald> {
    const clock = deps.clock ?? systemClock;
    let herald: Herald | undefined;
    const store =
      deps.store ??
      (await openStore(config.store, {
        clock,
        pollIntervalMs: config.engine.pollIntervalMs,
        // The thread runs on the system clock: a store on an injected clock stays on this thread.
        thread: config.engine.storeThread && clock === systemClock,
        retentionMs: config.retention.keepMs,
        // The MongoDB change feed reports its restarts; they become engine events (log, metrics).
        onChangeFeedRestart: (restart) => herald?.events.emit('feedRestart', { reason: restart.reason }),
        // So does the PostgreSQL work signal when its LISTEN connection drops and comes back.
        onWorkSignalRestart: (restart) => herald?.events.emit('feedRestart', { reason: restart.reason }),
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
    herald = new Herald(config, store, slotCount, clock, deps.random ?? systemRandom, local, secretKeys);
    return herald;
  }

  private constructor(
    config: HeraldConfig,
    unmonitoredStore: Store,
    slotCount: number,
    ownClock: Clock,
    random: Random,
    local: { readonly folder: string; readonly storeKey: string; readonly probe: ProcessProbe | undefined } | undefined,
    secretKeys: SecretKeys,
  ) {
    this.config = config;
    this.secretKeys = secretKeys;
    this.#secretBox = secretKeys.box;
    const signingKeys = new SigningKeys(secretKeys.box);
    // The one place the clock is swapped: every part below reads the cluster's clock, this node's
    // corrected by its measured offset to the store's (lib/cluster/cluster-clock.ts), since the
    // times they write are compared by other nodes (leases, heartbeats, claims, due times, fan-out).
    // Measured in start() and at every heartbeat; offset 0 until then.
    this.#clusterClock = new ClusterClock({
      base: ownClock,
      serverTime: () => this.#store.serverTime(),
      onSkewChange: (change) => this.events.emit('clockSkew', change),
    });
    const clock: Clock = this.#clusterClock;
    // Every call the engine, the lease keeper and the API make goes through the health monitor:
    // readiness follows what the store actually does (writes that wait on a lock or fail), not one
    // probe read. An idle node still heartbeats, so a stuck store shows within a heartbeat.
    this.#storeHealth = new StoreHealth({ clock });
    const store = this.#storeHealth.monitor(unmonitoredStore);
    this.#store = store;
    this.#slotCount = slotCount;
    this.#clock = clock;
    this.#random = random;
    this.#startedAt = clock.now();
    this.tenantTokens = new TenantTokens({ store, clock });
    this.#sender = createSender({
      clock,
      allowNetworks: config.allowNetworks,
      responseBodyMaxBytes: config.delivery.responseBodyMaxBytes,
      connectionsPerOrigin: config.delivery.connectionsPerOrigin,
    });
    this.#signer = new SigningPool({ threads: config.signing.threads });
    this.#ticker = new Ticker({ clock, tickMs: config.engine.tickMs });
    this.#breakers = new BreakerFamily(clock, config.breaker);
    this.#permits = new SendPermits({
      maxInFlight: config.delivery.maxInFlight,
      originDepth: config.delivery.connectionsPerOrigin * ORIGIN_DEPTH_PER_CONNECTION,
      tenantWeights: config.delivery.tenantWeights,
    });
    const emit = this.events.emit.bind(this.events) as <K extends keyof EngineEvents>(name: K, ...args: EngineEvents[K]) => void;
    const weigher = new SlotWeigher({ owner: this.nodeId, slotCount }, { store, clock, onError: (error) => emit('failure', { where: 'slot weights', error }) });
    this.#leases = new LeaseKeeper(
      {
        owner: this.nodeId,
        slotCount,
        leaseMs: config.engine.leaseMs,
        renewIntervalMs: config.engine.renewIntervalMs,
      },
      {
        store,
        clock,
        clockOffset: this.#clusterClock,
        inFlight: () => this.#permits.inFlight,
        onChange: (held) => {
          const slots = held.map((lease) => lease.slot);
          this.#supervisor.leasesChanged(slots);
          emit('leases', { slots, liveNodes: this.#leases.liveNodes });
        },
        drain: (slots) => this.#supervisor.drainSlots(slots),
        released: (slots) => this.#supervisor.slotsReleased(slots),
        onError: (error) => emit('failure', { where: 'lease renewal', error }),
        slotWeights: (liveNodes) => weigher.weights(liveNodes),
      },
    );
    this.#localNodes =
      local === undefined
        ? undefined
        : new LocalNodes(
            { folder: local.folder, nodeId: this.nodeId, storeKey: local.storeKey },
            {
              store,
              clock,
              ...(local.probe === undefined ? {} : { probe: local.probe }),
              reaped: (node) => emit('predecessorReaped', node),
              onError: (file, error) => emit('failure', { where: `node record ${file}`, error }),
            },
          );
    this.#supervisor = new Supervisor(
      {
        slotCount,
        sweepIntervalMs: config.engine.sweepIntervalMs,
        claimBatchSize: config.engine.claimBatchSize,
        claimPerEndpoint: config.engine.claimPerEndpoint,
        actorIdleMs: config.engine.actorIdleMs,
        mailboxBudget: config.delivery.maxInFlight * 4,
        endpointSyncIntervalMs: config.engine.endpointSyncIntervalMs,
      },
      {
        store,
        clock,
        emit,
        owner: this.nodeId,
        actor: {
          clock,
          random,
          permits: this.#permits,
          breakers: this.#breakers,
          createTimers: (listener) => new TickerWakeTimers(this.#ticker, listener),
          health: config.health,
          disableOnGone: config.delivery.disableOnGone,
          emit,
          sign: async (job, endpoint, timestampSec) => {
            const keys = signingKeys.active(endpoint, clock.now());
            const { sequence } = job.delivery;
            const signatures = await this.#signer.signRequest({ keys, id: job.event.id, timestampSec, body: job.event.payload, sequence });
            return deliveryHeaders(job.event.id, timestampSec, signatures, sequence);
          },
          send: (request) => this.#sender.send(request),
          listAttempts: (deliveryId) => store.listAttempts(deliveryId),
          disable: async (endpointId, disabledReason) => {
            await store.updateEndpoint(endpointId, { status: 'disabled', disabledReason }, clock.now());
          },
        },
        onFenced: () => {
          this.#fencedWrites++;
        },
      },
    );
    // The charts' counts: added up per (endpoint, minute) here, written in batches, never per attempt.
    this.#minutes = new DeliveryMinuteRecorder(this.events, {
      clock,
      write: (increments) => store.addDeliveryMinutes(increments),
      onError: (error, droppedAttempts) =>
        emit('failure', { where: droppedAttempts === 0 ? 'delivery minutes' : `delivery minutes (${droppedAttempts} attempts' counts dropped)`, error }),
    });
    this.#replays = new ReplayJobs({
      clock,
      store,
      owner: this.nodeId,
      concurrencyLimit: (endpointId) => this.#supervisor.actors.get(endpointId)?.concurrencyLimit,
      signal: () => this.#supervisor.signal(),
      onError: (jobId, error) => emit('failure', { where: `replay job ${jobId}`, error }),
    });
    // A settled delivery may leave its endpoint room for replays: the jobs look at once, not at their next poll.
    this.events.on('attempt', (attempt) => {
      if (attempt.settlement.kind !== 'retry') this.#replays.nudge();
    });
    this.#reviewWatch = new ReviewWatch(config.deadLetters, {
      clock,
      unreviewed: () => store.unreviewedDeadLetters(UNREVIEWED_COUNT_CAP),
      // One node of a cluster checks, so the operator hears of a backlog once: the holder of slot 0.
      isChecker: () => this.#leases.held.some((lease) => lease.slot === 0),
      emit: (event) => emit('operational', event),
      onError: (error) => emit('failure', { where: 'dead-letter review', error }),
    });
  }

  /** The store this node uses (the producer API writes to the same data). */
  get store(): Store {
    return this.#store;
  }

  get slotCount(): number {
    return this.#slotCount;
  }

  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    // Before anything is written or compared: the first heartbeat, and the times of this node's
    // record, are on the cluster's clock. A failed read leaves offset 0 (it is read again at every
    // heartbeat).
    try {
      await this.#clusterClock.measure();
    } catch (error) {
      this.events.emit('failure', { where: 'cluster clock', error });
    }
    // Taken before the first measurement: the same instant, on the cluster's clock.
    this.#startedAt += this.#clusterClock.offsetMs;
    // Before the first lease round: a dead predecessor's slots are then free to take at once.
    await this.#localNodes?.start();
    await this.#leases.start();
    this.#supervisor.start();
    this.#purgeTimer = this.#clock.setInterval(() => void this.purge(), this.config.retention.purgeIntervalMs);
    this.#reviewWatch.start();
    this.#replays.start();
  }

  async close(): Promise<void> {
    this.#purgeTimer?.cancel();
    this.#reviewWatch.close();
    // Before the engine stops: this node's replay jobs go back to the store for another node to take.
    await this.#replays.close();
    await this.#supervisor.close();
    // Every attempt has settled: the last counts go out before the store closes.
    await this.#minutes.close();
    await this.#leases.close();
    this.#localNodes?.close();
    this.#ticker.close();
    this.#breakers.close();
    await this.#signer.close();
    await this.#sender.close();
    await this.#store.close();
  }

  /** Tells the engine there are new events (call it after a publish in this process). */
  signal(): void {
    this.#supervisor.published();
  }

  /** Resolves when the supervisor has no pump running (tests). */
  async idle(): Promise<void> {
    await this.#supervisor.settled();
    await this.#replays.settled();
    await this.#supervisor.settled();
  }

  /**
   * Looks at the oldest unreviewed dead letter now, as the timer does every
   * `deadLetters.checkIntervalMs`: emits `deadletters.unreviewed` when it is newly overdue.
   */
  async reviewDeadLetters(): Promise<void> {
    await this.#reviewWatch.check();
  }

  /** Deletes attempts and dead letters older than the retention period, and delivery minutes older than theirs. */
  async purge(): Promise<void> {
    const now = this.#clock.now();
    try {
      await this.#store.purge(now - this.config.retention.keepMs);
    } catch (error) {
      this.events.emit('failure', { where: 'retention purge', error });
    }
    try {
      await this.#store.purgeDeliveryMinutes(now - this.config.retention.deliveryMinutesKeepMs);
    } catch (error) {
      this.events.emit('failure', { where: 'retention purge of delivery minutes', error });
    }
  }

  /** Writes the delivery counts gathered on this node now, as the recorder does at each minute's end (tests, operations). */
  async flushDeliveryMinutes(): Promise<void> {
    await this.#minutes.flush();
  }

  /**
   * The delivery charts' series: one endpoint's, or every endpoint's in `within` (`endpointId: all`),
   * read from the stored delivery minutes. `within` is what the asker may see: the admin every
   * endpoint, a tenant its own.
   * @throws NotFoundError (`endpointId`) when the endpoint does not exist or is outside `within`.
   */
  async deliverySeries(request: SeriesRequest, within: SeriesScope): Promise<DeliverySeries> {
    let scope = within;
    if (request.endpointId !== ALL_ENDPOINTS) {
      const endpoint = await this.#store.getEndpoint(request.endpointId);
      if (endpoint === undefined || !isInScope(endpoint, within)) throw new NotFoundError('endpoint', request.endpointId, 'endpointId');
      scope = { kind: 'endpoints', endpointIds: [endpoint.id] };
    }
    const now = this.#clock.now();
    const { from, to } = seriesRange(request.window, now);
    return seriesOf(request, now, await this.#store.deliveryMinutes({ scope, from, to }));
  }

  /**
   * The cluster's attempts and failure rate per endpoint over the last hour, every node's, from the
   * stored delivery minutes (`lib/status/cluster-stats.ts`; they lag by up to one flush of each
   * node's minutes). `within` is what the asker may see: every endpoint, or a tenant's. An
   * endpoint's last open failure comes from its failure groups (the largest `LAST_FAILURE_GROUPS` in scope).
   */
  async deliveryStats(within: Exclude<SeriesScope, { kind: 'endpoints' }>): Promise<ClusterStats> {
    const range = statsRange(this.#clock.now());
    const [totals, groups] = await Promise.all([
      this.#store.deliveryTotals({ scope: within, ...range }),
      this.#store.failureGroups({ ...(within.kind === 'tenant' ? { tenantId: within.tenantId } : {}), limit: LAST_FAILURE_GROUPS }),
    ]);
    return clusterStatsOf(range, totals, groups);
  }

  // Endpoints

  async createEndpoint(input: unknown): Promise<{ endpoint: EndpointView; secret: string }> {
    const fields = validateNewEndpoint(input, {
      timeoutMs: this.config.delivery.timeoutMs,
      concurrency: this.config.delivery.concurrencyPerEndpoint,
      retry: { preset: this.config.delivery.retry },
      adaptiveConcurrency: this.config.delivery.adaptiveConcurrency,
    });
    const now = this.#clock.now();
    const id = fields.id ?? newId('ep');
    if (fields.id !== undefined && (await this.#store.getEndpoint(id)) !== undefined) {
      throw new ConflictError(`id: endpoint '${id}' exists already`);
    }
    const secret = generateSecret();
    const endpoint: Endpoint = {
      id,
      tenantId: fields.tenantId,
      url: fields.url,
      description: fields.description,
      eventTypes: fields.eventTypes,
      retry: fields.retry,
      timeoutMs: fields.timeoutMs,
      mode: fields.mode,
      ordering: fields.ordering,
      concurrency: fields.concurrency,
      ...(fields.rateLimit === undefined ? {} : { rateLimit: fields.rateLimit }),
      ...(fields.adaptiveConcurrency === undefined ? {} : { adaptiveConcurrency: fields.adaptiveConcurrency }),
      status: 'enabled',
      disabledReason: null,
      failingSince: null,
      secrets: [{ secret: this.#secretBox.seal(secret, id), createdAt: now, expiresAt: null }],
      createdAt: now,
      updatedAt: now,
    };
    await this.#store.createEndpoint(endpoint);
    return { endpoint: viewOf(endpoint), secret };
  }

  async listEndpoints(filter: { tenantId?: string } = {}): Promise<EndpointView[]> {
    return (await this.#store.listEndpoints(filter)).map(viewOf);
  }

  async getEndpoint(id: string): Promise<EndpointView> {
    return viewOf(await this.#endpoint(id));
  }

  /**
   * The endpoint's deliveries numbered after `request.after`, in sequence order (gap detection:
   * lib/endpoints/sequence-page.ts).
   * @throws NotFoundError (`endpointId`) for an unknown endpoint.
   */
  async listEndpointEvents(endpointId: string, request: SequencePageRequest): Promise<SequencePage> {
    await this.#endpoint(endpointId);
    const rows = await this.#store.listDeliveriesAfterSequence(endpointId, request.after, rowsToRead(request.limit));
    return sequencePageOf(rows, request.limit);
  }

  async updateEndpoint(id: string, input: unknown): Promise<EndpointView> {
    const changes: EndpointChanges = validateEndpointChanges(input);
    return this.#patch(id, changes);
  }

  async deleteEndpoint(id: string): Promise<void> {
    if (!(await this.#store.deleteEndpoint(id, this.#clock.now()))) throw new NotFoundError('endpoint', id, 'endpointId');
    await this.#supervisor.endpointChanged(undefined, id);
  }

  /** Re-enables an endpoint: its waiting deliveries go out again, its failure history starts afresh. */
  async enableEndpoint(id: string): Promise<EndpointView> {
    const view = await this.#patch(id, { status: 'enabled', disabledReason: null, failingSince: null });
    await this.#store.resumeDeliveries(id, this.#clock.now());
    this.#supervisor.signal();
    return view;
  }

  async disableEndpoint(id: string): Promise<EndpointView> {
    return this.#patch(id, { status: 'disabled', disabledReason: DisabledReason.OPERATOR });
  }

  /**
   * A new current secret; the previous one keeps signing for `signing.rotationOverlapMs`.
   * @throws NotFoundError; ConflictError when another rotation (or a re-encryption) of this
   *   endpoint's secrets was written between this one's read and its write (nothing is written).
   */
  async rotateSecret(id: string): Promise<{ endpoint: EndpointView; secret: string }> {
    const endpoint = await this.#endpoint(id);
    const now = this.#clock.now();
    const secret = generateSecret();
    const expiresAt = now + this.config.signing.rotationOverlapMs;
    const previous = endpoint.secrets
      .filter((s) => s.expiresAt === null || s.expiresAt > now)
      .map((s) => ({ ...this.#resealed(s, id), expiresAt: s.expiresAt === null ? expiresAt : Math.min(s.expiresAt, expiresAt) }));
    const sealed = this.#secretBox.seal(secret, id);
    const updated = await this.#patch(id, {
      secrets: [{ secret: sealed, createdAt: now, expiresAt: null }, ...previous],
      expectedSecrets: endpoint.secrets.map((s) => s.secret),
    });
    return { endpoint: updated, secret };
  }

  /**
   * Rewrites every endpoint's secrets that are plain or sealed under a previous key under the
   * current key (`herald secrets reencrypt`); afterwards the previous keys can be dropped. An
   * endpoint whose secrets this node cannot open is left as it is and listed in `unreadable`.
   * `onProgress` hears after each endpoint. A no-op without a key (secrets stay plain).
   */
  async reencryptSecrets(onProgress: (done: number, total: number) => void = () => {}): Promise<ReencryptOutcome> {
    const endpoints = await this.#store.listEndpoints({});
    const unreadable: Array<{ endpointId: string; error: SecretUnreadableError }> = [];
    let rewritten = 0;
    for (const [i, listed] of endpoints.entries()) {
      try {
        if (await this.#reencrypt(listed)) rewritten++;
      } catch (error) {
        if (!(error instanceof SecretUnreadableError)) throw error;
        unreadable.push({ endpointId: listed.id, error });
      }
      onProgress(i + 1, endpoints.length);
    }
    return { checked: endpoints.length, rewritten, unreadable };
  }

  // Events

  /** Publishes events over the API (outside the producer's database transaction). */
  async publish(input: unknown): Promise<OutboxEvent[]> {
    const inputs = Array.isArray(input) ? input : [input];
    if (inputs.length === 0 || inputs.length > 1000) throw new ValidationError('body', 'must be an event or a list of 1 to 1000 events');
    const events: OutboxEvent[] = [];
    const fresh: OutboxEvent[] = [];
    const validated = validateEventInputs(input, { maxPayloadBytes: this.config.delivery.maxPayloadBytes });
    for (const [i, valid] of validated.entries()) {
      if (valid.id !== undefined) {
        const existing = await this.#store.getEvent(valid.id);
        if (existing !== undefined) {
          events.push(existing);
          continue;
        }
      }
      // In a list, the field names the item: `[3].tenantId`.
      const at = inputs.length > 1 ? `[${i}].` : '';
      if (!(await this.#store.tenantExists(valid.tenantId))) throw new NotFoundError('tenant', valid.tenantId, `${at}tenantId`);
      if (valid.endpointId !== undefined) {
        const target = await this.#store.getEndpoint(valid.endpointId);
        if (target === undefined || target.tenantId !== valid.tenantId) {
          throw new NotFoundError('endpoint', valid.endpointId, `${at}endpointId`);
        }
      }
      const event = outboxEventOf(valid, this.#clock.now());
      events.push(event);
      fresh.push(event);
    }
    if (fresh.length > 0) await this.#store.appendEvents(fresh);
    this.#supervisor.published();
    return events;
  }

  /**
   * Sends a `herald.test` event to this one endpoint (whatever its event-type filter) through the
   * usual path: outbox, signing, retries, the delivery log. Its payload is small and says so.
   * @returns the event and the id of its delivery, to follow its attempts.
   * @throws NotFoundError (`endpointId`).
   */
  async sendTestEvent(endpointId: string): Promise<{ event: OutboxEvent; deliveryId: string }> {
    const endpoint = await this.#endpoint(endpointId);
    const sentAt = new Date(this.#clock.now()).toISOString();
    const payload = { test: true, endpointId, message: 'A test event sent from Herald: answer 2xx, nothing to do.', sentAt };
    const [event] = await this.publish({ tenantId: endpoint.tenantId, endpointId, type: TEST_EVENT_TYPE, payload });
    if (event === undefined) throw new Error('publish returned no event');
    return { event, deliveryId: deliveryIdFor(event.id, endpointId, event.createdAt) };
  }

  // Delivery log

  async listDeliveries(filter: DeliveryFilter): Promise<Delivery[]> {
    return this.#store.listDeliveries(filter);
  }

  async getDelivery(id: string): Promise<Delivery> {
    const delivery = await this.#store.getDelivery(id);
    if (delivery === undefined) throw new NotFoundError('delivery', id, 'deliveryId');
    return delivery;
  }

  /**
   * One delivery and the payload it sends (the event's JSON text, byte for byte); `null` once the
   * retention purge has deleted the event.
   */
  async getDeliveryWithPayload(id: string): Promise<Delivery & { readonly payload: string | null }> {
    const delivery = await this.getDelivery(id);
    const event = await this.#store.getEvent(delivery.eventId);
    return { ...delivery, payload: event?.payload ?? null };
  }

  async listAttempts(deliveryId: string): Promise<Attempt[]> {
    await this.getDelivery(deliveryId);
    return this.#store.listAttempts(deliveryId);
  }

  // Dead letters

  async listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetterView[]> {
    const letters = await this.#store.listDeadLetters(filter);
    const now = this.#clock.now();
    return letters.map((letter) => ({ ...letter, ageMs: Math.max(0, now - letter.createdAt) }));
  }

  async getDeadLetter(id: string): Promise<DeadLetterView> {
    const deadLetter = await this.#store.getDeadLetter(id);
    if (deadLetter === undefined) throw new NotFoundError('dead letter', id, 'deadLetterId');
    return { ...deadLetter, ageMs: Math.max(0, this.#clock.now() - deadLetter.createdAt) };
  }

  /**
   * Acknowledges or discards one open dead letter with `{note, by}` (lib/store/triage.ts).
   * @throws ValidationError naming `note`, `by` or an unknown field; NotFoundError (`deadLetterId`);
   *   ConflictError when it was replayed or discarded already.
   */
  async triageDeadLetter(id: string, state: OperatorTriageState, input: unknown): Promise<DeadLetterView> {
    const { note, by } = validateTriageInput(input);
    const [skipped] = (await this.#store.triageDeadLetters({ ids: [id], state, note, by }, this.#clock.now())).skipped;
    if (skipped?.reason === 'unknown') throw new NotFoundError('dead letter', id, 'deadLetterId');
    if (skipped !== undefined) {
      throw new ConflictError(`deadLetterId: '${id}' was ${skipped.reason} already; only a new or acknowledged dead letter can be acknowledged or discarded`);
    }
    return this.getDeadLetter(id);
  }

  /** The same for `{ids, note, by}`: the open ones are set, the others (unknown, replayed, discarded) skipped with why. */
  async triageDeadLetters(state: OperatorTriageState, input: unknown): Promise<TriageOutcome> {
    const { ids, note, by } = validateBulkTriageInput(input);
    return this.#store.triageDeadLetters({ ids, state, note, by }, this.#clock.now());
  }

  /** Replays one dead letter: same event id, a new round of attempts. */
  async replayDeadLetter(id: string): Promise<void> {
    const deadLetter = await this.getDeadLetter(id);
    const replayed = deadLetter.replayedAt === null ? await this.#store.replayDeadLetters({ ids: [id] }, this.#clock.now()) : [];
    // Checked on what the store did, so two replays racing each other cannot both succeed.
    if (replayed.length === 0) throw new ConflictError(`deadLetterId: '${id}' was replayed already`);
    this.#supervisor.signal();
  }

  /** Replays every dead letter not yet replayed that matches the filter; returns their ids. */
  async replayDeadLetters(filter: DeadLetterFilter): Promise<string[]> {
    const ids = await this.#store.replayDeadLetters(filter, this.#clock.now());
    this.#supervisor.signal();
    return ids;
  }

  /** How many dead letters `replayDeadLetters(filter)` would replay now; changes nothing (a dry run). */
  async countReplayableDeadLetters(filter: DeadLetterFilter): Promise<number> {
    return this.#store.countReplayableDeadLetters(filter);
  }

  /**
   * Starts a paced replay of the open dead letters matching `filter` (see lib/dead-letters/replay-jobs.ts);
   * the job is kept in the store and run by this node until it ends, closes or crashes.
   * @throws ValidationError (`HERALD_INVALID_INPUT`) for a bad `chunkSize`.
   */
  async startReplay(filter: ReplayJobFilter, options: ReplayJobOptions = {}): Promise<ReplayJob> {
    return this.#replays.create(filter, options);
  }

  /** Any node's job, read from the store. @throws NotFoundError (`HERALD_NOT_FOUND`). */
  async getReplay(id: string): Promise<ReplayJob> {
    return this.#replays.get(id);
  }

  /** The newest 100 replay jobs of every node, newest first. */
  async listReplays(): Promise<ReplayJob[]> {
    return this.#replays.list();
  }

  /**
   * Stops a running replay job, whichever node runs it; the rest of its dead letters stay dead.
   * @throws NotFoundError (`HERALD_NOT_FOUND`).
   */
  async cancelReplay(id: string): Promise<ReplayJob> {
    return this.#replays.cancel(id);
  }

  // Failures, grouped

  /** The failing deliveries (retrying, dead) grouped by endpoint and failure kind, the largest first. */
  async failureGroups(filter: FailureGroupFilter = {}): Promise<FailureGroup[]> {
    return this.#store.failureGroups(filter);
  }

  /**
   * Replays a group, `{endpointId, kind}`: its retrying deliveries become due now and its open
   * dead letters are replayed. Returns how many of each.
   * @throws ValidationError (`HERALD_INVALID_INPUT`) naming the field and rule.
   */
  async replayFailureGroup(input: unknown): Promise<FailureGroupReplay> {
    const group = validateFailureGroupInput(input);
    const replayed = await this.#store.replayFailureGroup(group, this.#clock.now());
    this.#supervisor.signal();
    return replayed;
  }

  // Status

  /** Never throws for the store: an unreachable store shows in `store` (and `deliveries` is empty). */
  async status(): Promise<StatusSnapshot> {
    const askedAt = this.#clock.now();
    let deliveries: Readonly<Record<string, number>> = {};
    let unfannedEvents = 0;
    let unreviewed: { readonly count: number; readonly oldestAt: number | null } = { count: 0, oldestAt: null };
    let nodes: readonly ClusterNodeStatus[] = [];
    let storeError: string | null = null;
    try {
      let records: readonly NodeRecord[];
      let leases: readonly SlotLease[];
      [deliveries, unfannedEvents, unreviewed, records, leases] = await Promise.all([
        this.#store.countDeliveries(),
        this.#store.countUnfannedEvents(OUTBOX_COUNT_CAP),
        this.#store.unreviewedDeadLetters(UNREVIEWED_COUNT_CAP),
        // Live as the lease keeper counts them: a heartbeat within a lease period.
        this.#store.listNodes(askedAt - this.config.engine.leaseMs + 1),
        this.#store.listLeases(),
      ]);
      nodes = clusterNodesOf(records, leases, askedAt);
    } catch (error) {
      storeError = (error as Error)?.message ?? String(error);
    }
    const availability = this.storeAvailability;
    const store = {
      reachable: storeError === null,
      available: storeError === null && availability.available,
      latencyMs: this.#clock.now() - askedAt,
      error: storeError ?? (availability.available ? null : availability.reason),
    };
    return {
      node: this.nodeId,
      startedAt: this.#startedAt,
      slotsOwned: this.#leases.held.length,
      slotCount: this.#slotCount,
      inFlight: this.#permits.inFlight,
      clockOffsetMs: Math.round(this.#clusterClock.offsetMs),
      deliveries,
      unfannedEvents,
      fencedWrites: this.#fencedWrites,
      deadLetters: {
        unreviewed: unreviewed.count,
        oldestUnreviewedAt: unreviewed.oldestAt,
        oldestUnreviewedAgeMs: unreviewed.oldestAt === null ? 0 : Math.max(0, askedAt - unreviewed.oldestAt),
        reviewWithinMs: this.config.deadLetters.reviewWithinMs,
      },
      store,
      cluster: {
        nodes,
        liveNodes: this.#leases.liveNodes,
        leases: this.#leases.held.map(({ slot, epoch, until }) => ({ slot, epoch, until })),
        draining: this.#leases.draining,
      },
      actors: [...this.#supervisor.actors.values()].map((actor) => ({
        endpointId: actor.endpoint.id,
        breaker: actor.breakerState,
        queued: actor.queued,
        running: actor.running,
        concurrencyLimit: actor.concurrencyLimit,
        pausedUntil: actor.pausedUntil,
        lastError: actor.lastError,
      })),
    };
  }

  /** Whether the store takes this process's work, from its recent calls (see `StoreHealth`). */
  get storeAvailability(): StoreAvailability {
    return this.#storeHealth.availability;
  }

  get leases(): readonly SlotLease[] {
    return this.#leases.held;
  }

  /**
   * One endpoint's secrets under the current key; whether anything was written. Only the secrets
   * are written, and only while they are still those read: a rotation written meanwhile (on any
   * node) is read again and re-encrypted in turn, never overwritten. Gone meanwhile: nothing to do.
   */
  async #reencrypt(listed: Endpoint): Promise<boolean> {
    let endpoint: Endpoint | undefined = listed;
    for (let round = 1; endpoint !== undefined; round++) {
      if (!endpoint.secrets.some((s) => this.#secretBox.needsSealing(s.secret))) return false;
      const id = endpoint.id;
      const secrets = endpoint.secrets.map((s) => ({ ...s, secret: this.#secretBox.seal(this.#secretBox.open(s.secret, id), id) }));
      try {
        const updated = await this.#store.updateEndpoint(id, { secrets, expectedSecrets: endpoint.secrets.map((s) => s.secret) }, this.#clock.now());
        if (updated === undefined) return false;
        // Not awaited: the same secrets under another key, and a rotation walks every endpoint.
        void this.#supervisor.endpointChanged(updated, id);
        return true;
      } catch (error) {
        // Each conflict is another write to these secrets that landed first: a few in a row mean a loop, not a race.
        if (!hasCode(error, ErrorCode.CONFLICT) || round >= REENCRYPT_ROUNDS) throw error;
      }
      endpoint = await this.#store.getEndpoint(id);
    }
    return false;
  }

  /** A stored secret under the current key when it can be opened; as it is when not (it is never lost). */
  #resealed(secret: SigningSecret, endpointId: string): SigningSecret {
    if (!this.#secretBox.needsSealing(secret.secret)) return secret;
    try {
      return { ...secret, secret: this.#secretBox.seal(this.#secretBox.open(secret.secret, endpointId), endpointId) };
    } catch (error) {
      if (error instanceof SecretUnreadableError) return secret;
      throw error;
    }
  }

  async #endpoint(id: string): Promise<Endpoint> {
    const endpoint = await this.#store.getEndpoint(id);
    if (endpoint === undefined) throw new NotFoundError('endpoint', id, 'endpointId');
    return endpoint;
  }

  async #patch(id: string, patch: Parameters<Store['updateEndpoint']>[1]): Promise<EndpointView> {
    const updated = await this.#store.updateEndpoint(id, patch, this.#clock.now());
    if (updated === undefined) throw new NotFoundError('endpoint', id, 'endpointId');
    await this.#supervisor.endpointChanged(updated, id);
    return viewOf(updated);
  }
}

/** Each live node with the unexpired leases it holds at `now`. */
function clusterNodesOf(records: readonly NodeRecord[], leases: readonly SlotLease[], now: number): ClusterNodeStatus[] {
  const held = new Map<string, number>();
  for (const lease of leases) if (lease.until > now) held.set(lease.owner, (held.get(lease.owner) ?? 0) + 1);
  return records.map((node) => ({
    id: node.id,
    startedAt: node.startedAt,
    lastHeartbeatAt: node.seenAt,
    slotsHeld: held.get(node.id) ?? 0,
    inFlight: node.inFlight,
    clockOffsetMs: node.clockOffsetMs,
  }));
}

function viewOf(endpoint: Endpoint): EndpointView {
  const { secrets, rateLimit, adaptiveConcurrency, ...rest } = endpoint;
  const previous = secrets.find((s) => s.expiresAt !== null);
  return {
    ...rest,
    rateLimit: rateLimit ?? null,
    adaptiveConcurrency: adaptiveConcurrency ?? null,
    secretCount: secrets.length, previousSecretExpiresAt: previous?.expiresAt ?? null,
  };
}
