/**
 * The claim stage: claims due deliveries from the store for this node's actors, within the mailbox
 * budget, in two ways.
 *
 *   discover: claim due deliveries (fair per endpoint, only for actors with room, within the
 *             node's mailbox budget; a rate-limited actor with room for less than a share is
 *             mostly left to refills) ─► each job to its actor; an endpoint that got its full
 *             share, or was skipped for being full, may have more ─► the refill queue
 *   refill:   claim for the actors with room whose endpoints may have more due (the refill
 *             queue), round-robin between their tenants, then their endpoints — only for them,
 *             so its cost follows the rows taken; an endpoint that gets less than it asked for
 *             has no more due and leaves the queue until discovered again
 *
 * Discovery has to find who has work (its cost grows with busy endpoints), so the supervisor runs
 * it only when signalled, or again after `DISCOVERY_RETRY_MS` when the last one stopped at the
 * mailbox budget (`discoveryDue`: others may have work it never saw). Refills run at every pump.
 *
 * The refill queue is fed by the other stages too: fan-out marks the endpoints whose new
 * deliveries it wrote pending, and a settle marks a FIFO endpoint whose line has a new head
 * (`mayHaveMore`). A finished attempt frees a mailbox place (`freed`): the claim pacer pumps once
 * a few have, or at once when an actor ran dry.
 *
 * Lifecycle: open ──close()──► closed (claims stop between store calls; the pacer pumps no more).
 */
import type { Clock } from '../clock.ts';
import type { DeliveryJob } from '../model.ts';
import type { Store } from '../store/port.ts';
import type { EndpointActor } from './actor.ts';
import type { ActorRegistry } from './actor-registry.ts';
import { ClaimPacer } from './claim-pacer.ts';
import { RefillQueue } from './refill-queue.ts';

export interface ClaimStageOptions {
  /** Deliveries claimed per store round trip. */
  readonly claimBatchSize: number;
  /** At most this many per endpoint per discovery, for fairness. */
  readonly claimPerEndpoint: number;
}

export interface ClaimStageDeps {
  readonly store: Pick<Store, 'claimDue' | 'claimForEndpoints'>;
  readonly clock: Clock;
  /** The lease owner id this node claims as. */
  readonly owner: string;
  readonly actors: Pick<ActorRegistry, 'actors' | 'room' | 'openClaim'>;
  /** Runs the supervisor's pump (coalesced). */
  pump(): void;
}

/** How soon a discovery that stopped at the mailbox budget runs again, on a paced pump. */
const DISCOVERY_RETRY_MS = 50;
/** How often a discovery claims for a rate-limited actor that refills serve otherwise. */
const RATE_LIMITED_DISCOVERY_MS = 30_000;

export class ClaimStage {
  readonly #options: ClaimStageOptions;
  readonly #deps: ClaimStageDeps;
  /**
   * Endpoints that may have more due than their actor holds; refilled round-robin between tenants,
   * then between a tenant's endpoints (served ones go to the back, so a short budget is shared).
   */
  readonly #mayHaveMore = new RefillQueue();
  /** When a discovery last claimed for each rate-limited actor (see `#leftToRefills`). */
  readonly #discoveredAt = new WeakMap<EndpointActor, number>();
  /** Claims for places freed by finished attempts, a few places at a time. */
  readonly #pacer: ClaimPacer;
  /** The last discovery stopped at the mailbox budget, at this time: there may be work it did not see. */
  #truncatedDiscoveryAt: number | undefined;
  #closed = false;

  constructor(options: ClaimStageOptions, deps: ClaimStageDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#pacer = new ClaimPacer({ clock: deps.clock, pump: () => deps.pump() });
  }

  /** This endpoint may have more due than its actor holds: a refill claims for it. */
  mayHaveMore(endpointId: string, tenantId: string): void {
    this.#mayHaveMore.add(endpointId, tenantId);
  }

  /** Whether this endpoint waits for a refill (its older work is claimed first). */
  waitsForRefill(endpointId: string): boolean {
    return this.#mayHaveMore.has(endpointId);
  }

  /**
   * A finished attempt freed a place in a mailbox: claim for more, a few places at a time.
   * @param starving its actor has nothing left queued: claim now.
   */
  freed(starving: boolean): void {
    this.#pacer.freed(starving);
  }

  /** The last discovery stopped at the mailbox budget long enough ago: run one again. */
  discoveryDue(now: number): boolean {
    return this.#truncatedDiscoveryAt !== undefined && now - this.#truncatedDiscoveryAt >= DISCOVERY_RETRY_MS;
  }

  close(): void {
    this.#closed = true;
    this.#pacer.close();
  }

  async discover(): Promise<void> {
    const { store, clock, actors } = this.#deps;
    const perEndpointLimit = this.#options.claimPerEndpoint;
    this.#truncatedDiscoveryAt = undefined;
    while (!this.#closed) {
      const now = clock.now();
      const room = actors.room();
      if (room <= 0) {
        this.#truncatedDiscoveryAt = now;
        return;
      }
      const skip: string[] = [];
      for (const [id, actor] of actors.actors) {
        const capacity = actor.capacity(now);
        if (capacity > 0 && !this.#leftToRefills(actor, capacity, now)) continue;
        skip.push(id);
        // Full (or paused) now: whatever it has waiting is claimed by a refill once it has room.
        this.#mayHaveMore.add(id, actor.endpoint.tenantId);
      }
      const limit = Math.min(this.#options.claimBatchSize, room);
      const { total, claimed } = await this.#claim(() => store.claimDue({ owner: this.#deps.owner, now, limit, perEndpointLimit, skipEndpointIds: skip }));
      for (const [endpointId, { count, tenantId }] of claimed) if (count >= perEndpointLimit) this.#mayHaveMore.add(endpointId, tenantId);
      if (total < limit) return;
    }
  }

  async refill(): Promise<void> {
    const { store, clock, actors } = this.#deps;
    while (!this.#closed && this.#mayHaveMore.size > 0) {
      const now = clock.now();
      let room = Math.min(actors.room(), this.#options.claimBatchSize);
      const wants: Array<{ endpointId: string; limit: number }> = [];
      for (const endpointId of this.#mayHaveMore.inTurn()) {
        if (room <= 0) break;
        const actor = actors.actors.get(endpointId);
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
      const { claimed } = await this.#claim(() => store.claimForEndpoints({ owner: this.#deps.owner, now, endpoints: wants }));
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

  /**
   * Claims through `take`, within a claim opened with the actors first (a drain that begins
   * meanwhile then sees it: see lib/engine/actor-registry.ts), and hands every job to its actor;
   * returns how many jobs there were, and how many each endpoint got.
   */
  async #claim(take: () => Promise<readonly DeliveryJob[]>): Promise<{ total: number; claimed: Map<string, { count: number; readonly tenantId: string }> }> {
    const claim = this.#deps.actors.openClaim();
    try {
      const jobs = await take();
      const claimed = new Map<string, { count: number; readonly tenantId: string }>();
      for (const job of jobs) {
        const { endpointId, tenantId } = job.delivery;
        const seen = claimed.get(endpointId);
        if (seen === undefined) claimed.set(endpointId, { count: 1, tenantId });
        else seen.count += 1;
        await claim.dispatch(job);
      }
      return { total: jobs.length, claimed };
    } finally {
      claim.close();
    }
  }
}
