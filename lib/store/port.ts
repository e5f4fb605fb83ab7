/**
 * The Store port: the only storage the engine sees, in the engine's words.
 *
 * An adapter owns its connections, knows nothing of actors or HTTP, and passes
 * the conformance suite in `spec/store/`. Every method may reject with a
 * `StoreError`; input validation happens before the store is called.
 *
 * Delivery lifecycle, as the store enforces it:
 *
 *   pending ──claimDue──► in_flight ──settle(delivered)──► delivered
 *      ▲                     │ ├──settle(retry)──► pending (nextAttemptAt later)
 *      │                     │ ├──settle(release)► pending (no attempt spent)
 *      │                     │ └──settle(dead)───► dead ──replay──► pending (new round)
 *      └── in_flight whose leaseEpoch is older than the slot's epoch is claimable again
 *          (its claimer crashed, lost the slot or released it).
 *
 * Epochs and fencing: the rule every store implements. Other comments and the
 * docs refer here; the conformance suite pins it.
 *
 * 1. A slot's epoch goes up by one each time `acquireLeases` gives the slot to
 *    anyone but the owner recorded on it: a slot never leased is taken at
 *    epoch 1; a released slot (no owner) or an expired lease of another owner
 *    is taken at epoch + 1, by whoever takes it, its last owner included.
 * 2. The recorded owner renewing keeps the epoch, whether its lease is live or
 *    has lapsed: a lapsed lease nobody took is still recorded as its own, and
 *    nobody else can have claimed in the slot meanwhile.
 * 3. `releaseLeases` clears the owner and keeps the epoch (so by rule 1 the
 *    next take increments it). Nothing else changes an epoch.
 * 4. Only an owner whose lease is live (`until > now`) claims, and a claim
 *    marks the delivery in flight at the slot's epoch.
 * 5. A settle is applied only while the delivery is in flight at the epoch it
 *    was claimed with and that epoch is still its slot's; otherwise it is
 *    fenced and reported back, never written. Neither the settler nor the
 *    lease's `until` is checked: by 1 to 4, while the epoch has not moved, no
 *    one but the claimer can have claimed in the slot.
 */
import type { FailureGroup, FailureGroupFilter, FailureGroupKey, FailureGroupReplay } from './failure-groups.ts';
import type { OperatorTriageState, TriageOutcome } from './triage.ts';
import type { DeliveryMinute, DeliveryMinuteIncrement, DeliveryMinutesQuery, EndpointDeliveryTotals } from './delivery-minutes.ts';
import type { EventTypeStore } from './event-type-port.ts';
import type { Attempt, DeadLetter, Delivery, DeliveryJob, DeliveryStatus, Endpoint, OutboxEvent, ReplayJobRecord, ReplayJobState, TenantToken, TriageState } from '../model.ts';

/** A lease on one slot, held by `owner` until `until`. */
export interface SlotLease {
  readonly slot: number;
  readonly owner: string;
  readonly until: number;
  /** Fences claims and settles; when it goes up: the rule in this file's header. */
  readonly epoch: number;
}

/** What `acquireLeases` asks for: `slots` for `owner` until `now + leaseMs`. */
export interface LeaseRequest {
  readonly owner: string;
  readonly slots: readonly number[];
  readonly now: number;
  readonly leaseMs: number;
}

/** What a node says of itself at each heartbeat. Times are the cluster's (lib/cluster/cluster-clock.ts). */
export interface NodeHeartbeat {
  readonly id: string;
  readonly startedAt: number;
  /** The heartbeat's time. */
  readonly now: number;
  /** HTTP requests the node has in flight. */
  readonly inFlight: number;
  /** Its own clock's measured offset to the cluster's (the store's): cluster time − its time, in ms. */
  readonly clockOffsetMs: number;
}

/** A live process of the cluster, as its heartbeats record it. */
export interface NodeRecord {
  readonly id: string;
  readonly startedAt: number;
  /** The last heartbeat. */
  readonly seenAt: number;
  /** As its last written heartbeat said (0 for a row written before these figures existed). */
  readonly inFlight: number;
  readonly clockOffsetMs: number;
}

/** How much work waits in one slot now (`Store.countOpenBySlot`). */
export interface SlotOpenCount {
  readonly slot: number;
  /** Deliveries pending and due, or in flight. */
  readonly open: number;
}

/**
 * The slot weights the whole cluster assigns slots by (lib/cluster/slot-weigher.ts): measured and
 * written by one node, read by every node at each heartbeat, so every node computes the same
 * assignment from the same numbers.
 */
export interface SlotWeights {
  /** Element `slot` is that slot's weight (a quantised share of the open deliveries); one per slot. */
  readonly weights: readonly number[];
  /** The node that measured them. */
  readonly by: string;
  /** When, by that node's clock (for operators; nodes never compare it with their own clock). */
  readonly at: number;
}

/**
 * One change of an endpoint (created, updated, deleted), numbered cluster-wide: every change of
 * any endpoint takes the data's next number, 1, 2, 3, … in commit order, gap-free (a write that
 * rolls back takes none), so a reader that saw number `n` has seen every change up to `n`. Nodes
 * follow the log to bring their actors to an endpoint's current version (`lib/engine/endpoint-sync.ts`).
 */
export interface EndpointChange {
  readonly version: number;
  readonly endpointId: string;
}

/** A delivery to create during fan-out. */
export interface NewDelivery {
  readonly id: string;
  readonly eventId: string;
  readonly endpointId: string;
  readonly tenantId: string;
  readonly eventType: string;
  readonly slot: number;
  readonly nextAttemptAt: number;
  readonly createdAt: number;
  /** The event's ordering key, or `null`. (The store numbers the delivery: `Delivery.sequence`.) */
  readonly orderingKey: string | null;
}

/** One event's fan-out: the deliveries it creates (none when nobody subscribes). */
export interface FanOut {
  readonly eventId: string;
  readonly deliveries: readonly NewDelivery[];
}

/**
 * Deliveries to claim as they are created (fresh work for actors with room):
 * skips a claim's round trip. Only those in slots `owner` holds are claimed.
 */
export interface FanOutClaim {
  readonly owner: string;
  readonly deliveryIds: ReadonlySet<string>;
}

/** The attempt as the engine records it; the store adds the delivery id and round. */
export type AttemptRecord = Omit<Attempt, 'deliveryId' | 'round'>;

/** What to write when an attempt ends (or a claim is given back). */
export type Settlement =
  | { readonly kind: 'delivered'; readonly deliveryId: string; readonly epoch: number; readonly attempt: AttemptRecord }
  | {
      readonly kind: 'retry';
      readonly deliveryId: string;
      readonly epoch: number;
      readonly attempt: AttemptRecord;
      readonly nextAttemptAt: number;
    }
  | {
      readonly kind: 'dead';
      readonly deliveryId: string;
      readonly epoch: number;
      readonly attempt: AttemptRecord;
      readonly deadLetterId: string;
      readonly reason: string;
    }
  /** Gives a claimed delivery back untouched (breaker open, mailbox paused, shutdown): no attempt is spent. */
  | { readonly kind: 'release'; readonly deliveryId: string; readonly epoch: number; readonly nextAttemptAt: number };

export interface SettleResult {
  /** Ids written. */
  readonly applied: readonly string[];
  /** Ids refused because the claim's epoch is no longer current or the delivery is no longer in flight. */
  readonly fenced: readonly string[];
}

export interface ClaimRequest {
  /** The lease owner; only deliveries in slots it holds (lease not expired) are claimed. */
  readonly owner: string;
  readonly now: number;
  /** At most this many in all. */
  readonly limit: number;
  /** At most this many per endpoint, so one backlog cannot starve other endpoints. */
  readonly perEndpointLimit: number;
  /** Endpoints not to claim for (mailbox full, paused by a 429, breaker open). */
  readonly skipEndpointIds: readonly string[];
  /** Claim only for this endpoint. */
  readonly endpointId?: string;
}

/**
 * A claim for named endpoints, each up to its own limit: the engine refilling
 * mailboxes it knows have a backlog. Its cost grows with the rows it takes, not
 * with the number of busy endpoints or the backlog (unlike `claimDue`, which
 * has to find who has work).
 */
export interface EndpointClaimRequest {
  /** The lease owner; only endpoints whose slot it holds (lease not expired) are claimed for. */
  readonly owner: string;
  readonly now: number;
  readonly endpoints: readonly { readonly endpointId: string; readonly limit: number }[];
}

export interface EndpointPatch {
  readonly url?: string;
  readonly description?: string;
  readonly eventTypes?: readonly string[];
  readonly retry?: Endpoint['retry'];
  readonly timeoutMs?: number;
  readonly mode?: Endpoint['mode'];
  readonly ordering?: Endpoint['ordering'];
  readonly concurrency?: number;
  /** A new limit, or `null` to lift it (the endpoint then has no `rateLimit`). */
  readonly rateLimit?: Endpoint['rateLimit'] | null;
  /** New adaptive-concurrency settings, or `null` for a fixed concurrency (the endpoint then has no `adaptiveConcurrency`). */
  readonly adaptiveConcurrency?: Endpoint['adaptiveConcurrency'] | null;
  /** A new payload filter, or `null` to remove it (the endpoint then has no `filter`). */
  readonly filter?: Endpoint['filter'] | null;
  /** New custom headers, secret values sealed, or `null` for none (the endpoint then has no `headers`). */
  readonly headers?: Endpoint['headers'] | null;
  /** New authentication, its secret sealed, or `null` for none (the endpoint then has no `auth`). */
  readonly auth?: Endpoint['auth'] | null;
  readonly status?: Endpoint['status'];
  readonly disabledReason?: string | null;
  readonly failingSince?: number | null;
  readonly secrets?: Endpoint['secrets'];
  /** A new client certificate (its key sealed), or `null` to remove it (the endpoint then has no `clientTls`). */
  readonly clientTls?: Endpoint['clientTls'] | null;
  /**
   * A precondition, not a change: the stored secrets' texts, in order, as the caller read them.
   * When they differ now (another rotation or re-encryption wrote first), nothing is written and
   * the update throws `ConflictError` (`HERALD_CONFLICT`), so a read-modify-write of the secrets
   * never drops one written meanwhile.
   */
  readonly expectedSecrets?: readonly string[];
  /**
   * A precondition like `expectedSecrets`, on the stored `headers` and `auth` (`null`: none) as the
   * caller read them: re-sealing them never drops a change written meanwhile.
   */
  readonly expectedCredentials?: {
    readonly headers: Endpoint['headers'] | null;
    readonly auth: Endpoint['auth'] | null;
  };
  /** A precondition like `expectedSecrets`: the stored client key's sealed text as read (`null`: none). */
  readonly expectedClientTlsKey?: string | null;
}

export interface DeliveryFilter {
  readonly endpointId?: string;
  readonly tenantId?: string;
  readonly eventId?: string;
  readonly status?: DeliveryStatus;
  /** `createdAt >= since` */
  readonly since?: number;
  /** `createdAt < until` */
  readonly until?: number;
  readonly eventType?: string;
  /**
   * Pagination: only deliveries after this one in the listing's order
   * (newest first, ties by id descending), i.e. older than it.
   */
  readonly after?: { readonly createdAt: number; readonly id: string };
  /** Default 100. */
  readonly limit?: number;
}

export interface DeadLetterFilter {
  readonly endpointId?: string;
  readonly tenantId?: string;
  /** `createdAt >= since` */
  readonly since?: number;
  /** `createdAt < until` */
  readonly until?: number;
  /** Also list closed dead letters (replayed, discarded). Default false: only open ones (new, acknowledged). */
  readonly includeReplayed?: boolean;
  /** Only dead letters in this triage state (then `includeReplayed` does not count). */
  readonly state?: TriageState;
  /** Only dead letters of this failure kind (`lib/policy/failure-kind.ts`), e.g. `http-503`. */
  readonly failureKind?: string;
  /**
   * Pagination of `listDeadLetters` (ignored elsewhere): only dead letters after this one in the
   * listing's order (newest first, ties the later inserted first), i.e. older than it. When the
   * dead letter named is gone (purged), those created at its time are skipped too.
   */
  readonly after?: { readonly createdAt: number; readonly id: string };
  /** Default 100. */
  readonly limit?: number;
}

/**
 * An operator's decision about dead letters (`lib/store/triage.ts`): each open one named
 * (new, acknowledged) is set to `state` with the note and who, at `now`; the others are skipped.
 */
export interface TriageRequest {
  readonly ids: readonly string[];
  readonly state: OperatorTriageState;
  readonly note: string;
  readonly by: string;
}

/** The dead letters nobody has reviewed yet (state `new`), all nodes together. */
/** A dead letter a replay job may release: its id (the job's cursor), its delivery and endpoint (for the pacing). */
export interface ReplayableDeadLetter {
  readonly id: string;
  readonly deliveryId: string;
  readonly endpointId: string;
}

/** What a replay job's runner writes after a look: where it got to. */
export interface ReplayJobProgress {
  readonly cursor: string | null;
  readonly replayed: number;
  readonly waiting: number;
}

/** How a replay job ends. */
export interface ReplayJobEnd {
  readonly state: Exclude<ReplayJobState, 'running'>;
  readonly finishedAt: number;
  readonly error: string | null;
}

export interface UnreviewedDeadLetters {
  /** How many, counted up to the cap asked for. */
  readonly count: number;
  /** When the oldest of them was created; `null` when there is none. */
  readonly oldestAt: number | null;
}

export interface PurgeResult {
  readonly attempts: number;
  readonly deadLetters: number;
  readonly events: number;
  /** Replay jobs that ended (done, cancelled, failed) before the horizon. */
  readonly replayJobs: number;
}

/** The event-type catalog's part of the port is declared in `event-type-port.ts`. */
export interface Store extends EventTypeStore {
  /** Creates the schema if needed; returns the data's fixed slot count (set at first start to `slotCount`). */
  init(options: { readonly slotCount: number }): Promise<{ readonly slotCount: number }>;
  /** Closes connections and stops the work signal. */
  close(): Promise<void>;

  /**
   * Calls `listener` soon after another process (or connection) commits new
   * work. Cheap enough to run continuously. Returns a function that stops it.
   */
  watch(listener: () => void): () => void;

  // Endpoints
  createEndpoint(endpoint: Endpoint): Promise<void>;
  getEndpoint(id: string): Promise<Endpoint | undefined>;
  listEndpoints(filter?: { readonly tenantId?: string }): Promise<Endpoint[]>;
  /** Applies the patch and returns the new endpoint, or `undefined` when it does not exist. */
  updateEndpoint(id: string, patch: EndpointPatch, now: number): Promise<Endpoint | undefined>;
  /** Deletes it and cancels its undelivered deliveries. False when it did not exist. */
  deleteEndpoint(id: string, now: number): Promise<boolean>;
  /**
   * The endpoint changes numbered after `after`, in order, at most `limit`: what a node that has
   * seen change `after` has to catch up on. `createEndpoint`, `updateEndpoint` and a
   * `deleteEndpoint` that deleted each record one change, in the same transaction as the write, so a
   * change is never visible before the write it numbers. Changes older than the retention horizon are
   * purged; a reader that finds the first change after `after` numbered above `after + 1` missed some.
   */
  endpointChangesAfter(after: number, limit: number): Promise<EndpointChange[]>;
  /** The newest change's number, purged or not; 0 before the first change. */
  lastEndpointChange(): Promise<number>;
  /** Makes the endpoint's pending deliveries due at `now` (on re-enable). Returns how many moved. */
  resumeDeliveries(endpointId: string, now: number): Promise<number>;
  /** True when at least one endpoint belongs to the tenant. */
  tenantExists(tenantId: string): Promise<boolean>;

  // Outbox
  /** Appends events (used by HTTP publishing; producers in a transaction use `lib/producer`). */
  appendEvents(events: readonly OutboxEvent[]): Promise<void>;
  /**
   * Events not yet fanned out, oldest first; with `exceptTenantIds`, only other tenants' (the
   * engine's look past a busy tenant's backlog, for the first events of quiet tenants): one index
   * lookup per tenant with events waiting, never a walk of an excepted tenant's backlog.
   */
  unfannedEvents(limit: number, exceptTenantIds?: readonly string[]): Promise<OutboxEvent[]>;
  /**
   * How many events wait in the outbox, not yet fanned out, counted up to `cap` (a backlog of
   * millions costs no more than `cap` index entries to count): the backlog the engine has not
   * turned into deliveries yet, which it leaves there while the mailboxes are full.
   */
  countUnfannedEvents(cap: number): Promise<number>;
  /**
   * For every fan-out, inserts its deliveries (ignoring ids that exist) and marks its event
   * fanned out; all of them in one transaction, all or nothing. Deliveries named by `claim`
   * whose slot its owner holds (lease not expired) are inserted in flight at the slot's
   * epoch, as `claimDue` would leave them, and returned; the others are inserted pending.
   * `now` is the time written (fanned out, claimed) and the one leases are checked against.
   * An event already fanned out (by another process, between its read and this call): a store
   * either inserts its deliveries ignoring ids that exist, or skips them (PostgreSQL: the process
   * that marked it wrote them). Both leave the same rows, since every process plans the same
   * deliveries, with the same ids, for an event.
   * Each delivery inserted gets the next number of its endpoint (`Delivery.sequence`): per endpoint
   * 1, 2, 3, … in the order given, gap-free and never reused; an id that exists, or a call that
   * writes nothing (it throws, or rolls back), takes no number. At most one write to an endpoint's
   * counter per call, whatever the number of its deliveries.
   * @throws NotFoundError when an event is not stored (nothing is written).
   */
  recordFanOuts(fanOuts: readonly FanOut[], now: number, claim?: FanOutClaim): Promise<Delivery[]>;
  getEvent(id: string): Promise<OutboxEvent | undefined>;

  // Membership
  /**
   * The store's own clock, in epoch ms, read on its server; `undefined` when it has none apart from
   * this host's (SQLite: one file is on one host, so the node's clock is the cluster's). Nodes
   * measure their offset to it (lib/cluster/cluster-clock.ts) so that the times they compare agree.
   */
  serverTime(): Promise<number | undefined>;
  /**
   * Records a heartbeat of `node` at `now` (creating it on the first one). The last heartbeat never
   * moves backwards; the figures (`inFlight`, `clockOffsetMs`) are those of the last write.
   */
  heartbeat(node: NodeHeartbeat): Promise<void>;
  /** Nodes whose last heartbeat is at or after `seenSince`, by id. */
  listNodes(seenSince: number): Promise<NodeRecord[]>;
  /** Forgets a node (graceful shutdown). */
  removeNode(id: string): Promise<void>;

  // Leases
  /**
   * Takes or renews leases on `slots` for `owner` until `now + leaseMs`: a slot
   * is taken when it is free (never leased or released), its lease has expired
   * (`until <= now`), or it is already the owner's (live or lapsed). Epochs as
   * the header's rule says: kept on a renewal, + 1 on any other take. Returns
   * the leases the owner holds among `slots` afterwards.
   */
  acquireLeases(request: LeaseRequest): Promise<SlotLease[]>;
  /** Gives up the owner's leases on `slots` (they become free at once; the epoch is kept until the next take). */
  releaseLeases(owner: string, slots: readonly number[]): Promise<void>;
  listLeases(): Promise<SlotLease[]>;
  /**
   * Per slot, the deliveries that are work now: pending and due at `now`, or in flight. Slots
   * with none are left out; by slot. One node of the cluster runs it at each heartbeat
   * (lib/cluster/slot-weigher.ts): an index-only count of the open deliveries.
   */
  countOpenBySlot(now: number): Promise<SlotOpenCount[]>;
  /** The slot weights last written (`putSlotWeights`), or `undefined` before the first. */
  getSlotWeights(): Promise<SlotWeights | undefined>;
  /** Replaces the stored slot weights (one record for the whole cluster). */
  putSlotWeights(weights: SlotWeights): Promise<void>;

  // Deliveries
  /** Marks due deliveries in the owner's slots in flight at the slot's epoch and returns them with their events. */
  claimDue(request: ClaimRequest): Promise<DeliveryJob[]>;
  /**
   * Claims pending due deliveries of the named endpoints only (enabled ones, in slots
   * the owner holds): each endpoint's earliest due first, at most its limit; returned
   * earliest due first. Deliveries orphaned by an older epoch are left to `claimDue`.
   */
  claimForEndpoints(request: EndpointClaimRequest): Promise<DeliveryJob[]>;
  /** Writes settlements atomically per delivery, each fenced by its claim epoch (the header's rule 5). */
  settle(settlements: readonly Settlement[], now: number): Promise<SettleResult>;
  getDelivery(id: string): Promise<Delivery | undefined>;
  /** Newest first (ties by id, descending). */
  listDeliveries(filter: DeliveryFilter): Promise<Delivery[]>;
  /**
   * The endpoint's deliveries numbered after `after` (`sequence > after`), in sequence order, at
   * most `limit` (1 to 1000): what a consumer that saw number `after` has to expect. A seek on
   * (endpoint, sequence), whatever the history; deliveries older than the numbering are never listed.
   */
  listDeliveriesAfterSequence(endpointId: string, after: number, limit: number): Promise<Delivery[]>;
  /** Every attempt of a delivery, in order, across rounds. */
  listAttempts(deliveryId: string): Promise<Attempt[]>;
  countDeliveries(): Promise<Readonly<Record<DeliveryStatus, number>>>;
  /** The earliest `nextAttemptAt` among pending deliveries of enabled endpoints, if any. */
  nextDueAt(): Promise<number | undefined>;

  // Dead letters
  getDeadLetter(id: string): Promise<DeadLetter | undefined>;
  /** Newest first. */
  listDeadLetters(filter: DeadLetterFilter): Promise<DeadLetter[]>;
  /**
   * Puts the deliveries of the matching, not yet replayed dead letters back to
   * pending (due `now`, a new round, same event id) and marks the dead letters
   * replayed. By id, any not yet replayed (a discarded one too); by filter, only
   * open ones (`replayableStates`). Returns the ids of the dead letters replayed.
   */
  replayDeadLetters(selection: { readonly ids: readonly string[] } | DeadLetterFilter, now: number): Promise<string[]>;
  /**
   * How many dead letters `replayDeadLetters(filter)` would replay now, changing nothing: the
   * open ones matching `filter` whose delivery is dead and whose endpoint still exists.
   */
  countReplayableDeadLetters(filter: DeadLetterFilter): Promise<number>;
  /**
   * The next open dead letters matching `filter` (as a replay by filter takes them), oldest first,
   * after the dead letter `afterId` in that order (from the start when null); at most `limit`
   * (1 to 1000). A replay job reads its chunks with this and replays them by id.
   */
  replayableDeadLetterPage(
    filter: DeadLetterFilter,
    afterId: string | null,
    limit: number,
    exceptEndpointIds?: readonly string[],
  ): Promise<ReplayableDeadLetter[]>;
  /**
   * How many replayed deliveries (round above 0) of each named endpoint are pending or in flight:
   * one counting read for a replay job's look, whatever the number of deliveries. Endpoints
   * with none are left out.
   */
  countLiveReplays(endpointIds: readonly string[]): Promise<Readonly<Record<string, number>>>;

  // Replay jobs (lib/dead-letters/replay-jobs.ts)
  /** @throws ConflictError when a job with its id exists. */
  createReplayJob(job: ReplayJobRecord): Promise<void>;
  getReplayJob(id: string): Promise<ReplayJobRecord | undefined>;
  /** The newest `limit` jobs, newest first (ties by id, descending). */
  listReplayJobs(limit: number): Promise<ReplayJobRecord[]>;
  /**
   * The running jobs `owner` runs from now on: those it holds (their lease renewed) and those
   * nobody holds or whose lease ended by `now` (taken), each given `leaseUntil`. One node at a
   * time holds a job: a take is conditional on the lease it saw, so two nodes racing get it once.
   */
  leaseReplayJobs(owner: string, now: number, leaseUntil: number): Promise<ReplayJobRecord[]>;
  /** Writes a running job's progress if `owner` still holds it; false when it does not (taken, ended, cancelled). */
  saveReplayJobProgress(id: string, owner: string, progress: ReplayJobProgress): Promise<boolean>;
  /**
   * Ends a running job (held by `owner`; by anyone when `owner` is null: a cancel from any node) and
   * answers it as ended; `undefined` when it was not running (or not `owner`'s).
   */
  endReplayJob(id: string, owner: string | null, end: ReplayJobEnd): Promise<ReplayJobRecord | undefined>;
  /** Gives up `owner`'s running jobs (a node closing): any node may take them at once. */
  releaseReplayJobs(owner: string): Promise<void>;
  /**
   * Acknowledges or discards the named dead letters that are open, all or none of them (one
   * transaction, or one statement); names the others, unknown or closed, in `skipped`.
   */
  triageDeadLetters(request: TriageRequest, now: number): Promise<TriageOutcome>;
  /** How many dead letters are in state `new` (up to `cap`: a count walks an index entry each), and the oldest one's time. */
  unreviewedDeadLetters(cap: number): Promise<UnreviewedDeadLetters>;

  // Failures, grouped (lib/store/failure-groups.ts)
  /**
   * The deliveries waiting for a retry after a failed attempt and the open dead letters, grouped
   * by endpoint and failure kind, the largest groups first, at most `filter.limit`; each with a
   * sample, the outcome of its latest failure. Counts walk an index of the failing rows only.
   */
  failureGroups(filter: FailureGroupFilter): Promise<FailureGroup[]>;
  /**
   * Replays a group: makes its retrying deliveries due at `now` (like `resumeDeliveries`) and
   * replays its open dead letters (like `replayDeadLetters` by filter). Returns how many of each.
   */
  replayFailureGroup(group: FailureGroupKey, now: number): Promise<FailureGroupReplay>;

  // Tenant tokens (lib/tenants/tenant-tokens.ts)
  /** @throws ConflictError when a token with its id exists. */
  createTenantToken(token: TenantToken): Promise<void>;
  /** The token by id, whatever its tenant; `undefined` when unknown (or revoked). */
  getTenantToken(id: string): Promise<TenantToken | undefined>;
  /** The tenant's tokens, oldest first (ties by id). */
  listTenantTokens(tenantId: string): Promise<TenantToken[]>;
  /** Deletes the token when it is the tenant's; false when the tenant has no such token. */
  deleteTenantToken(tenantId: string, id: string): Promise<boolean>;

  // Delivery minutes (lib/store/delivery-minutes.ts): the charts' per-endpoint, per-minute counts
  /**
   * Adds each increment to its (endpoint, minute) row, creating it at zero first: all of them in one
   * transaction (or one bulk write), all or none. Several nodes may add to the same rows at once.
   * The caller gives each (endpoint, minute) at most once per call.
   */
  addDeliveryMinutes(increments: readonly DeliveryMinuteIncrement[]): Promise<void>;
  /**
   * The minutes in `[from, to)` of the endpoints in `scope`, each summed over those endpoints, oldest
   * first; minutes without a row are left out. Reads the minutes only, never the attempt log.
   */
  deliveryMinutes(query: DeliveryMinutesQuery): Promise<DeliveryMinute[]>;
  /**
   * The minutes in `[from, to)` of the endpoints in `scope`, summed per endpoint (every node's
   * increments together): one entry per endpoint with a row in the window, by endpoint id (code unit
   * order). The cluster's attempts and failures per endpoint (`GET /v1/stats`), from the minutes only.
   */
  deliveryTotals(query: DeliveryMinutesQuery): Promise<EndpointDeliveryTotals[]>;

  // Retention
  /**
   * Deletes attempts and dead letters created before `before`, fanned-out events with nothing left
   * to deliver, replay jobs that ended before `before` (a running one is never deleted), and
   * endpoint changes recorded before `before` (their numbers are never reused).
   */
  purge(before: number): Promise<PurgeResult>;
  /** Deletes the delivery minutes that start before `before`, in chunks; answers how many rows went. */
  purgeDeliveryMinutes(before: number): Promise<number>;
}
