/**
 * The slot weights the whole cluster assigns slots by, so that shares follow
 * the work and not the count of slots (lib/cluster/rendezvous.ts).
 *
 * Every node must compute the same assignment, so every node must use the same
 * weights. They cannot each count for themselves: two nodes counting a moving
 * backlog a few milliseconds apart would disagree, and a slot both want would
 * be fought over. So one node measures and the others read what it wrote:
 *
 *   - the *weighing node* is the first live node by id (every node knows the
 *     same list, give or take a heartbeat; two that both believe they weigh
 *     for a moment both write, and the last write stands);
 *   - at each heartbeat it counts the open deliveries per slot
 *     (`Store.countOpenBySlot`: pending and due, or in flight) and decides
 *     with {@link reweigh} whether the stored weights still describe the work
 *     well enough; only when they do not does it write new ones
 *     (`Store.putSlotWeights`, one record);
 *   - at each heartbeat every node reads that record (`Store.getSlotWeights`,
 *     one key lookup) and assigns by it.
 *
 * Why one node's count and not a count by every node: the count is a walk of
 * two partial indexes over every open delivery, which grows with the backlog
 * (spec/store/postgres-plans.spec.ts shows the plan), where reading the record
 * is one key lookup; n nodes counting would cost n times the walk and still
 * disagree.
 *
 * Hysteresis, so slots do not move back and forth: the stored weights change
 * only when the node holding the most work, under the assignment the stored
 * weights give, holds more than `tolerance` (10 %) above its fair share of the
 * work measured now, when that excess is worth a move (`minExcess` deliveries),
 * and when the new weights would cut it. Weights
 * are stored quantised (in units of 1/512 of the total), and only once two
 * heartbeats in a row call for new ones, so a noisy count does not move slots.
 *
 * State: the last weights read (used again when a read fails, so a store hiccup
 * never reshuffles the slots), and how many heartbeats in a row called for new
 * weights.
 */
import type { Clock } from '../clock.ts';
import type { SlotOpenCount, SlotWeights, Store } from '../store/port.ts';
import { assignSlots } from './rendezvous.ts';

export interface ReweighPolicy {
  /**
   * How far above its fair share of the work the busiest node may be before the weights are
   * measured again: 0.1 lets it hold up to 1.1 × (total / nodes). It bounds what an uneven share
   * costs: the busiest node finishes that much later than the others, so 2 nodes deliver at least
   * 2 / 1.1 = 1.8× one. 25 % was tried first: 2 nodes on 40 busy endpoints stayed at 1 440 / 1 760
   * deliveries (1.68× one) and 3 nodes at 960 / 1 280 / 960, never rebalanced.
   * @default 0.1
   */
  readonly tolerance: number;
  /**
   * The busiest node's excess over its fair share, in open deliveries, below which the weights are
   * left as they are, however uneven in proportion: the tail of a backlog, a trickle. Moving a
   * slot stops its work for about two heartbeats (drain, release, take); while every node has
   * other busy slots that costs little, but a few dozen deliveries of excess are gone sooner than
   * the move is done. In deliveries, not time: the weigher does not know how fast the endpoints
   * answer; 64 is 0.4 s of one node's work at 8 requests in flight answered in 50 ms.
   * @default 64
   */
  readonly minExcess: number;
}

export const REWEIGH_DEFAULTS = Object.freeze({ tolerance: 0.1, minExcess: 64 } satisfies Required<ReweighPolicy>);

/** Quantisation: a total is split into this many units, so weights keep about 1/512 of the total as their resolution. */
const WEIGHT_UNITS = 512;

/** One weight per slot from the counts: the share of the total, in units of total / 512 (at least one delivery), rounded. */
export function quantiseWeights(counts: readonly SlotOpenCount[], slotCount: number): number[] {
  const weights = new Array<number>(slotCount).fill(0);
  const total = counts.reduce((sum, c) => sum + c.open, 0);
  const unit = Math.max(1, total / WEIGHT_UNITS);
  for (const { slot, open } of counts) if (slot >= 0 && slot < slotCount) weights[slot] = Math.round(open / unit);
  return weights;
}

/** The busiest node's share of the work over its fair share (1 = perfectly even), for an assignment and the work per slot. */
export function imbalance(owners: readonly string[], work: readonly number[], nodeCount: number): number {
  const byNode = new Map<string, number>();
  let total = 0;
  owners.forEach((owner, slot) => {
    const w = work[slot] ?? 0;
    total += w;
    byNode.set(owner, (byNode.get(owner) ?? 0) + w);
  });
  if (total === 0 || nodeCount === 0) return 1;
  return Math.max(...byNode.values()) / (total / nodeCount);
}

/**
 * The weights to store now, or `undefined` to keep the stored ones (see the module comment):
 * new weights only when the stored ones leave the busiest node more than `tolerance` and at least
 * `minExcess` deliveries above its fair share, and the new ones would cut that excess by at least
 * a tenth.
 */
export function reweigh(
  input: { readonly stored: readonly number[]; readonly counts: readonly SlotOpenCount[]; readonly nodeIds: readonly string[]; readonly slotCount: number },
  policy: ReweighPolicy = REWEIGH_DEFAULTS,
): number[] | undefined {
  const { stored, counts, nodeIds, slotCount } = input;
  const nodes = new Set(nodeIds).size;
  if (nodes < 2) return undefined;
  const work = new Array<number>(slotCount).fill(0);
  let total = 0;
  for (const { slot, open } of counts) {
    if (slot < 0 || slot >= slotCount) continue;
    work[slot] = open;
    total += open;
  }
  const before = imbalance(assignSlots(nodeIds, slotCount, stored), work, nodes);
  if (before <= 1 + policy.tolerance || (before - 1) * (total / nodes) < policy.minExcess) return undefined;
  const next = quantiseWeights(counts, slotCount);
  const after = imbalance(assignSlots(nodeIds, slotCount, next), work, nodes);
  return before - after >= 0.1 * (before - 1) ? next : undefined;
}

export interface SlotWeigherOptions {
  /** This node's id. */
  readonly owner: string;
  readonly slotCount: number;
  readonly policy?: ReweighPolicy;
  /**
   * Heartbeats in a row that must each find new weights worth storing before they are stored:
   * the count it weighs by is small (only what is fanned out ahead of the nodes, docs/SCALING.md)
   * and so noisy, and one noisy heartbeat must not move slots.
   * @default 2
   */
  readonly confirmations?: number;
}

export interface SlotWeigherDeps {
  readonly store: Pick<Store, 'countOpenBySlot' | 'getSlotWeights' | 'putSlotWeights'>;
  readonly clock: Clock;
  onError(error: unknown): void;
}

export class SlotWeigher {
  readonly #options: SlotWeigherOptions;
  readonly #deps: SlotWeigherDeps;
  #last: readonly number[] = [];
  /** Heartbeats in a row, up to now, whose count called for new weights. */
  #calls = 0;

  constructor(options: SlotWeigherOptions, deps: SlotWeigherDeps) {
    this.#options = options;
    this.#deps = deps;
  }

  /**
   * The weights to assign by at this heartbeat, given the live nodes: the stored ones, after
   * this node has measured and perhaps replaced them when it is the weighing node. Never rejects:
   * on a store error it reports it and answers the last weights it had.
   */
  async weights(liveNodes: readonly string[]): Promise<readonly number[]> {
    const { store, clock } = this.#deps;
    const { owner, slotCount } = this.#options;
    try {
      const read = await store.getSlotWeights();
      // A record for another slot count (it cannot happen: the count is fixed at first start) is ignored.
      let stored = read !== undefined && read.weights.length === slotCount ? read.weights : [];
      if ([...liveNodes].sort()[0] === owner) {
        const now = clock.now();
        const next = reweigh({ stored, counts: await store.countOpenBySlot(now), nodeIds: liveNodes, slotCount }, this.#options.policy);
        this.#calls = next === undefined ? 0 : this.#calls + 1;
        if (next !== undefined && this.#calls >= (this.#options.confirmations ?? 2)) {
          this.#calls = 0;
          const record: SlotWeights = { weights: next, by: owner, at: now };
          await store.putSlotWeights(record);
          stored = next;
        }
      }
      this.#last = stored;
    } catch (error) {
      this.#deps.onError(error);
    }
    return this.#last;
  }
}
