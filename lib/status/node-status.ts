/**
 * The status snapshot of one node (`/v1/status`, `herald status`): what this node holds and
 * runs, read from its parts, beside the cluster's counts read from the store. A store that does
 * not answer shows in `store` and leaves the counts empty; the snapshot itself never throws.
 */
import type { Clock } from '../clock.ts';
import { UNREVIEWED_COUNT_CAP } from '../dead-letters/review-watch.ts';
import type { BreakerState } from '../engine/breaker.ts';
import type { NodeRecord, SlotLease, Store } from '../store/port.ts';
import type { StoreAvailability } from '../store/store-health.ts';

/** The status counts the outbox's waiting events up to this many (a count walks an index entry per event). */
export const OUTBOX_COUNT_CAP = 100_000;

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
  /** How deliveries leave this node: through `delivery.proxy` (its URL, the password masked), or `null`: straight. */
  readonly egress: { readonly proxy: string | null };
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
  readonly actors: readonly ActorStatus[];
}

/** One endpoint's actor on this node, as the status shows it. */
export interface ActorStatus {
  readonly endpointId: string;
  readonly breaker: BreakerState;
  readonly queued: number;
  readonly running: number;
  /** Requests allowed in flight now: the adaptive limit, or the endpoint's fixed `concurrency`. */
  readonly concurrencyLimit: number;
  readonly pausedUntil: number | null;
  readonly lastError: string | null;
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

/** What the snapshot reads from this node's running parts, each at the moment it is taken. */
export interface NodeStatusSources {
  readonly nodeId: string;
  readonly slotCount: number;
  /** A node is live while its last heartbeat is within a lease period. */
  readonly leaseMs: number;
  readonly reviewWithinMs: number;
  /** `delivery.proxy` with its password masked; `null`: none. */
  readonly proxy: string | null;
  startedAt(): number;
  inFlight(): number;
  clockOffsetMs(): number;
  fencedWrites(): number;
  storeAvailability(): StoreAvailability;
  leases(): {
    readonly held: readonly SlotLease[];
    readonly liveNodes: readonly string[];
    readonly draining: readonly number[];
  };
  actors(): readonly ActorStatus[];
}

export class NodeStatus {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #sources: NodeStatusSources;

  constructor(sources: NodeStatusSources, deps: { readonly store: Store; readonly clock: Clock }) {
    this.#sources = sources;
    this.#store = deps.store;
    this.#clock = deps.clock;
  }

  /** Never throws for the store: an unreachable store shows in `store` (and `deliveries` is empty). */
  async snapshot(): Promise<StatusSnapshot> {
    const sources = this.#sources;
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
        this.#store.listNodes(askedAt - sources.leaseMs + 1),
        this.#store.listLeases(),
      ]);
      nodes = clusterNodesOf(records, leases, askedAt);
    } catch (error) {
      storeError = (error as Error)?.message ?? String(error);
    }
    const availability = sources.storeAvailability();
    const leases = sources.leases();
    return {
      node: sources.nodeId,
      startedAt: sources.startedAt(),
      slotsOwned: leases.held.length,
      slotCount: sources.slotCount,
      inFlight: sources.inFlight(),
      clockOffsetMs: Math.round(sources.clockOffsetMs()),
      deliveries,
      unfannedEvents,
      fencedWrites: sources.fencedWrites(),
      egress: { proxy: sources.proxy },
      deadLetters: {
        unreviewed: unreviewed.count,
        oldestUnreviewedAt: unreviewed.oldestAt,
        oldestUnreviewedAgeMs: unreviewed.oldestAt === null ? 0 : Math.max(0, askedAt - unreviewed.oldestAt),
        reviewWithinMs: sources.reviewWithinMs,
      },
      store: {
        reachable: storeError === null,
        available: storeError === null && availability.available,
        latencyMs: this.#clock.now() - askedAt,
        error: storeError ?? (availability.available ? null : availability.reason),
      },
      cluster: {
        nodes,
        liveNodes: leases.liveNodes,
        leases: leases.held.map(({ slot, epoch, until }) => ({ slot, epoch, until })),
        draining: leases.draining,
      },
      actors: sources.actors(),
    };
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
