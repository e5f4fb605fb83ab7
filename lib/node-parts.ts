/**
 * The parts of one Herald node, built from its configuration and wired together, and the order
 * they start and stop in. `Herald` (lib/herald.ts) is the face the library and the admin API
 * use; this is what stands behind it.
 *
 * Every part runs on the cluster clock (lib/cluster/cluster-clock.ts): this node's clock
 * corrected by its measured offset to the store's, since the times they write are compared by
 * other nodes (leases, heartbeats, claims, due times, fan-out). Every store call goes through the
 * store health monitor, so readiness follows what the store actually does.
 *
 *   built ──start()──► running ──close()──► closed
 *
 * `start()`: measure the clock's offset → record this process beside the data (releasing the
 * leases of a provably dead predecessor on this host, lib/cluster/local-nodes.ts) → take slot
 * leases → start the supervisor, the retention purge, the dead-letter review, the replay jobs.
 * `close()`: replay jobs handed back → supervisor (stop claiming; running attempts settle, queued
 * ones are given back) → delivery minutes flushed → leases released → node record removed →
 * ticker, breakers → signing pool → sender → store.
 */
import type { EventEmitter } from 'node:events';
import type { Clock, Random } from './clock.ts';
import { ClusterClock } from './cluster/cluster-clock.ts';
import { LeaseKeeper } from './cluster/lease-keeper.ts';
import { LocalNodes, type ProcessProbe } from './cluster/local-nodes.ts';
import { SlotWeigher } from './cluster/slot-weigher.ts';
import type { HeraldConfig } from './config/config.ts';
import { DeadLetterDesk } from './dead-letters/dead-letter-desk.ts';
import { ReplayJobs } from './dead-letters/replay-jobs.ts';
import { ReviewWatch, UNREVIEWED_COUNT_CAP } from './dead-letters/review-watch.ts';
import { deliveryHeaders } from './delivery/delivery-headers.ts';
import { ClientCertificates, readCaFile } from './delivery/client-tls.ts';
import { parseProxyUrl } from './delivery/egress-proxy.ts';
import { authorizedSend, requestHeaders } from './delivery/endpoint-auth.ts';
import { OAuthTokens } from './delivery/oauth-tokens.ts';
import { createSender, type SendRequest, type SendResult, type Sender, type SenderOptions } from './delivery/sender.ts';
import { EndpointAdmin, type EndpointHandoff } from './endpoints/endpoint-admin.ts';
import { SecretAdmin } from './endpoints/secret-admin.ts';
import { BreakerFamily } from './engine/breaker.ts';
import { EventTypeAdmin } from './event-types/event-type-admin.ts';
import type { EngineEvents } from './engine/engine-events.ts';
import { ORIGIN_DEPTH_PER_CONNECTION, SendPermits } from './engine/send-permits.ts';
import { Supervisor } from './engine/supervisor.ts';
import { Ticker } from './engine/ticker.ts';
import { TickerWakeTimers } from './engine/wake-timers.ts';
import { Publisher } from './producer/publisher.ts';
import type { SecretBox } from './signing/secret-box.ts';
import { SigningKeys } from './signing/signing-keys.ts';
import { SigningPool } from './signing/signing-pool.ts';
import type { Store } from './store/port.ts';
import { StoreHealth } from './store/store-health.ts';
import { DeliveryLog } from './status/delivery-log.ts';
import { DeliveryMinuteRecorder } from './status/minute-recorder.ts';
import { NodeStatus } from './status/node-status.ts';
import { TenantTokens } from './tenants/tenant-tokens.ts';
import type { Endpoint } from './model.ts';
import { tracedSend } from './tracing/attempt-span.ts';

/** How much of a token endpoint's response the token sender keeps: room for a large JWT. */
const TOKEN_RESPONSE_MAX_BYTES = 16 * 1_024;

/** This process's record beside the data `config.store` names (none for an injected store). */
export interface LocalNodeRecord {
  readonly folder: string;
  readonly storeKey: string;
  readonly probe: ProcessProbe | undefined;
}

export class NodeParts {
  readonly clusterClock: ClusterClock;
  /** The cluster clock: what every part reads. */
  readonly clock: Clock;
  readonly storeHealth: StoreHealth;
  /** The store, seen through the health monitor. */
  readonly store: Store;
  readonly leases: LeaseKeeper;
  readonly supervisor: Supervisor;
  readonly replays: ReplayJobs;
  readonly reviewWatch: ReviewWatch;
  readonly minutes: DeliveryMinuteRecorder;
  readonly permits: SendPermits;
  // The services the façade offers, one job each.
  readonly endpoints: EndpointAdmin;
  readonly secrets: SecretAdmin;
  readonly publisher: Publisher;
  readonly deliveryLog: DeliveryLog;
  readonly deadLetters: DeadLetterDesk;
  readonly tenantTokens: TenantTokens;
  readonly eventTypes: EventTypeAdmin;
  readonly status: NodeStatus;
  readonly #config: HeraldConfig;
  readonly #emit: <K extends keyof EngineEvents>(name: K, ...args: EngineEvents[K]) => void;
  readonly #sender: Sender;
  /** The sender of OAuth token requests: the same guard, its own pools and a larger response kept (a token's JSON). */
  readonly #tokenSender: Sender;
  readonly #clientCertificates: ClientCertificates;
  readonly #signer: SigningPool;
  readonly #ticker: Ticker;
  readonly #breakers: BreakerFamily;
  readonly #localNodes: LocalNodes | undefined;
  #startedAt: number;
  #fencedWrites = 0;
  #purgeTimer: { cancel(): void } | undefined;

  constructor(
    node: { readonly nodeId: string; readonly config: HeraldConfig; readonly slotCount: number; readonly secretBox: SecretBox },
    deps: {
      readonly store: Store;
      /** This node's own clock, which the cluster clock corrects. */
      readonly clock: Clock;
      readonly random: Random;
      readonly events: EventEmitter<EngineEvents>;
      readonly local: LocalNodeRecord | undefined;
    },
  ) {
    const { nodeId, config, slotCount, secretBox } = node;
    this.#config = config;
    const emit = deps.events.emit.bind(deps.events) as <K extends keyof EngineEvents>(name: K, ...args: EngineEvents[K]) => void;
    this.#emit = emit;
    // The one place the clock is swapped: every part below reads the cluster's clock. Measured in
    // start() and at every heartbeat; offset 0 until then.
    this.clusterClock = new ClusterClock({
      base: deps.clock,
      serverTime: () => this.store.serverTime(),
      onSkewChange: (change) => emit('clockSkew', change),
    });
    const clock: Clock = this.clusterClock;
    this.clock = clock;
    // An idle node still heartbeats, so a stuck store shows within a heartbeat.
    this.storeHealth = new StoreHealth({ clock });
    const store = this.storeHealth.monitor(deps.store);
    this.store = store;
    this.#startedAt = clock.now();
    const senderOptions: SenderOptions = {
      clock,
      allowNetworks: config.allowNetworks,
      responseBodyMaxBytes: config.delivery.responseBodyMaxBytes,
      connectionsPerOrigin: config.delivery.connectionsPerOrigin,
      proxy: config.delivery.proxy,
      ca: readCaFile(config.delivery.caFile),
    };
    this.#sender = createSender(senderOptions);
    // Token requests leave as deliveries do: through the proxy, trusting the same CAs.
    this.#tokenSender = createSender({ ...senderOptions, responseBodyMaxBytes: TOKEN_RESPONSE_MAX_BYTES, connectionsPerOrigin: 2 });
    this.#clientCertificates = new ClientCertificates(secretBox);
    this.#signer = new SigningPool({ threads: config.signing.threads });
    this.#ticker = new Ticker({ clock, tickMs: config.engine.tickMs });
    this.#breakers = new BreakerFamily(clock, config.breaker);
    this.permits = new SendPermits({
      maxInFlight: config.delivery.maxInFlight,
      originDepth: config.delivery.connectionsPerOrigin * ORIGIN_DEPTH_PER_CONNECTION,
      tenantWeights: config.delivery.tenantWeights,
    });
    const weigher = new SlotWeigher({ owner: nodeId, slotCount }, { store, clock, onError: (error) => emit('failure', { where: 'slot weights', error }) });
    this.leases = new LeaseKeeper(
      { owner: nodeId, slotCount, leaseMs: config.engine.leaseMs, renewIntervalMs: config.engine.renewIntervalMs },
      {
        store,
        clock,
        clockOffset: this.clusterClock,
        inFlight: () => this.permits.inFlight,
        onChange: (held) => {
          const slots = held.map((lease) => lease.slot);
          this.supervisor.leasesChanged(slots);
          emit('leases', { slots, liveNodes: this.leases.liveNodes });
        },
        drain: (slots) => this.supervisor.drainSlots(slots),
        released: (slots) => this.supervisor.slotsReleased(slots),
        onError: (error) => emit('failure', { where: 'lease renewal', error }),
        slotWeights: (liveNodes) => weigher.weights(liveNodes),
      },
    );
    this.#localNodes =
      deps.local === undefined
        ? undefined
        : new LocalNodes(
            { folder: deps.local.folder, nodeId, storeKey: deps.local.storeKey },
            {
              store,
              clock,
              ...(deps.local.probe === undefined ? {} : { probe: deps.local.probe }),
              reaped: (record) => emit('predecessorReaped', record),
              onError: (file, error) => emit('failure', { where: `node record ${file}`, error }),
            },
          );
    this.supervisor = this.#supervisorOf(nodeId, slotCount, new SigningKeys(secretBox), secretBox, deps.random);
    // The charts' counts: added up per (endpoint, minute) here, written in batches, never per attempt.
    this.minutes = new DeliveryMinuteRecorder(deps.events, {
      clock,
      write: (increments) => store.addDeliveryMinutes(increments),
      onError: (error, droppedAttempts) =>
        emit('failure', { where: droppedAttempts === 0 ? 'delivery minutes' : `delivery minutes (${droppedAttempts} attempts' counts dropped)`, error }),
    });
    this.replays = new ReplayJobs({
      clock,
      store,
      owner: nodeId,
      concurrencyLimit: (endpointId) => this.supervisor.actors.get(endpointId)?.concurrencyLimit,
      signal: () => this.supervisor.signal(),
      onError: (jobId, error) => emit('failure', { where: `replay job ${jobId}`, error }),
    });
    // A settled delivery may leave its endpoint room for replays: the jobs look at once, not at their next poll.
    deps.events.on('attempt', (attempt) => {
      if (attempt.settlement.kind !== 'retry') this.replays.nudge();
    });
    this.reviewWatch = new ReviewWatch(config.deadLetters, {
      clock,
      unreviewed: () => store.unreviewedDeadLetters(UNREVIEWED_COUNT_CAP),
      // One node of a cluster checks, so the operator hears of a backlog once: the holder of slot 0.
      isChecker: () => this.leases.held.some((lease) => lease.slot === 0),
      emit: (event) => emit('operational', event),
      onError: (error) => emit('failure', { where: 'dead-letter review', error }),
    });

    const engine: EndpointHandoff = {
      endpointChanged: (endpoint, id) => this.supervisor.endpointChanged(endpoint, id),
      signal: () => this.supervisor.signal(),
    };
    this.endpoints = new EndpointAdmin({
      store,
      clock,
      secretBox,
      defaults: {
        timeoutMs: config.delivery.timeoutMs,
        concurrency: config.delivery.concurrencyPerEndpoint,
        retry: { preset: config.delivery.retry },
        adaptiveConcurrency: config.delivery.adaptiveConcurrency,
      },
      engine,
    });
    this.secrets = new SecretAdmin({ store, clock, secretBox, rotationOverlapMs: config.signing.rotationOverlapMs, endpoints: this.endpoints, engine });
    this.publisher = new Publisher({
      store,
      clock,
      maxPayloadBytes: config.delivery.maxPayloadBytes,
      tracing: config.tracing.enabled,
      published: () => this.supervisor.published(),
    });
    this.deliveryLog = new DeliveryLog({ store, clock });
    this.deadLetters = new DeadLetterDesk({ store, clock, signal: () => this.supervisor.signal() });
    this.tenantTokens = new TenantTokens({ store, clock });
    this.eventTypes = new EventTypeAdmin({ store, clock });
    this.status = new NodeStatus(
      {
        nodeId,
        slotCount,
        leaseMs: config.engine.leaseMs,
        reviewWithinMs: config.deadLetters.reviewWithinMs,
        proxy: config.delivery.proxy === null ? null : parseProxyUrl(config.delivery.proxy, 'delivery.proxy').display,
        startedAt: () => this.#startedAt,
        inFlight: () => this.permits.inFlight,
        clockOffsetMs: () => this.clusterClock.offsetMs,
        fencedWrites: () => this.#fencedWrites,
        storeAvailability: () => this.storeHealth.availability,
        leases: () => this.leases,
        actors: () =>
          [...this.supervisor.actors.values()].map((actor) => ({
            endpointId: actor.endpoint.id,
            breaker: actor.breakerState,
            queued: actor.queued,
            running: actor.running,
            concurrencyLimit: actor.concurrencyLimit,
            pausedUntil: actor.pausedUntil,
            lastError: actor.lastError,
          })),
      },
      { store, clock },
    );
  }

  async start(): Promise<void> {
    // Before anything is written or compared: the first heartbeat, and the times of this node's
    // record, are on the cluster's clock. A failed read leaves offset 0 (it is read again at every
    // heartbeat).
    try {
      await this.clusterClock.measure();
    } catch (error) {
      this.#emit('failure', { where: 'cluster clock', error });
    }
    // Taken before the first measurement: the same instant, on the cluster's clock.
    this.#startedAt += this.clusterClock.offsetMs;
    // Before the first lease round: a dead predecessor's slots are then free to take at once.
    await this.#localNodes?.start();
    await this.leases.start();
    this.supervisor.start();
    this.#purgeTimer = this.clock.setInterval(() => void this.purge(), this.#config.retention.purgeIntervalMs);
    this.reviewWatch.start();
    this.replays.start();
  }

  async close(): Promise<void> {
    this.#purgeTimer?.cancel();
    this.reviewWatch.close();
    // Before the engine stops: this node's replay jobs go back to the store for another node to take.
    await this.replays.close();
    await this.supervisor.close();
    // Every attempt has settled: the last counts go out before the store closes.
    await this.minutes.close();
    await this.leases.close();
    this.#localNodes?.close();
    this.#ticker.close();
    this.#breakers.close();
    await this.#signer.close();
    await this.#sender.close();
    await this.#tokenSender.close();
    await this.store.close();
  }

  /** Deletes attempts and dead letters older than the retention period, and delivery minutes older than theirs. */
  async purge(): Promise<void> {
    const now = this.clock.now();
    try {
      await this.store.purge(now - this.#config.retention.keepMs);
    } catch (error) {
      this.#emit('failure', { where: 'retention purge', error });
    }
    try {
      await this.store.purgeDeliveryMinutes(now - this.#config.retention.deliveryMinutesKeepMs);
    } catch (error) {
      this.#emit('failure', { where: 'retention purge of delivery minutes', error });
    }
  }

  #supervisorOf(nodeId: string, slotCount: number, signingKeys: SigningKeys, secretBox: SecretBox, random: Random): Supervisor {
    const config = this.#config;
    const { clock, store } = this;
    const emit = this.#emit;
    const open = (stored: string, endpointId: string): string => secretBox.open(stored, endpointId);
    const tokens = new OAuthTokens({ clock, send: (request) => this.#tokenSender.send(request), open });
    // An endpoint with a client certificate has its own connections (lib/delivery/client-tls.ts).
    const sendAs = (request: SendRequest, endpoint?: Endpoint): Promise<SendResult> => {
      const clientTls = endpoint === undefined ? undefined : this.#clientCertificates.of(endpoint);
      return this.#sender.send(clientTls === undefined ? request : { ...request, clientTls });
    };
    const send = authorizedSend({ clock, send: sendAs, tokens });
    return new Supervisor(
      {
        slotCount,
        sweepIntervalMs: config.engine.sweepIntervalMs,
        claimBatchSize: config.engine.claimBatchSize,
        claimPerEndpoint: config.engine.claimPerEndpoint,
        actorIdleMs: config.engine.actorIdleMs,
        mailboxBudget: config.delivery.maxInFlight * 4,
        endpointSyncIntervalMs: config.engine.endpointSyncIntervalMs,
        tracing: config.tracing.enabled,
      },
      {
        store,
        clock,
        emit,
        owner: nodeId,
        actor: {
          clock,
          random,
          permits: this.permits,
          breakers: this.#breakers,
          createTimers: (listener) => new TickerWakeTimers(this.#ticker, listener),
          health: config.health,
          disableOnGone: config.delivery.disableOnGone,
          emit,
          sign: async (job, endpoint, timestampSec) => {
            // Opened with the signing keys, so a client key this node cannot open makes the delivery wait the same way.
            this.#clientCertificates.of(endpoint);
            const keys = signingKeys.active(endpoint, clock.now());
            const { sequence } = job.delivery;
            const signatures = await this.#signer.signRequest({ keys, id: job.event.id, timestampSec, body: job.event.payload, sequence });
            return requestHeaders(endpoint, deliveryHeaders(job.event.id, timestampSec, signatures, sequence), open);
          },
          send: tracedSend(send, config.tracing.enabled),
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
  }
}
