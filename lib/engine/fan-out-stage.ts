/**
 * The fan-out stage: turns outbox events into deliveries, claiming as they are written the ones
 * the mailboxes have room for, so most deliveries are written once, in flight, and handed over.
 *
 *   fanOut:      read the outbox oldest first, as many events as the mailboxes have room for
 *                ─► plan each event's deliveries (`planDeliveries`) ─► choose those to claim
 *                (per endpoint what its actor can take, within the room) ─► one `recordFanOuts`
 *                writes them all: the chosen in flight, the rest pending (their endpoints to the
 *                refill queue) ─► the claimed to their actors
 *                stops at the mailbox budget with events left: `held`, and the next pump fans out again
 *   fanOutQuiet: while held, the oldest events of tenants with nothing in the mailboxes, past
 *                the busy tenants' backlog, within the budget plus `QUIET_RESERVE`
 *
 * A local publish during a fan-out may end it early (`cutShort`, the supervisor's rule): the next
 * round reaches the new events after one stage.
 *
 * Lifecycle: open ──close()──► closed (a fan-out stops after its current batch).
 */
import type { Clock } from '../clock.ts';
import type { Endpoint, OutboxEvent } from '../model.ts';
import type { FanOut, Store } from '../store/port.ts';
import { traceFanOut } from '../tracing/fan-out-span.ts';
import type { ActorRegistry, OpenClaim } from './actor-registry.ts';
import type { ClaimStage } from './claim-stage.ts';
import { planDeliveries } from './fanout.ts';

export interface FanOutStageOptions {
  readonly slotCount: number;
  /** What a new actor is given at once: the per-endpoint share of a claim. */
  readonly claimPerEndpoint: number;
  /** A `herald fan-out` span per batch, when an OpenTelemetry SDK records it (`tracing.enabled`). @default true */
  readonly tracing?: boolean;
}

export interface FanOutStageDeps {
  readonly store: Pick<Store, 'unfannedEvents' | 'listEndpoints' | 'recordFanOuts'>;
  readonly clock: Clock;
  /** The lease owner id this node claims as. */
  readonly owner: string;
  readonly actors: Pick<ActorRegistry, 'actors' | 'room' | 'busyTenants' | 'isDraining' | 'openClaim'>;
  readonly refills: Pick<ClaimStage, 'mayHaveMore' | 'waitsForRefill'>;
  /** Whether the round ends at this stage (a local publish arrived during it). */
  cutShort(): boolean;
}

const FANOUT_BATCH = 100;
/**
 * Deliveries of quiet tenants' events claimed beyond the mailbox budget when fan-out is held
 * (see `fanOutQuiet`): the mailboxes hold at most `mailboxBudget + QUIET_RESERVE`.
 */
const QUIET_RESERVE = 100;

export class FanOutStage {
  readonly #options: FanOutStageOptions;
  readonly #deps: FanOutStageDeps;
  /**
   * The last fan-out stopped at the mailbox budget with events left in the outbox: the next pump
   * (a finished attempt's, say) fans out again.
   */
  #held = false;
  #closed = false;

  constructor(options: FanOutStageOptions, deps: FanOutStageDeps) {
    this.#options = options;
    this.#deps = deps;
  }

  get held(): boolean {
    return this.#held;
  }

  close(): void {
    this.#closed = true;
  }

  /**
   * Fans out as many events as the mailboxes have room for (deliveries written pending count
   * against the room too), leaving the rest in the outbox for the next pump: a delivery is then
   * written in flight and handed to its actor at once, where fanning out a backlog ahead of the
   * mailboxes would write each one pending and claim it later (two writes instead of one).
   */
  async fanOut(): Promise<void> {
    const { store, actors } = this.#deps;
    let writtenPending = 0;
    this.#held = false;
    for (;;) {
      const room = actors.room() - writtenPending;
      if (room <= 0) {
        this.#held = true;
        return;
      }
      const wanted = Math.min(FANOUT_BATCH, room);
      const events = await store.unfannedEvents(wanted);
      if (events.length === 0) return;
      writtenPending += await this.#fanOutEvents(events, actors.room());
      if (events.length < wanted || this.#closed) return;
      if (this.#deps.cutShort()) {
        // There may be more: the next round fans out again, after the new events' quiet tenants.
        this.#held = true;
        return;
      }
    }
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
  async fanOutQuiet(): Promise<void> {
    const { store, actors } = this.#deps;
    const events = await store.unfannedEvents(FANOUT_BATCH, [...actors.busyTenants()]);
    if (events.length === 0 || this.#closed) return;
    await this.#fanOutEvents(events, actors.room() + QUIET_RESERVE);
  }

  /**
   * Writes these events' deliveries, claiming (and handing to their actors) up to `room` of them;
   * answers how many were written pending.
   */
  async #fanOutEvents(events: readonly OutboxEvent[], room: number): Promise<number> {
    const { written, claimed } = await traceFanOut(events, () => this.#fanOutBatch(events, room), this.#options.tracing);
    return written - claimed;
  }

  /** Writes these events' deliveries, claiming up to `room` of them; answers how many it wrote and claimed. */
  async #fanOutBatch(events: readonly OutboxEvent[], room: number): Promise<{ written: number; claimed: number }> {
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
    // Opened before the slots being drained are left out: a drain that begins from here on waits for it.
    const claim = this.#deps.actors.openClaim();
    try {
      return await this.#record(fanOuts, events, now, this.#claimOnFanOut(fanOuts, enabled, now, room), claim);
    } finally {
      claim.close();
    }
  }

  /** Writes the deliveries in one store call, claiming `deliveryIds`, and hands the claimed to their actors. */
  async #record(fanOuts: readonly FanOut[], events: readonly OutboxEvent[], now: number, deliveryIds: ReadonlySet<string>, claim: OpenClaim): Promise<{ written: number; claimed: number }> {
    const { store, refills } = this.#deps;
    // One transaction for the batch: a commit per event cost more than the deliveries it wrote.
    const claimed = await store.recordFanOuts(fanOuts, now, { owner: this.#deps.owner, deliveryIds });
    let written = 0;
    for (const { deliveries } of fanOuts) written += deliveries.length;
    if (claimed.length < deliveryIds.size) {
      // Chosen but written pending (a FIFO line's later delivery, the lease lost): for a refill.
      const inFlight = new Set(claimed.map((d) => d.id));
      for (const { deliveries } of fanOuts) {
        for (const d of deliveries) if (deliveryIds.has(d.id) && !inFlight.has(d.id)) refills.mayHaveMore(d.endpointId, d.tenantId);
      }
    }
    if (claimed.length > 0) {
      const byId = new Map(events.map((event) => [event.id, event]));
      for (const delivery of claimed) {
        const event = byId.get(delivery.eventId);
        if (event !== undefined) await claim.dispatch({ delivery, event });
      }
    }
    return { written, claimed: claimed.length };
  }

  /**
   * Which new deliveries to claim as they are written: up to `room` in all, per endpoint what its
   * actor could take (a new actor: the per-endpoint share of a claim). Not for endpoints that may
   * already have work waiting (refills serve those first) or slots being drained. The rest are
   * written pending, and their endpoints marked for a refill.
   */
  #claimOnFanOut(fanOuts: readonly FanOut[], enabled: ReadonlySet<string>, now: number, room: number): Set<string> {
    const { actors, refills } = this.#deps;
    const chosen = new Set<string>();
    const left = new Map<string, number>();
    for (const { deliveries } of fanOuts) {
      for (const d of deliveries) {
        if (!enabled.has(d.endpointId) || actors.isDraining(d.slot) || refills.waitsForRefill(d.endpointId)) continue;
        let capacity = left.get(d.endpointId);
        if (capacity === undefined) capacity = actors.actors.get(d.endpointId)?.capacity(now) ?? this.#options.claimPerEndpoint;
        if (capacity > 0 && room > 0) {
          chosen.add(d.id);
          capacity -= 1;
          room -= 1;
        } else {
          refills.mayHaveMore(d.endpointId, d.tenantId);
        }
        left.set(d.endpointId, capacity);
      }
    }
    return chosen;
  }
}
