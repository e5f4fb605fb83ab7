/**
 * Cluster membership and this node's slot leases.
 *
 * Every `renewIntervalMs` (the heartbeat) the keeper:
 *   0. measures the cluster clock's offset to the store's (lib/cluster/cluster-clock.ts), so
 *      every time it writes and compares below is on the clock the other nodes use;
 *   1. records a heartbeat for this node in `nodes`, with its requests in flight and offset;
 *   2. lists the live nodes (a heartbeat within `leaseMs`);
 *   3. computes this node's fair share of slots by bounded-load rendezvous
 *      hashing over the live nodes (lib/cluster/rendezvous.ts), weighted by the
 *      cluster's stored slot weights when given (lib/cluster/slot-weigher.ts) —
 *      every node computes the same assignment, so no slot is fought over;
 *   4. starts draining the slots it holds but should not (their actors finish
 *      their attempts and give back their queued work); a slot is released only
 *      once drained, and its lease is renewed until then;
 *   5. takes or renews, in one store write, its share plus the slots still
 *      draining. A slot another live node still holds is taken once that node
 *      lets it go; a dead node's slots once its lease expires.
 *
 * Belief: this node owns a slot only while it holds a lease on it whose
 * `until` is in the future by its (cluster) clock. A node paused past its lease
 * therefore stops believing at once; once another node has taken its slots, its late
 * writes are fenced by epoch (the rule in lib/store/port.ts).
 *
 *   stopped ──start()──► running ──close()──► stopped (slots released, node removed)
 */
import type { Clock, TimerHandle } from '../clock.ts';
import { CoalescedRounds } from '../coalesced-rounds.ts';
import type { SlotLease, Store } from '../store/port.ts';
import { slotsFor } from './rendezvous.ts';

export interface LeaseKeeperOptions {
  readonly owner: string;
  readonly slotCount: number;
  /** A node without a heartbeat for this long is gone; a lease not renewed for this long expires. */
  readonly leaseMs: number;
  /** Heartbeat and renewal period. */
  readonly renewIntervalMs: number;
}

/** The cluster clock as the keeper sees it: measured each round, its offset reported in the heartbeat. */
export interface ClockOffset {
  measure(): Promise<void>;
  readonly offsetMs: number;
}

export interface LeaseKeeperDeps {
  readonly store: Store;
  /** The cluster's clock (the `clockOffset`'s, when there is one): leases and heartbeats are compared across nodes. */
  readonly clock: Clock;
  /**
   * Measured at the start of every round, before the heartbeat; a failed measurement goes to
   * `onError` and the round goes on with the last offset.
   * @default undefined: `clock` is taken as the cluster's as it is, offset 0
   */
  readonly clockOffset?: ClockOffset;
  /** Requests in flight on this node, for its heartbeat. @default () => 0 */
  readonly inFlight?: () => number;
  /** After every renewal: the leases now held. */
  onChange(held: readonly SlotLease[]): void;
  /** Stop work in these slots and resolve once their in-flight attempts have settled. */
  drain(slots: readonly number[]): Promise<void>;
  /** These slots were released after draining. */
  released(slots: readonly number[]): void;
  onError(error: unknown): void;
  /** The slot weights to assign by, given the live nodes (none: slots are shared by count). Never rejects. */
  slotWeights?(liveNodes: readonly string[]): Promise<readonly number[]>;
}

export class LeaseKeeper {
  readonly #options: LeaseKeeperOptions;
  readonly #deps: LeaseKeeperDeps;
  /** Taken at the first round, once the clock has been measured. */
  #startedAt: number | undefined;
  #held: readonly SlotLease[] = [];
  #liveNodes: readonly string[] = [];
  readonly #draining = new Set<number>();
  readonly #drains = new Set<Promise<void>>();
  #timer: TimerHandle | undefined;
  /** Renewals one at a time; one due while one runs runs right after, with a fresh `now`. */
  readonly #rounds: CoalescedRounds;
  /** The last acquire write sent, settled either way: a release waits for it (see #drain). */
  #acquiring: Promise<void> | undefined;

  constructor(options: LeaseKeeperOptions, deps: LeaseKeeperDeps) {
    this.#options = options;
    this.#deps = deps;
    this.#rounds = new CoalescedRounds({ round: () => this.#round(), onError: (error) => deps.onError(error), goOn: () => this.#timer !== undefined });
  }

  get owner(): string {
    return this.#options.owner;
  }

  /** The leases this node believes it holds now (not expired by its own clock). */
  get held(): readonly SlotLease[] {
    const now = this.#deps.clock.now();
    return this.#held.filter((lease) => lease.until > now);
  }

  /** Live nodes as of the last heartbeat, this one included. */
  get liveNodes(): readonly string[] {
    return this.#liveNodes;
  }

  get draining(): readonly number[] {
    return [...this.#draining];
  }

  async start(): Promise<void> {
    await this.renew();
    this.#timer = this.#deps.clock.setInterval(() => void this.renew(), this.#options.renewIntervalMs);
  }

  /** One heartbeat and renewal round. Calls during a round coalesce into one more. */
  async renew(): Promise<void> {
    return this.#rounds.request();
  }

  /** Stops renewing, waits for drains, releases every slot so others take them at once, and leaves the cluster. */
  async close(): Promise<void> {
    this.#timer?.cancel();
    this.#timer = undefined;
    await this.#rounds.idle;
    await Promise.all(this.#drains);
    const slots = this.#held.map((lease) => lease.slot);
    this.#held = [];
    const { store } = this.#deps;
    if (slots.length > 0) await store.releaseLeases(this.#options.owner, slots);
    await store.removeNode(this.#options.owner);
  }

  async #round(): Promise<void> {
    const { store, clock, clockOffset } = this.#deps;
    const { owner, slotCount, leaseMs } = this.#options;
    try {
      await clockOffset?.measure();
    } catch (error) {
      this.#deps.onError(error);
    }
    const now = clock.now();
    this.#startedAt ??= now;
    const inFlight = this.#deps.inFlight?.() ?? 0;
    await store.heartbeat({ id: owner, startedAt: this.#startedAt, now, inFlight, clockOffsetMs: clockOffset?.offsetMs ?? 0 });
    // Gone at the same instant its leases expire (`until <= now`), so no slot is left wanted by nobody.
    const nodes = (await store.listNodes(now - leaseMs + 1)).map((node) => node.id);
    this.#liveNodes = nodes.includes(owner) ? nodes : [...nodes, owner].sort();
    const weights = (await this.#deps.slotWeights?.(this.#liveNodes)) ?? [];
    const share = new Set(slotsFor(owner, this.#liveNodes, slotCount, weights));

    const surplus = this.held.map((lease) => lease.slot).filter((slot) => !share.has(slot) && !this.#draining.has(slot));
    if (surplus.length > 0) this.#drain(surplus);

    // Computed and written in one synchronous step, like the release in #drain, so a slot
    // being released is never taken back by a round that saw it still draining.
    const wanted = [...share, ...this.#draining].sort((a, b) => a - b);
    const acquiring = store.acquireLeases({ owner, slots: wanted, now: clock.now(), leaseMs });
    this.#acquiring = acquiring.then(() => undefined, () => undefined);
    const held = await acquiring;
    // A drain may have released some of them while the write was answered.
    this.#held = held.filter((lease) => share.has(lease.slot) || this.#draining.has(lease.slot));
    // Always: new slots, new epochs, or a lease that had lapsed (a claim made
    // meanwhile found nothing) may all have made work claimable.
    this.#deps.onChange(this.held);
  }

  #drain(slots: readonly number[]): void {
    for (const slot of slots) this.#draining.add(slot);
    const done = (async () => {
      try {
        await this.#deps.drain(slots);
      } catch (error) {
        this.#deps.onError(error);
      }
      // Forgotten in one synchronous step (see #round): no round from now on asks for them.
      const gone = new Set(slots);
      for (const slot of slots) this.#draining.delete(slot);
      this.#held = this.#held.filter((lease) => !gone.has(lease.slot));
      // But the acquire of a round that saw them draining may still be on its way: a store with a
      // pool of connections (PostgreSQL, MongoDB) can run it after a release sent later, and it
      // would take the free slots back for this node, which no longer wants them: they would stay
      // unowned until the lease ran out (a new node waited 3 s for its share with a 3 s lease).
      // So the release is sent once that acquire has been answered.
      const acquiring = this.#acquiring;
      try {
        await acquiring;
        await this.#deps.store.releaseLeases(this.#options.owner, slots);
      } catch (error) {
        this.#deps.onError(error);
      }
      this.#deps.released(slots);
    })();
    this.#drains.add(done);
    void done.finally(() => this.#drains.delete(done));
  }
}
