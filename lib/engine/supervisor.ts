/**
 * The supervisor: turns the outbox into work for actors. It wires the stages and runs them in
 * order, one pump at a time:
 *
 *   fan-out stage (fan-out-stage.ts)   outbox ─► deliveries, the ones with room claimed as written
 *   claim stage (claim-stage.ts)       discovery and refills: due deliveries claimed for actors with room
 *   actor registry (actor-registry.ts) the actors: made on demand, closed on drain, eviction, close
 *   settle stage (settle-stage.ts)     the actors' results written, retried while the store fails
 *
 * A pump runs whenever there may be work: a signal (a publish in this process, another process's
 * commit seen by `store.watch`, an actor's wake-up from its timer wheel) or the periodic sweep,
 * which guarantees that nothing due is missed if a signal is; and, paced, when attempts finish.
 * One pump at a time; a request during a pump makes it go round once more (`CoalescedRounds`).
 *
 *   signalled pump: fan out new events (if the last fan-out stopped at the mailbox budget, first
 *                   the oldest events of quiet tenants) ─► discover ─► refill ─► evict idle actors
 *   publish pump:   fan out (the same) ─► refill ─► evict (a publish in this process)
 *   paced pump:     refill ─► evict idle actors; and fan out, if the last fan-out stopped at the
 *                   mailbox budget; discover too, if the last discovery did (`discoveryDue`)
 *
 * A publish during a round ends it at the next stage (`#cutShort`), never two rounds in a row.
 *
 * Slots being handed to another node are drained (the registry closes their actors and gives
 * back whatever a claim still returns for them) until the lease is released.
 *
 * Start and stop order: `start()` starts the endpoint sync, then the store watch and the sweep,
 * then signals. `close()` stops the pumps, the claim stage and the failed settles' retries; stops
 * signals, the sweep and the endpoint sync; waits for the running pump; closes every actor (queued
 * work given back to the store, running attempts finish and settle); then writes the last settles.
 */
import type { Clock } from '../clock.ts';
import { CoalescedRounds } from '../coalesced-rounds.ts';
import type { Endpoint } from '../model.ts';
import type { Store } from '../store/port.ts';
import type { ActorDeps, EndpointActor } from './actor.ts';
import { ActorRegistry } from './actor-registry.ts';
import { ClaimStage } from './claim-stage.ts';
import { EndpointSync } from './endpoint-sync.ts';
import type { EmitEngineEvent } from './engine-events.ts';
import { FanOutStage } from './fan-out-stage.ts';
import { SettleStage } from './settle-stage.ts';

export interface SupervisorOptions {
  readonly slotCount: number;
  /** @default 1000 */
  readonly sweepIntervalMs: number;
  /** Deliveries claimed per store round trip. @default 100 */
  readonly claimBatchSize: number;
  /** At most this many per endpoint per claim, for fairness. @default 8 */
  readonly claimPerEndpoint: number;
  /** Idle actors are evicted after this long. @default 60 s */
  readonly actorIdleMs: number;
  /** Deliveries held in all mailboxes at once; beyond it nothing more is claimed. */
  readonly mailboxBudget: number;
  /** How often the endpoint change log is read, so every node's actors follow a change. @default 250 */
  readonly endpointSyncIntervalMs: number;
  /** OpenTelemetry spans for fan-out batches (`tracing.enabled`). @default true */
  readonly tracing?: boolean;
}

export interface SupervisorDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly emit: EmitEngineEvent;
  /** The lease owner id this node claims as. */
  readonly owner: string;
  /** Everything an actor needs but the supervisor's own `settle` and `wake`. */
  readonly actor: Omit<ActorDeps, 'settle' | 'wake'>;
  /** Counts fenced writes; the caller decides how to surface them. */
  onFenced(deliveryId: string): void;
}

export class Supervisor {
  readonly #options: SupervisorOptions;
  readonly #deps: SupervisorDeps;
  readonly #actors: ActorRegistry;
  readonly #claims: ClaimStage;
  readonly #fanOuts: FanOutStage;
  readonly #settles: SettleStage;
  /** Brings the actors to their endpoints' current versions, whichever node changed them. */
  readonly #endpointSync: EndpointSync;
  readonly #pumps: CoalescedRounds;
  #unwatch: (() => void) | undefined;
  #sweep: { cancel(): void } | undefined;
  #closed = false;
  /** Pumps wait for `start()`: before it, this node holds no lease to claim with. */
  #started = false;
  /** A signal asked for discovery (and fan-out) since the last one ran. */
  #discover = false;
  /** A local publish asked for fan-out since the last one ran. */
  #fanOutWanted = false;
  /** The last round was cut short for a publish (see `#cutShort`): this one runs to its end. */
  #lastRoundCut = false;

  constructor(options: SupervisorOptions, deps: SupervisorDeps) {
    this.#options = options;
    this.#deps = deps;
    const { store, clock, owner } = deps;
    this.#pumps = new CoalescedRounds({
      round: () => this.#round(),
      onError: (error) => deps.emit('failure', { where: 'supervisor pump', error }),
      goOn: () => !this.#closed,
    });
    // Made before the registry, which hands its function to every actor; it reaches the claim stage only when called.
    this.#settles = new SettleStage({
      store,
      clock,
      emit: deps.emit,
      claims: { mayHaveMore: (id, tenantId) => this.#claims.mayHaveMore(id, tenantId), freed: (starving) => this.#claims.freed(starving) },
      onFenced: (id) => deps.onFenced(id),
    });
    this.#actors = new ActorRegistry(
      { slotCount: options.slotCount, actorIdleMs: options.actorIdleMs, mailboxBudget: options.mailboxBudget },
      {
        store,
        clock,
        // One object, made once, so an actor holds no closures of its own.
        actor: { ...deps.actor, settle: (settlement, actor) => this.#settles.settle(settlement, actor), wake: () => this.signal() },
      },
    );
    this.#claims = new ClaimStage(
      { claimBatchSize: options.claimBatchSize, claimPerEndpoint: options.claimPerEndpoint },
      { store, clock, owner, actors: this.#actors, pump: () => this.#requestPump() },
    );
    this.#fanOuts = new FanOutStage(
      { slotCount: options.slotCount, claimPerEndpoint: options.claimPerEndpoint, tracing: options.tracing ?? true },
      { store, clock, owner, actors: this.#actors, refills: this.#claims, cutShort: () => this.#cutShort() },
    );
    this.#endpointSync = new EndpointSync(
      { intervalMs: options.endpointSyncIntervalMs },
      {
        store,
        clock,
        tracked: () => this.#actors.actors.keys(),
        isTracked: (id) => this.#actors.actors.has(id),
        apply: (id, endpoint) => this.#applyEndpoint(id, endpoint),
        onError: (error) => deps.emit('failure', { where: 'endpoint sync', error }),
      },
    );
  }

  start(): void {
    this.#started = true;
    this.#endpointSync.start();
    this.#unwatch = this.#deps.store.watch(() => this.signal());
    this.#sweep = this.#deps.clock.setInterval(() => this.signal(), this.#options.sweepIntervalMs);
    this.signal();
  }

  /** There may be new or due work, anywhere: fan out, discover, refill. Cheap and coalesced. */
  signal(): void {
    this.#discover = true;
    this.#requestPump();
  }

  /**
   * Events were published by this process: fan out (claiming what mailboxes
   * have room for) and refill. No discovery: fan-out here knows what it wrote.
   * If another node fanned them out first, this node's store watch, or the
   * sweep, signals discovery for whatever landed in its slots.
   */
  published(): void {
    this.#fanOutWanted = true;
    this.#requestPump();
  }

  /** Resolves when no pump is running (for tests and orderly shutdown). */
  async settled(): Promise<void> {
    while (this.#pumps.running) await this.#pumps.idle;
  }

  get actors(): ReadonlyMap<string, EndpointActor> {
    return this.#actors.actors;
  }

  /**
   * An endpoint was created, edited, enabled, disabled or deleted through this node: its actor takes
   * the new version at once. Resolves once this node has caught up with the change log too, so a
   * catch-up that read the endpoint before this change cannot leave its older version behind.
   * Other nodes take it from the log within `endpointSyncIntervalMs`.
   */
  async endpointChanged(endpoint: Endpoint | undefined, id: string): Promise<void> {
    this.#applyEndpoint(id, endpoint);
    await this.#endpointSync.catchUp();
  }

  /** Stops work in these slots; resolves once their actors have closed (attempts settled, queued work given back). */
  async drainSlots(slots: readonly number[]): Promise<void> {
    await this.#actors.drainSlots(slots);
  }

  /** The drained slots were released: if they come back later they are worked again. */
  slotsReleased(slots: readonly number[]): void {
    this.#actors.slotsReleased(slots);
  }

  /** Leases were renewed: actors of slots no longer held stop (their late writes would be fenced anyway). */
  leasesChanged(heldSlots: readonly number[]): void {
    this.#actors.keepSlots(heldSlots);
    this.signal();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#claims.close();
    this.#fanOuts.close();
    this.#settles.stopRetrying();
    this.#unwatch?.();
    this.#sweep?.cancel();
    await this.#endpointSync.close();
    await this.settled();
    await this.#actors.close();
    await this.#settles.close();
  }

  /** Runs a pump, or another round of the running one. */
  #requestPump(): void {
    if (this.#closed || !this.#started) return;
    void this.#pumps.request();
  }

  /** The endpoint as it is now: its actor, if it has one here, takes it (and may have work now), or closes when it is gone. */
  #applyEndpoint(id: string, endpoint: Endpoint | undefined): void {
    if (this.#actors.apply(id, endpoint)) this.signal();
  }

  /** One round of the pump: the stages in order (see the header). */
  async #round(): Promise<void> {
    this.#settles.retryFailed();
    const discover = this.#discover || this.#claims.discoveryDue(this.#deps.clock.now());
    // A signal or a publish: there may be new events, quiet tenants' among them.
    const asked = discover || this.#fanOutWanted;
    // Held before this round: quiet tenants' events first, ahead of the busy ones' next batch.
    const heldBefore = this.#fanOuts.held;
    this.#discover = false;
    this.#fanOutWanted = false;
    if (asked && heldBefore) await this.#fanOuts.fanOutQuiet();
    if (asked || heldBefore) await this.#fanOuts.fanOut();
    if (asked && !heldBefore && this.#fanOuts.held) await this.#fanOuts.fanOutQuiet();
    if (this.#cutShort()) {
      // The discovery asked for runs in the next round.
      this.#discover ||= discover;
      this.#lastRoundCut = true;
      return;
    }
    if (discover) await this.#claims.discover();
    if (this.#cutShort()) {
      this.#lastRoundCut = true;
      return;
    }
    await this.#claims.refill();
    this.#actors.evictIdle();
    this.#lastRoundCut = false;
  }

  /**
   * Whether this round ends at the current stage: a local publish arrived during it, and the round
   * before ran to its end. The next round (which `published()` asked for) then reaches the new
   * events after one stage, not after the rest of this one (a busy tenant's fan-out batches, a
   * discovery, a refill); never two rounds cut in a row, so a stream of publishes cannot keep
   * discovery and refills from running.
   */
  #cutShort(): boolean {
    return this.#fanOutWanted && !this.#closed && !this.#lastRoundCut;
  }
}
