/**
 * The settle stage: where actors' results come back. Every actor settles through it (the `settle`
 * of `ActorDeps`), and no result is ever dropped.
 *
 *   settle ─► batched with the turn's others (`SettleBatcher`) ─┬─ written ─► fenced? counted (`onFenced`)
 *                                                              │            ─► a FIFO line's head final: the endpoint to the refill queue
 *                                                              │            ─► a mailbox place freed: the claim pacer
 *                                                              └─ the store failed ─► reported, and tried again at the next pump
 *                                                                                     (`retryFailed`), until written or stopped
 *
 * A result dropped would leave its delivery in flight under this node's lease until the slot
 * changed hands; so a settle the store failed waits for the next pump and tries again.
 *
 * Lifecycle: open ──stopRetrying()──► a failed settle gives up (resolves false: the slot's next
 * holder claims the delivery again) ──close()──► the last batch written, closed.
 */
import type { Clock } from '../clock.ts';
import { EndpointOrdering, type Endpoint } from '../model.ts';
import type { Settlement, Store } from '../store/port.ts';
import type { ClaimStage } from './claim-stage.ts';
import type { EmitEngineEvent } from './engine-events.ts';
import { SettleBatcher } from './settle-batcher.ts';

export interface SettleStageDeps {
  readonly store: Pick<Store, 'settle'>;
  readonly clock: Clock;
  readonly emit: EmitEngineEvent;
  readonly claims: Pick<ClaimStage, 'mayHaveMore' | 'freed'>;
  /** Counts fenced writes; the caller decides how to surface them. */
  onFenced(deliveryId: string): void;
}

export class SettleStage {
  readonly #deps: SettleStageDeps;
  /** Settlements of one event-loop turn, written in one store call. */
  readonly #settler: SettleBatcher;
  /** Settles waiting to be retried after a store failure: woken at the next pump. */
  readonly #waiting: Array<() => void> = [];
  #stopped = false;

  constructor(deps: SettleStageDeps) {
    this.#deps = deps;
    this.#settler = new SettleBatcher({ settle: (batch, now) => deps.store.settle(batch, now), now: () => deps.clock.now() });
  }

  /**
   * Writes a settlement, retrying at every pump while the store fails. Resolves whether it was
   * applied; false also if retries stopped first (the delivery is then claimed again by the
   * slot's next holder).
   */
  async settle(settlement: Settlement, actor: { readonly queued: number; readonly endpoint: Endpoint }): Promise<boolean> {
    const { claims } = this.#deps;
    for (;;) {
      try {
        const applied = await this.#settler.settle(settlement);
        if (!applied) this.#deps.onFenced(settlement.deliveryId);
        // A FIFO line's head is final: the next of its line is due now, not at the next sweep.
        if (applied && isFifoLineEnd(settlement, actor.endpoint)) claims.mayHaveMore(actor.endpoint.id, actor.endpoint.tenantId);
        // A finished attempt frees room in the mailbox: look for more work, a few places at a
        // time, or at once when this actor has nothing left queued.
        claims.freed(actor.queued === 0);
        return applied;
      } catch (error) {
        this.#deps.emit('failure', { where: `settle ${settlement.deliveryId}`, error });
        if (this.#stopped) return false;
        await new Promise<void>((resolve) => this.#waiting.push(resolve));
        if (this.#stopped) return false;
      }
    }
  }

  /** A pump began: the settles that failed try again. */
  retryFailed(): void {
    for (const wake of this.#waiting.splice(0)) wake();
  }

  /** The node is closing: failed settles give up, so the actors' running attempts can end. */
  stopRetrying(): void {
    this.#stopped = true;
    this.retryFailed();
  }

  /** Writes the last batch. */
  async close(): Promise<void> {
    this.stopRetrying();
    await this.#settler.close();
  }
}

/** A delivery of a FIFO endpoint left its line (delivered or dead): the line has a new head. */
function isFifoLineEnd(settlement: Settlement, endpoint: Endpoint): boolean {
  return endpoint.ordering === EndpointOrdering.FIFO && (settlement.kind === 'delivered' || settlement.kind === 'dead');
}
