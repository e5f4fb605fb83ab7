/**
 * The supervisor: turns the outbox into work for actors.
 *
 * A pump runs whenever there may be work: a signal (a publish in this
 * process, another process's commit seen by `store.watch`, an actor's wake-up
 * from its timer wheel, a finished attempt) or the periodic sweep, which
 * guarantees that nothing due is missed if a signal is. One pump at a time;
 * a signal during a pump makes it go round once more.
 *
 *   pump: fan out new events ─► claim due deliveries (fair per endpoint, only
 *         for actors with room, within the node's mailbox budget) ─► hand them
 *         to their actors (created on demand) ─► evict idle actors
 *
 * `close()` stops signals and the sweep, then closes every actor (queued work
 * is given back to the store, running attempts finish and settle).
 */
import type { Clock } from '../clock.ts';
import type { DeliveryJob, Endpoint } from '../model.ts';
import type { Store } from '../store/port.ts';
import { EndpointActor, type ActorDeps, type WakeTimers } from './actor.ts';
import type { BreakerFamily } from './breaker.ts';
import type { EmitEngineEvent } from './engine-events.ts';
import { planDeliveries } from './fanout.ts';

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
}

export interface SupervisorDeps {
  readonly store: Store;
  readonly clock: Clock;
  readonly emit: EmitEngineEvent;
  readonly breakers: BreakerFamily;
  /** The lease owner id this node claims as. */
  readonly owner: string;
  /** Creates an actor's wake-up timers on the node-wide wheel. */
  createTimers(onDue: () => void): WakeTimers;
  /** Everything an actor needs but its breaker, timers and settle. */
  readonly actor: Omit<ActorDeps, 'breaker' | 'timers' | 'settle'>;
  /** Counts fenced writes; the caller decides how to surface them. */
  onFenced(deliveryId: string): void;
}

const FANOUT_BATCH = 100;

export class Supervisor {
  readonly #options: SupervisorOptions;
  readonly #deps: SupervisorDeps;
  readonly #actors = new Map<string, EndpointActor>();
  #unwatch: (() => void) | undefined;
  #sweep: { cancel(): void } | undefined;
  #pumping: Promise<void> | undefined;
  #again = false;
  #closed = false;

  constructor(options: SupervisorOptions, deps: SupervisorDeps) {
    this.#options = options;
    this.#deps = deps;
  }

  start(): void {
    this.#unwatch = this.#deps.store.watch(() => this.signal());
    this.#sweep = this.#deps.clock.setInterval(() => this.signal(), this.#options.sweepIntervalMs);
    this.signal();
  }

  /** There may be new or due work. Cheap and coalesced. */
  signal(): void {
    if (this.#closed) return;
    if (this.#pumping !== undefined) {
      this.#again = true;
      return;
    }
    this.#pumping = this.#pump().finally(() => {
      this.#pumping = undefined;
      // A signal that arrived after the pump's last look but before this point would be lost.
      if (this.#again && !this.#closed) this.signal();
    });
  }

  /** Resolves when no pump is running (for tests and orderly shutdown). */
  async settled(): Promise<void> {
    while (this.#pumping !== undefined) await this.#pumping;
  }

  get actors(): ReadonlyMap<string, EndpointActor> {
    return this.#actors;
  }

  /** An endpoint was edited, enabled or disabled: its actor takes the new version. */
  endpointChanged(endpoint: Endpoint | undefined, id: string): void {
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

  async close(): Promise<void> {
    this.#closed = true;
    this.#unwatch?.();
    this.#sweep?.cancel();
    await this.settled();
    const actors = [...this.#actors.values()];
    this.#actors.clear();
    await Promise.all(actors.map((actor) => actor.close()));
  }

  async #pump(): Promise<void> {
    do {
      this.#again = false;
      try {
        await this.#fanOut();
        await this.#claim();
        this.#evictIdle();
      } catch (error) {
        this.#deps.emit('failure', { where: 'supervisor pump', error });
        return;
      }
    } while (this.#again && !this.#closed);
  }

  async #fanOut(): Promise<void> {
    const { store, clock } = this.#deps;
    for (;;) {
      const events = await store.unfannedEvents(FANOUT_BATCH);
      const endpointsByTenant = new Map<string, Endpoint[]>();
      for (const event of events) {
        let endpoints = endpointsByTenant.get(event.tenantId);
        if (endpoints === undefined) {
          endpoints = await store.listEndpoints({ tenantId: event.tenantId });
          endpointsByTenant.set(event.tenantId, endpoints);
        }
        await store.recordFanOut(event.id, planDeliveries(event, endpoints, this.#options.slotCount, clock.now()));
      }
      if (events.length < FANOUT_BATCH || this.#closed) return;
    }
  }

  async #claim(): Promise<void> {
    const { store, clock } = this.#deps;
    while (!this.#closed) {
      const now = clock.now();
      let held = 0;
      const skip: string[] = [];
      for (const [id, actor] of this.#actors) {
        held += actor.queued + actor.running;
        if (actor.capacity(now) === 0) skip.push(id);
      }
      const room = this.#options.mailboxBudget - held;
      if (room <= 0) return;
      const limit = Math.min(this.#options.claimBatchSize, room);
      const jobs = await store.claimDue({
        owner: this.#deps.owner,
        now,
        limit,
        perEndpointLimit: this.#options.claimPerEndpoint,
        skipEndpointIds: skip,
      });
      for (const job of jobs) await this.#dispatch(job);
      if (jobs.length < limit) return;
    }
  }

  async #dispatch(job: DeliveryJob): Promise<void> {
    const actor = await this.#actorFor(job.delivery.endpointId);
    if (actor === undefined) {
      // Deleted between claim and dispatch: its deliveries are cancelled by the store.
      return;
    }
    actor.enqueue(job);
  }

  async #actorFor(endpointId: string): Promise<EndpointActor | undefined> {
    const existing = this.#actors.get(endpointId);
    if (existing !== undefined) return existing;
    const endpoint = await this.#deps.store.getEndpoint(endpointId);
    if (endpoint === undefined) return undefined;
    const raced = this.#actors.get(endpointId);
    if (raced !== undefined) return raced;

    let actor: EndpointActor | undefined;
    const breaker = this.#deps.breakers.create((state) => actor?.onBreakerChange(state));
    const timers = this.#deps.createTimers(() => this.signal());
    actor = new EndpointActor(endpoint, {
      ...this.#deps.actor,
      breaker,
      timers,
      settle: async (settlement) => {
        const result = await this.#deps.store.settle([settlement], this.#deps.clock.now());
        const applied = result.fenced.length === 0;
        if (!applied) this.#deps.onFenced(settlement.deliveryId);
        // A finished attempt frees room in the mailbox: look for more work.
        this.signal();
        return applied;
      },
    });
    this.#actors.set(endpointId, actor);
    return actor;
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
