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

/** The whole assignment: element `slot` is the id of the node that should own it ('' when there are no nodes). */
export function assignSlots(nodeIds: readonly string[], slotCount: number): string[] {
  const owners = new Array<string>(slotCount).fill('');
  const nodes = [...new Set(nodeIds)].sort();
  if (nodes.length === 0) return owners;
  const cap = Math.ceil(slotCount / nodes.length);
  const pairs: Array<{ readonly w: number; readonly node: number; readonly slot: number }> = [];
  for (let slot = 0; slot < slotCount; slot++) {
    nodes.forEach((id, node) => pairs.push({ w: weight(id, slot), node, slot }));
  }
  // Heaviest first; ties (practically never) by node order then slot, so every node agrees.
  pairs.sort((a, b) => b.w - a.w || a.node - b.node || a.slot - b.slot);
  const load = new Array<number>(nodes.length).fill(0);
  for (const { node, slot } of pairs) {
    if (owners[slot] !== '' || (load[node] ?? 0) >= cap) continue;
    owners[slot] = nodes[node] ?? '';
    load[node] = (load[node] ?? 0) + 1;
  }
  return owners;
}

/** The slots `self` should own, given the live nodes (`self` is counted even if missing from the list). */
export function slotsFor(self: string, nodeIds: readonly string[], slotCount: number): number[] {
  const nodes = nodeIds.includes(self) ? nodeIds : [...nodeIds, self];
  const owners = assignSlots(nodes, slotCount);
  const out: number[] = [];
  owners.forEach((owner, slot) => {
    if (owner === self) out.push(slot);
  });
  return out;
}
