/**
 * The supervisor: turns the outbox into work for actors.
 *
 * A pump runs whenever there may be work: a signal (a publish in this
 * process, another process's commit seen by `store.watch`, an actor's wake-up
 * from its timer wheel) or the periodic sweep, which guarantees that nothing
 * due is missed if a signal is; and, paced, when attempts finish. One pump at
 * a time; a request during a pump makes it go round once more.
 *
 *   signalled pump: fan out new events, as many as the mailboxes have room
 *                   for (claiming, as they are written, what their actors
 *                   take); if that stopped at the budget, fan out past it the
 *                   first events of quiet tenants (nothing in the mailboxes)
 *                   ─► discover: claim due deliveries (fair per
 *                   endpoint, only for actors with room, within the node's
 *                   mailbox budget; a rate-limited actor with room for less
 *                   than a share is mostly left to refills) ─► refill ─►
 *                   evict idle actors
 *   publish pump:   fan out (and past the budget, quiet tenants') ─► refill
 *                   ─► evict (a publish in this process)
 *   paced pump:     refill ─► evict idle actors; and fan out, if the last
 *                   fan-out stopped at the mailbox budget
 *   refill:         claim for the actors with room whose endpoints may have
 *                   more due (they got all they asked for, or were skipped
 *                   for being full), round-robin between their tenants, then
 *                   their endpoints — only for them, so its cost follows the
 *                   rows taken; an endpoint that gets less than it asked for
 *                   has no more due and leaves the set until discovered again
 *
 * Discovery has to find who has work (its cost grows with busy endpoints), so
 * it runs only when signalled, or again after `DISCOVERY_RETRY_MS` when the
 * last one stopped at the mailbox budget (others may have work it never saw).
 * Claimed work goes to its actor, created on demand.
 *
 * Slots being handed to another node are drained: their actors are closed
 * (queued work given back, running attempts settle) and whatever a claim still
 * returns for them is given back at once, until the lease is released.
 *
 * `close()` stops signals and the sweep, then closes every actor (queued work
 * is given back to the store, running attempts finish and settle).
 */
import type { Clock } from '../clock.ts';
import { slotOf } from '../ids.ts';
import { EndpointOrdering, type DeliveryJob, type Endpoint, type OutboxEvent } from '../model.ts';
import type { FanOut, Settlement, Store } from '../store/port.ts';
import { EndpointActor, type ActorDeps } from './actor.ts';
import type { EmitEngineEvent } from './engine-events.ts';
import { ClaimPacer } from './claim-pacer.ts';
import { EndpointSync } from './endpoint-sync.ts';
import { planDeliveries } from './fanout.ts';
import { RefillQueue } from './refill-queue.ts';
import { SettleBatcher } from './settle-batcher.ts';

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

const FANOUT_BATCH = 100;
/**
 * Deliveries of quiet tenants' events claimed beyond the mailbox budget when fan-out is held
 * (see `#fanOutQuiet`): the mailboxes hold at most `mailboxBudget + QUIET_RESERVE`.
 */
const QUIET_RESERVE = 100;
/** How soon a discovery that stopped at the mailbox budget runs again, on a paced pump. */
const DISCOVERY_RETRY_MS = 50;
/** How often a discovery claims for a rate-limited actor that refills serve otherwise. */
const RATE_LIMITED_DISCOVERY_MS = 30_000;

export class Supervisor {
  readonly #options: SupervisorOptions;
  readonly #deps: SupervisorDeps;
  readonly #actors = new Map<string, EndpointActor>();
  readonly #draining = new Set<number>();
  /** Per slot, how many drains have begun: a dispatch that awaited sees whether one began meanwhile. */
  readonly #drainsBegun = new Map<number, number>();
  /** Settles waiting to be retried after a store failure: woken at the next pump. */
  readonly #nextPump: Array<() => void> = [];
  #unwatch: (() => void) | undefined;
  #sweep: { cancel(): void } | undefined;
  #pumping: Promise<void> | undefined;
  #again = false;
  #closed = false;
  /** Pumps wait for `start()`: before it, this node holds no lease to claim with. */
  #started = false;
  /** A signal asked for discovery (and fan-out) since the last one ran. */
  #discover = false;
  /** A local publish asked for fan-out since the last one ran. */
  #fanOutWanted = false;
  /**
   * The last fan-out stopped at the mailbox budget with events left in the outbox: the next pump
   * (a finished attempt's, say) fans out again.
   */
  #fanOutHeld = false;
  /** The last round was cut short for a publish (see `#cutShort`): this one runs to its end. */
  #lastRoundCut = false;
  /** The last discovery stopped at the mailbox budget, at this time: there may be work it did not see. */
  #truncatedDiscoveryAt: number | undefined;
  /**
   * Endpoints that may have more due than their actor holds; refilled round-robin between tenants,
   * then between a tenant's endpoints (served ones go to the back, so a short budget is shared).
   */
  readonly #mayHaveMore = new RefillQueue();
  /** When a discovery last claimed for each rate-limited actor (see `#leftToRefills`). */
  readonly #discoveredAt = new WeakMap<EndpointActor, number>();

  /** Settlements of one event-loop turn, written in one store call. */
  readonly #settler: SettleBatcher;
  /** Claims for places freed by finished attempts, a few places at a time. */
  readonly #pacer: ClaimPacer;
  /** What every actor gets: one object, made once, so an actor holds no closures of its own. */
  readonly #actorDeps: ActorDeps;
  /** Brings the actors to their endpoints' current versions, whichever node changed them. */
  readonly #endpointSync: EndpointSync;

  constructor(options: SupervisorOptions, deps: SupervisorDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#settler = new SettleBatcher({ settle: (batch, now) => deps.store.settle(batch, now), now: () => deps.clock.now() });
    this.#pacer = new ClaimPacer({ clock: deps.clock, pump: () => this.#requestPump() });
    this.#actorDeps = {
      ...deps.actor,
      settle: (settlement, actor) => this.#settleDurably(settlement, actor),
      wake: () => this.signal(),
    };
    this.#endpointSync = new EndpointSync(
      { intervalMs: options.endpointSyncIntervalMs },
      {
        store: deps.store,
        clock: deps.clock,
        tracked: () => this.#actors.keys(),
        isTracked: (id) => this.#actors.has(id),
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

  /** Runs a pump, or another round of the running one. */
  #requestPump(): void {
    if (this.#closed || !this.#started) return;
    if (this.#pumping !== undefined) {
      this.#again = true;
      return;
    }
    this.#pumping = this.#pump().finally(() => {
      this.#pumping = undefined;
      // A request that arrived after the pump's last look but before this point would be lost.
      if (this.#again && !this.#closed) this.#requestPump();
    });
  }

  /** Resolves when no pump is running (for tests and orderly shutdown). */
  async settled(): Promise<void> {
    while (this.#pumping !== undefined) await this.#pumping;
  }

  get actors(): ReadonlyMap<string, EndpointActor> {
    return this.#actors;
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

  /** The endpoint as it is now: its actor, if it has one here, takes it, or closes when it is gone. */
  #applyEndpoint(id: string, endpoint: Endpoint | undefined): void {
    const actor = this.#actors.get(id);
    if (actor === undefined) return;
    if (endpoint === undefined) {
      this.#actors.delete(id);
      void actor.close();
      return;
    }
    actor.update(endpoint);
    this.signal();
  }

  /** Stops work in these slots; resolves once their actors have closed (attempts settled, queued work given back). */
  async drainSlots(slots: readonly number[]): Promise<void> {
    for (const slot of slots) {
      this.#draining.add(slot);
      this.#drainsBegun.set(slot, (this.#drainsBegun.get(slot) ?? 0) + 1);
    }
    await this.#closeActorsIn((slot) => this.#draining.has(slot));
  }

  /** The drained slots were released: if they come back later they are worked again. */
  slotsReleased(slots: readonly number[]): void {
    for (const slot of slots) this.#draining.delete(slot);
  }

  /** Leases were renewed: actors of slots no longer held stop (their late writes would be fenced anyway). */
  leasesChanged(heldSlots: readonly number[]): void {
    const held = new Set(heldSlots);
    void this.#closeActorsIn((slot) => !held.has(slot) && !this.#draining.has(slot));
    this.signal();
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const wake of this.#nextPump.splice(0)) wake();
    this.#unwatch?.();
    this.#sweep?.cancel();
    await this.#endpointSync.close();
    await this.settled();
    const actors = [...this.#actors.values()];
    this.#actors.clear();
    await Promise.all(actors.map((actor) => actor.close()));
    this.#pacer.close();
    await this.#settler.close();
  }

  async #pump(): Promise<void> {
    do {
      this.#again = false;
      for (const wake of this.#nextPump.splice(0)) wake();
      const now = this.#deps.clock.now();
      const discover =
        this.#discover || (this.#truncatedDiscoveryAt !== undefined && now - this.#truncatedDiscoveryAt >= DISCOVERY_RETRY_MS);
      // A signal or a publish: there may be new events, quiet tenants' among them.
      const asked = discover || this.#fanOutWanted;
      const fanOut = asked || this.#fanOutHeld;
      this.#discover = false;
      this.#fanOutWanted = false;
      try {
        // Held before this round: quiet tenants' events first, ahead of the busy ones' next batch.
        const heldBefore = this.#fanOutHeld;
        if (asked && heldBefore) await this.#fanOutQuiet();
        if (fanOut) await this.#fanOut();
        if (asked && !heldBefore && this.#fanOutHeld) await this.#fanOutQuiet();
        if (this.#cutShort()) {
          // The discovery asked for runs in the next round.
          this.#discover ||= discover;
          this.#lastRoundCut = true;
          continue;
        }
        if (discover) await this.#discoverAndClaim();
        if (this.#cutShort()) {
          this.#lastRoundCut = true;
          continue;
        }
        await this.#refill();
        this.#evictIdle();
        this.#lastRoundCut = false;
      } catch (error) {
        this.#deps.emit('failure', { where: 'supervisor pump', error });
        return;
      }
    } while (this.#again && !this.#closed);
  }

  /**
   * Fans out as many events as the mailboxes have room for (deliveries written pending count
   * against the room too), leaving the rest in the outbox for the next pump: a delivery is then
   * written in flight and handed to its actor at once, where fanning out a backlog ahead of the
   * mailboxes would write each one pending and claim it later (two writes instead of one).
   */
  async #fanOut(): Promise<void> {
    const { store, clock } = this.#deps;
    let writtenPending = 0;
    this.#fanOutHeld = false;
    for (;;) {
      const room = this.#room() - writtenPending;
      if (room <= 0) {
        this.#fanOutHeld = true;
        return;
      }
      const wanted = Math.min(FANOUT_BATCH, room);
      const events = await store.unfannedEvents(wanted);
      if (events.length === 0) return;
      writtenPending += await this.#fanOutEvents(events, this.#room());
      if (events.length < wanted || this.#closed) return;
      if (this.#cutShort()) {
        // There may be more: the next round fans out again, after the new events' quiet tenants.
        this.#fanOutHeld = true;
        return;
      }
    }
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

  /**
   * Writes these events' deliveries, claiming (and handing to their actors) up to `room` of them;
   * answers how many were written pending.
   */
  async #fanOutEvents(events: readonly OutboxEvent[], room: number): Promise<number> {
    const { store, clock } = this.#deps;
    const endpointsByTenant = new Map<string, Endpoint[]>();
    const fanOuts: FanOut[] = [];
    const now = clock.now();
    for (const event of events) {
      let endpoints = endpointsByTenant.get(event.tenantId);
      if (endpoints === undefined) {
        endpoints = await store.listEndpoints({ tenantId: event.tenantId });
        endpointsByTenant.set(event.tenantId, endpoints);
      }
      fanOuts.push({ eventId: event.id, deliveries: planDeliveries(event, endpoints, this.#options.slotCount, now) });
    }
    const enabled = new Set<string>();
    for (const endpoints of endpointsByTenant.values()) for (const e of endpoints) if (e.status === 'enabled') enabled.add(e.id);
    const deliveryIds = this.#claimOnFanOut(fanOuts, enabled, now, room);
    // One transaction for the batch: a commit per event cost more than the deliveries it wrote.
    const claimed = await store.recordFanOuts(fanOuts, now, { owner: this.#deps.owner, deliveryIds });
    let written = 0;
    for (const { deliveries } of fanOuts) written += deliveries.length;
    if (claimed.length < deliveryIds.size) {
      // Chosen but written pending (a FIFO line's later delivery, the lease lost): for a refill.
      const inFlight = new Set(claimed.map((d) => d.id));
      for (const { deliveries } of fanOuts) {
        for (const d of deliveries) if (deliveryIds.has(d.id) && !inFlight.has(d.id)) this.#mayHaveMore.add(d.endpointId, d.tenantId);
      }
    }
    if (claimed.length > 0) {
      const byId = new Map(events.map((event) => [event.id, event]));
      for (const delivery of claimed) {
        const event = byId.get(delivery.eventId);
        if (event !== undefined) await this.#dispatch({ delivery, event });
      }
    }
    return written - claimed.length;
  }

  /**
   * Fans out past a busy tenant's backlog. The outbox is read oldest first, so while fan-out stops
   * at the mailbox budget, the events a busy tenant published first would hold every later event
   * of every other tenant. So, once per signalled or publish pump while fan-out is held, the oldest
   * events of the tenants with nothing in the mailboxes (quiet tenants) are fanned out, up to
   * `FANOUT_BATCH`, and their deliveries claimed within the budget plus `QUIET_RESERVE` (what
   * cannot be claimed is written pending, for refills): a quiet tenant's new event is handed to its
   * actor in the pump after its publish, however long the backlog ahead of it.
   *
   * Cost: one more outbox read per such pump (never per event), which finds the tenants with
   * events waiting by skipping through an index of them (one lookup per such tenant, never a walk
   * of the busy tenants' backlog); nothing while fan-out is not held. That index costs every event
   * one more index entry, written with it and removed at its fan-out.
   */
  async #fanOutQuiet(): Promise<void> {
    const busy = new Set<string>();
    for (const actor of this.#actors.values()) if (actor.queued + actor.running > 0) busy.add(actor.endpoint.tenantId);
    const events = await this.#deps.store.unfannedEvents(FANOUT_BATCH, [...busy]);
    if (events.length === 0 || this.#closed) return;
    await this.#fanOutEvents(events, this.#room() + QUIET_RESERVE);
  }

  /**
   * Which new deliveries to claim as they are written: up to `room` in all, per endpoint what its actor could take (a new actor: the
   * per-endpoint share of a claim). Not for endpoints that may already have
   * work waiting (refills serve those first) or slots being drained. The rest
   * are written pending, and their endpoints marked for a refill.
   */
  #claimOnFanOut(fanOuts: readonly FanOut[], enabled: ReadonlySet<string>, now: number, room: number): Set<string> {
    const chosen = new Set<string>();
    const left = new Map<string, number>();
    for (const { deliveries } of fanOuts) {
      for (const d of deliveries) {
        if (!enabled.has(d.endpointId) || this.#draining.has(d.slot) || this.#mayHaveMore.has(d.endpointId)) continue;
        let capacity = left.get(d.endpointId);
        if (capacity === undefined) capacity = this.#actors.get(d.endpointId)?.capacity(now) ?? this.#options.claimPerEndpoint;
        if (capacity > 0 && room > 0) {
          chosen.add(d.id);
          capacity -= 1;
          room -= 1;
        } else {
          this.#mayHaveMore.add(d.endpointId, d.tenantId);
        }
        left.set(d.endpointId, capacity);
      }
    }
    return chosen;
  }

  /** Deliveries this node's mailboxes may still take in all. */
  #room(): number {
    let held = 0;
    for (const actor of this.#actors.values()) held += actor.queued + actor.running;
    return this.#options.mailboxBudget - held;
  }

  async #discoverAndClaim(): Promise<void> {
    const { store, clock } = this.#deps;
    const perEndpointLimit = this.#options.claimPerEndpoint;
    this.#truncatedDiscoveryAt = undefined;
    while (!this.#closed) {
      const now = clock.now();
      const room = this.#room();
      if (room <= 0) {
        this.#truncatedDiscoveryAt = now;
        return;
      }
      const skip: string[] = [];
      for (const [id, actor] of this.#actors) {
        const capacity = actor.capacity(now);
        if (capacity > 0 && !this.#leftToRefills(actor, capacity, now)) continue;
        skip.push(id);
        // Full (or paused) now: whatever it has waiting is claimed by a refill once it has room.
        this.#mayHaveMore.add(id, actor.endpoint.tenantId);
      }
      const limit = Math.min(this.#options.claimBatchSize, room);
      const jobs = await store.claimDue({ owner: this.#deps.owner, now, limit, perEndpointLimit, skipEndpointIds: skip });
      const claimed = await this.#dispatchAll(jobs);
      for (const [endpointId, { count, tenantId }] of claimed) if (count >= perEndpointLimit) this.#mayHaveMore.add(endpointId, tenantId);
      if (jobs.length < limit) return;
    }
  }

  /**
   * A rate-limited actor with room for less than a discovery's share (`claimPerEndpoint`) would be
   * handed that share and give most of it back to the store: it is left to refills, which ask for
   * exactly its room. Except in its first discovery and one every `RATE_LIMITED_DISCOVERY_MS`,
   * for what only a discovery finds: deliveries orphaned by an older epoch, after a slot changed
   * hands (they appear then, when the slot's actors are new).
   */
  #leftToRefills(actor: EndpointActor, capacity: number, now: number): boolean {
    if (!actor.rateLimited || capacity >= this.#options.claimPerEndpoint) return false;
    const last = this.#discoveredAt.get(actor);
    if (last !== undefined && now - last < RATE_LIMITED_DISCOVERY_MS) return true;
    this.#discoveredAt.set(actor, now);
    return false;
  }

  async #refill(): Promise<void> {
    const { store, clock } = this.#deps;
    while (!this.#closed && this.#mayHaveMore.size > 0) {
      const now = clock.now();
      let room = Math.min(this.#room(), this.#options.claimBatchSize);
      const wants: Array<{ endpointId: string; limit: number }> = [];
      for (const endpointId of this.#mayHaveMore.inTurn()) {
        if (room <= 0) break;
        const actor = this.#actors.get(endpointId);
        if (actor === undefined) {
          // Evicted or deleted: discovery finds it again if it has work.
          this.#mayHaveMore.delete(endpointId);
          continue;
        }
        const limit = Math.min(actor.capacity(now), room);
        if (limit <= 0) continue;
        wants.push({ endpointId, limit });
        room -= limit;
      }
      if (wants.length === 0) return;
      const claimed = await this.#dispatchAll(await store.claimForEndpoints({ owner: this.#deps.owner, now, endpoints: wants }));
      let full = false;
      for (const { endpointId, limit } of wants) {
        // Got all it asked for: there may be more; to the back of the line (its tenant too).
        if ((claimed.get(endpointId)?.count ?? 0) >= limit) {
          this.#mayHaveMore.served(endpointId);
          full = true;
        } else {
          this.#mayHaveMore.delete(endpointId);
        }
      }
      if (!full) return;
    }
  }

  /** Hands every job to its actor; returns how many each endpoint got. */
  async #dispatchAll(jobs: readonly DeliveryJob[]): Promise<Map<string, { count: number; readonly tenantId: string }>> {
    const claimed = new Map<string, { count: number; readonly tenantId: string }>();
    for (const job of jobs) {
      const { endpointId, tenantId } = job.delivery;
      const seen = claimed.get(endpointId);
      if (seen === undefined) claimed.set(endpointId, { count: 1, tenantId });
      else seen.count += 1;
      await this.#dispatch(job);
    }
    return claimed;
  }

  async #dispatch(job: DeliveryJob): Promise<void> {
    const { slot } = job.delivery;
    if (this.#draining.has(slot)) return this.#giveBack(job);
    const drains = this.#drainsBegun.get(slot);
    const actor = await this.#actorFor(job.delivery.endpointId);
    if (actor === undefined) {
      // Deleted between claim and dispatch: its deliveries are cancelled by the store.
      return;
    }
    // Checked again: making the actor reads the endpoint, and a drain of the slot that began
    // meanwhile (and may even have released it) has already closed the actors it found. Enqueued
    // now, the job would be sent while the slot changes hands, and sent again by its next owner
    // (seen as duplicates in the scaleout bench once slots moved with the work).
    if (this.#drainsBegun.get(slot) !== drains) return this.#giveBack(job);
    actor.enqueue(job);
  }

  /** A job claimed in the instant before its slot's drain began: given back for the slot's next owner. */
  async #giveBack(job: DeliveryJob): Promise<void> {
    const { delivery } = job;
    await this.#deps.store.settle(
      [{ kind: 'release', deliveryId: delivery.id, epoch: delivery.leaseEpoch, nextAttemptAt: this.#deps.clock.now() }],
      this.#deps.clock.now(),
    );
  }

  async #actorFor(endpointId: string): Promise<EndpointActor | undefined> {
    const existing = this.#actors.get(endpointId);
    if (existing !== undefined) return existing;
    const endpoint = await this.#deps.store.getEndpoint(endpointId);
    if (endpoint === undefined) return undefined;
    const raced = this.#actors.get(endpointId);
    if (raced !== undefined) return raced;

    const actor = new EndpointActor(endpoint, this.#actorDeps);
    this.#actors.set(endpointId, actor);
    return actor;
  }

  /**
   * Writes a settlement, retrying at every pump while the store fails: an
   * attempt's result is never dropped, or its delivery would stay in flight
   * under this node's lease. Resolves false if the node closes first (the
   * delivery is then claimed again by the slot's next holder).
   */
  async #settleDurably(settlement: Settlement, actor: { readonly queued: number; readonly endpoint: Endpoint }): Promise<boolean> {
    for (;;) {
      try {
        const applied = await this.#settler.settle(settlement);
        if (!applied) this.#deps.onFenced(settlement.deliveryId);
        // A FIFO line's head is final: the next of its line is due now, not at the next sweep.
        if (applied && isFifoLineEnd(settlement, actor.endpoint)) this.#mayHaveMore.add(actor.endpoint.id, actor.endpoint.tenantId);
        // A finished attempt frees room in the mailbox: look for more work, a few places at a
        // time, or at once when this actor has nothing left queued.
        this.#pacer.freed(actor.queued === 0);
        return applied;
      } catch (error) {
        this.#deps.emit('failure', { where: `settle ${settlement.deliveryId}`, error });
        if (this.#closed) return false;
        await new Promise<void>((resolve) => this.#nextPump.push(resolve));
        if (this.#closed) return false;
      }
    }
  }

  async #closeActorsIn(inSlot: (slot: number) => boolean): Promise<void> {
    const closing: Array<Promise<void>> = [];
    for (const [id, actor] of this.#actors) {
      if (!inSlot(slotOf(id, this.#options.slotCount))) continue;
      this.#actors.delete(id);
      closing.push(actor.close());
    }
    await Promise.all(closing);
  }

  #evictIdle(): void {
    const now = this.#deps.clock.now();
    for (const [id, actor] of this.#actors) {
      if (actor.isIdle(now, this.#options.actorIdleMs)) {
        this.#actors.delete(id);
        void actor.close();
      }
    }
  }
}

/** A delivery of a FIFO endpoint left its line (delivered or dead): the line has a new head. */
function isFifoLineEnd(settlement: Settlement, endpoint: Endpoint): boolean {
  return endpoint.ordering === EndpointOrdering.FIFO && (settlement.kind === 'delivered' || settlement.kind === 'dead');
}
