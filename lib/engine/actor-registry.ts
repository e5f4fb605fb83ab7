/**
 * The actor registry: this node's endpoint actors, one per endpoint with work here, made when the
 * endpoint's first delivery is handed over and closed when its work here ends.
 *
 *   openClaim() ─► the store claims ─► claim.dispatch(job), for each job ─► claim.close()
 *
 *   claim.dispatch(job) ─┬─ its slot is draining, or a drain of it began since the claim opened
 *                        │      ─► given back to the store for the slot's next owner (`#giveBack`);
 *                        │         a taken-over one (`resumed`) left in flight, for the next owner to take over
 *                        ├─ its endpoint is gone ─► dropped (the store cancels its deliveries)
 *                        └─ to its actor (made from the endpoint as the store has it now) ─► enqueue
 *
 *   an actor closes (queued work given back, running attempts settle) when
 *     its endpoint is deleted (`apply`) · its slot drains (`drainSlots`) · its slot is no longer
 *     held (`keepSlots`) · it has been idle for `actorIdleMs` (`evictIdle`) · the node closes
 *
 * Draining: a slot being handed to another node is drained from `drainSlots()` until
 * `slotsReleased()`: its actors are closed, and whatever a claim still returns for it is given back
 * at once, never enqueued. A claim hands in its jobs one by one, each maybe awaiting a store read or
 * a give-back, so a drain can end, and the slot be released, while a claim made under the lease
 * being given up is still handed in. Its jobs in the slot are given back too, whenever they come
 * (the claim opened with the slot draining, or a drain of it began since): sent, they would be sent
 * again by the next owner, which takes them over as orphans, while this node's settles are fenced.
 * And a drain waits for the claims open once its actors have closed, so that their give-backs are
 * mostly written before the release, while their epoch is still the slot's (the next owner then
 * claims them as new, not as taken over).
 *
 * The registry also keeps the node's mailbox budget: `room()` is what all mailboxes together may
 * still take, which fan-out and claims stay within.
 */
import type { Clock } from '../clock.ts';
import { slotOf } from '../ids.ts';
import type { DeliveryJob, Endpoint } from '../model.ts';
import type { Store } from '../store/port.ts';
import { EndpointActor, type ActorDeps } from './actor.ts';

export interface ActorRegistryOptions {
  readonly slotCount: number;
  /** Idle actors are evicted after this long. */
  readonly actorIdleMs: number;
  /** Deliveries held in all mailboxes at once; beyond it nothing more is claimed. */
  readonly mailboxBudget: number;
}

export interface ActorRegistryDeps {
  readonly store: Pick<Store, 'getEndpoint' | 'settle'>;
  readonly clock: Clock;
  /** What every actor gets: one object, made once, so an actor holds no closures of its own. */
  readonly actor: ActorDeps;
}

/** What a claim saw as it opened: how many drains had begun, and the slots then draining. */
interface ClaimOpened {
  readonly drainsBegun: number;
  readonly draining: ReadonlySet<number>;
}

const NONE_DRAINING: ReadonlySet<number> = new Set();

/** One claim's way in: the jobs the store returned for it, handed in one at a time, then `close()`. */
export interface OpenClaim {
  dispatch(job: DeliveryJob): Promise<void>;
  close(): void;
}

export class ActorRegistry {
  readonly #options: ActorRegistryOptions;
  readonly #deps: ActorRegistryDeps;
  readonly #actors = new Map<string, EndpointActor>();
  readonly #draining = new Set<number>();
  /** How many drains have begun on this node, and per slot the count as its last one began. */
  #drainsBegun = 0;
  readonly #slotDrainBegun = new Map<number, number>();
  /** The claims open, each resolved as it closes. */
  readonly #openClaims = new Set<Promise<void>>();

  constructor(options: ActorRegistryOptions, deps: ActorRegistryDeps) {
    this.#options = options;
    this.#deps = deps;
  }

  get actors(): ReadonlyMap<string, EndpointActor> {
    return this.#actors;
  }

  /** Deliveries this node's mailboxes may still take in all. */
  room(): number {
    let held = 0;
    for (const actor of this.#actors.values()) held += actor.queued + actor.running;
    return this.#options.mailboxBudget - held;
  }

  /** The tenants with something queued or running in a mailbox. */
  busyTenants(): Set<string> {
    const busy = new Set<string>();
    for (const actor of this.#actors.values()) if (actor.queued + actor.running > 0) busy.add(actor.endpoint.tenantId);
    return busy;
  }

  isDraining(slot: number): boolean {
    return this.#draining.has(slot);
  }

  /**
   * Opens a claim: to be called before the store is asked, and closed once every job it returned
   * has been handed in (see the header's Draining).
   */
  openClaim(): OpenClaim {
    const opened: ClaimOpened = { drainsBegun: this.#drainsBegun, draining: this.#draining.size === 0 ? NONE_DRAINING : new Set(this.#draining) };
    let close!: () => void;
    const closed = new Promise<void>((resolve) => (close = resolve));
    this.#openClaims.add(closed);
    return {
      dispatch: (job) => this.#dispatch(job, opened),
      close: () => {
        this.#openClaims.delete(closed);
        close();
      },
    };
  }

  /** Hands a claimed job to its endpoint's actor, made if need be; or gives it back (see the header). */
  async #dispatch(job: DeliveryJob, opened: ClaimOpened): Promise<void> {
    const { slot } = job.delivery;
    if (this.#draining.has(slot) || this.#givenUpSince(slot, opened)) return this.#giveBack(job);
    const actor = await this.#actorFor(job.delivery.endpointId);
    if (actor === undefined) {
      // Deleted between claim and dispatch: its deliveries are cancelled by the store.
      return;
    }
    // Checked again: making the actor reads the endpoint, and a drain of the slot that began
    // meanwhile (and may even have released it) has already closed the actors it found.
    if (this.#givenUpSince(slot, opened)) return this.#giveBack(job);
    actor.enqueue(job);
  }

  /** Whether the slot was draining as the claim opened, or a drain of it began since: its lease is being, or was, given up. */
  #givenUpSince(slot: number, opened: ClaimOpened): boolean {
    return opened.draining.has(slot) || (this.#slotDrainBegun.get(slot) ?? 0) > opened.drainsBegun;
  }

  /**
   * The endpoint as it is now: its actor, if it has one here, takes it, or closes when it is gone.
   * Answers whether an actor took a new version (it may have work to claim now).
   */
  apply(id: string, endpoint: Endpoint | undefined): boolean {
    const actor = this.#actors.get(id);
    if (actor === undefined) return false;
    if (endpoint === undefined) {
      this.#actors.delete(id);
      void actor.close();
      return false;
    }
    actor.update(endpoint);
    return true;
  }

  /**
   * Stops work in these slots; resolves once their actors have closed (attempts settled, queued work
   * given back) and then the claims open have closed (their jobs in these slots given back).
   */
  async drainSlots(slots: readonly number[]): Promise<void> {
    this.#drainsBegun += 1;
    for (const slot of slots) {
      this.#draining.add(slot);
      this.#slotDrainBegun.set(slot, this.#drainsBegun);
    }
    await this.#closeActorsIn((slot) => this.#draining.has(slot));
    // Only the claims open now, not until none is: the node goes on claiming while it holds the
    // lease, in these slots too (given back at once, due at once, claimed again), so a drain that
    // waited for no claim to be open never ended (the bench stalled).
    await Promise.all([...this.#openClaims]);
  }

  /** The drained slots were released: if they come back later they are worked again. */
  slotsReleased(slots: readonly number[]): void {
    for (const slot of slots) this.#draining.delete(slot);
  }

  /** Closes the actors of slots no longer held (their late writes would be fenced anyway), draining ones aside. */
  keepSlots(heldSlots: readonly number[]): void {
    const held = new Set(heldSlots);
    void this.#closeActorsIn((slot) => !held.has(slot) && !this.#draining.has(slot));
  }

  evictIdle(): void {
    const now = this.#deps.clock.now();
    for (const [id, actor] of this.#actors) {
      if (actor.isIdle(now, this.#options.actorIdleMs)) {
        this.#actors.delete(id);
        void actor.close();
      }
    }
  }

  /** Closes every actor: queued work is given back, running attempts finish and settle. */
  async close(): Promise<void> {
    const actors = [...this.#actors.values()];
    this.#actors.clear();
    await Promise.all(actors.map((actor) => actor.close()));
  }

  /**
   * A job claimed in the instant before its slot's drain began: given back for the slot's next
   * owner. Except a taken-over one (`resumed`): given back, it would be pending, and its next owner
   * would claim it as fresh and send it, where an at-most-once endpoint must not get it twice. Left
   * in flight under this node's epoch, it is claimed again once the slot changes hands (the drain
   * ends in its release), as taken over.
   */
  async #giveBack(job: DeliveryJob): Promise<void> {
    if (job.resumed === true) return;
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

    const actor = new EndpointActor(endpoint, this.#deps.actor);
    this.#actors.set(endpointId, actor);
    return actor;
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
}
