/**
 * Which node should own which slot: rendezvous (highest-random-weight)
 * hashing with bounded load.
 *
 * Every node computes the same assignment from the list of live nodes alone,
 * with no coordination and nothing stored. Each (slot, node) pair has a
 * pseudo-random weight; pairs are taken heaviest first, and a node takes a
 * slot only while it holds fewer than ⌈slots / nodes⌉. Plain rendezvous
 * hashing moves the fewest slots but leaves shares uneven (±30 % at 256 slots
 * and 3 nodes); the cap makes shares even (within a couple of slots) at the price of a
 * few more moves: a fourth node joining moves about 25–30 % of the slots
 * instead of the ideal 25 %, and a node leaving moves its own slots plus a
 * handful (measured in spec/cluster/rendezvous.spec.ts and docs/SCALING.md).
 *
 * Counting slots balances the work only when every slot carries about the
 * same: a backlog on 40 endpoints sits in about 40 slots of 256, and whoever
 * draws most of them delivers most of it while the others idle. So the
 * assignment may be given a weight per slot (its open deliveries, measured by
 * one node and shared through the store: lib/cluster/slot-weigher.ts). Then
 * the busy slots are placed first, heaviest first, each on the first node in
 * its rendezvous order whose weight stays within the fair share (total / nodes)
 * and whose count stays under the count cap, or else on the lightest node; the
 * idle slots follow as before, under the count cap counting the busy ones, so
 * idle slots stay spread and a node that joins still gets its share of them.
 * The same weights always give the same assignment; when weights may change is
 * decided by the weigher (hysteresis), not here.
 */

/** 32-bit FNV-1a over the node id and the slot, then a murmur3 finaliser for spread. */
export function weight(nodeId: string, slot: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < nodeId.length; i++) {
    hash ^= nodeId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= slot;
  hash = Math.imul(hash, 0x01000193);
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/**
 * The whole assignment: element `slot` is the id of the node that should own it ('' when there are
 * no nodes). With `weights` (element `slot` is its weight, missing or 0 for an idle slot), the busy
 * slots are shared by weight and the idle ones by count (see the module comment).
 */
export function assignSlots(nodeIds: readonly string[], slotCount: number, weights: readonly number[] = []): string[] {
  const owners = new Array<string>(slotCount).fill('');
  const nodes = [...new Set(nodeIds)].sort();
  if (nodes.length === 0) return owners;
  const cap = Math.ceil(slotCount / nodes.length);
  const count = new Array<number>(nodes.length).fill(0);
  placeBusySlots(nodes, slotCount, weights, cap, owners, count);
  const pairs: Array<{ readonly w: number; readonly node: number; readonly slot: number }> = [];
  for (let slot = 0; slot < slotCount; slot++) {
    if (owners[slot] !== '') continue;
    nodes.forEach((id, node) => pairs.push({ w: weight(id, slot), node, slot }));
  }
  // Heaviest first; ties (practically never) by node order then slot, so every node agrees.
  pairs.sort((a, b) => b.w - a.w || a.node - b.node || a.slot - b.slot);
  for (const { node, slot } of pairs) {
    if (owners[slot] !== '' || (count[node] ?? 0) >= cap) continue;
    owners[slot] = nodes[node] ?? '';
    count[node] = (count[node] ?? 0) + 1;
  }
  return owners;
}

/**
 * Places the slots of positive weight, heaviest first (ties by slot): each on the first node in
 * the slot's rendezvous order that stays within the fair share of the weight and under the count
 * cap; when none does (a slot heavier than the share, or than what any node has left), on the
 * node with the least weight so far. Equal weights thus split as evenly as whole slots allow (40 among 3 nodes:
 * 14/13/13), and a slot stays on the same node as long as the weights that rank before it do not
 * change.
 */
function placeBusySlots(nodes: readonly string[], slotCount: number, weights: readonly number[], cap: number, owners: string[], count: number[]): void {
  const busy: number[] = [];
  let total = 0;
  for (let slot = 0; slot < slotCount; slot++) {
    const w = weights[slot] ?? 0;
    if (w > 0) {
      busy.push(slot);
      total += w;
    }
  }
  if (busy.length === 0) return;
  busy.sort((a, b) => (weights[b] ?? 0) - (weights[a] ?? 0) || a - b);
  // The fair share, leaving out the slots heavier than it (each has a node to itself): with one
  // slot of half the work among 3 nodes, the other two share the other half evenly.
  let fair = total / nodes.length;
  for (let i = 0, left = total, free = nodes.length; i < busy.length && free > 1; i++) {
    const w = weights[busy[i]!] ?? 0;
    if (w <= left / free) break;
    left -= w;
    free -= 1;
    fair = left / free;
  }
  const load = new Array<number>(nodes.length).fill(0);
  for (const slot of busy) {
    const w = weights[slot] ?? 0;
    const order = nodes.map((id, node) => ({ node, h: weight(id, slot) })).sort((a, b) => b.h - a.h || a.node - b.node);
    const open = order.filter(({ node }) => (count[node] ?? 0) < cap);
    // A relative tolerance, so sums of equal fractions that land a hair above the share still fit.
    const fits = open.find(({ node }) => (load[node] ?? 0) + w <= fair * (1 + 1e-9));
    const lightest = open.reduce((best, c) => ((load[c.node] ?? 0) < (load[best.node] ?? 0) ? c : best), open[0]!);
    const chosen = (fits ?? lightest).node;
    owners[slot] = nodes[chosen] ?? '';
    load[chosen] = (load[chosen] ?? 0) + w;
    count[chosen] = (count[chosen] ?? 0) + 1;
  }
}

/** The slots `self` should own, given the live nodes (`self` is counted even if missing from the list) and the slots' weights. */
export function slotsFor(self: string, nodeIds: readonly string[], slotCount: number, weights: readonly number[] = []): number[] {
  const nodes = nodeIds.includes(self) ? nodeIds : [...nodeIds, self];
  const owners = assignSlots(nodes, slotCount, weights);
  const out: number[] = [];
  owners.forEach((owner, slot) => {
    if (owner === self) out.push(slot);
  });
  return out;
}
