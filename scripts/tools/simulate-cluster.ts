/**
 * `npx tsx scripts/tools/simulate-cluster.ts [nodes] [endpoints]`: runs the real lease
 * logic (LeaseKeeper over a SQLite store) for many simulated nodes in one
 * process on a ManualClock, and prints what docs/SCALING.md reports: slots
 * moved per join and leave, heartbeats until every slot is owned again after
 * a failure, and how endpoints spread over slots and nodes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lib/clock.ts';
import { LeaseKeeper } from '../../lib/cluster/lease-keeper.ts';
import { assignSlots } from '../../lib/cluster/rendezvous.ts';
import { slotOf } from '../../lib/ids.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';

const NODES = Number(process.argv[2] ?? 50);
const ENDPOINTS = Number(process.argv[3] ?? 100_000);
const SLOTS = 256;
const LEASE_MS = 10_000;
const HEARTBEAT_MS = 2_000;

const dir = mkdtempSync(join(tmpdir(), 'herald-sim-'));
const clock = new ManualClock(Date.UTC(2026, 0, 1));
const store = new SqliteStore({ path: join(dir, 'sim.db'), clock });
await store.init({ slotCount: SLOTS });

const keepers = new Map<string, LeaseKeeper>();
function addNode(id: string): void {
  keepers.set(
    id,
    new LeaseKeeper(
      { owner: id, slotCount: SLOTS, leaseMs: LEASE_MS, renewIntervalMs: HEARTBEAT_MS },
      {
        store,
        clock,
        onChange: () => undefined,
        drain: async () => undefined,
        released: () => undefined,
        onError: (error) => {
          throw error;
        },
      },
    ),
  );
}

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One heartbeat period: every live keeper runs a round; drains (instant here) finish. */
async function heartbeat(): Promise<void> {
  clock.advance(HEARTBEAT_MS);
  for (const keeper of keepers.values()) await keeper.renew();
  for (let i = 0; i < 5; i++) await turn();
}

function owners(): Map<number, string> {
  const out = new Map<number, string>();
  for (const [id, keeper] of keepers) for (const lease of keeper.held) out.set(lease.slot, id);
  return out;
}

/** Heartbeats until every slot is held by the node the assignment gives it; returns how many it took. */
async function converge(limit = 50): Promise<number> {
  const target = assignSlots([...keepers.keys()], SLOTS);
  for (let beats = 1; beats <= limit; beats++) {
    await heartbeat();
    const held = owners();
    if (target.every((owner, slot) => held.get(slot) === owner)) return beats;
  }
  return Number.NaN;
}

const moves: number[] = [];
const joinBeats: number[] = [];
for (let i = 0; i < NODES; i++) {
  const before = assignSlots([...keepers.keys()], SLOTS);
  addNode(`node-${String(i).padStart(3, '0')}`);
  const after = assignSlots([...keepers.keys()], SLOTS);
  if (i > 0) moves.push(after.filter((owner, slot) => owner !== before[slot]).length);
  joinBeats.push(await converge());
}

// A graceful leave: the node releases its slots and removes itself.
const leaver = [...keepers.keys()][7] ?? '';
const beforeLeave = assignSlots([...keepers.keys()], SLOTS);
await keepers.get(leaver)?.close();
keepers.delete(leaver);
const afterLeave = assignSlots([...keepers.keys()], SLOTS);
const leaveMoved = afterLeave.filter((owner, slot) => owner !== beforeLeave[slot]).length;
const leaverOwned = beforeLeave.filter((owner) => owner === leaver).length;
const leaveBeats = await converge();

// A failure: the node stops renewing; its leases expire after LEASE_MS.
const victim = [...keepers.keys()][3] ?? '';
keepers.delete(victim);
const failBeats = await converge();

// Endpoints over slots and nodes.
const perSlot = new Array<number>(SLOTS).fill(0);
for (let e = 0; e < ENDPOINTS; e++) {
  const slot = slotOf(`ep_${e.toString(16).padStart(32, '0')}`, SLOTS);
  perSlot[slot] = (perSlot[slot] ?? 0) + 1;
}
const assignment = assignSlots([...keepers.keys()], SLOTS);
const perNode = new Map<string, number>();
assignment.forEach((owner, slot) => perNode.set(owner, (perNode.get(owner) ?? 0) + (perSlot[slot] ?? 0)));
const nodeLoads = [...perNode.values()];
const mean = (xs: readonly number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

const result = {
  nodes: NODES,
  slots: SLOTS,
  endpoints: ENDPOINTS,
  leaseMs: LEASE_MS,
  heartbeatMs: HEARTBEAT_MS,
  joinMovedSlots: { mean: mean(moves), max: Math.max(...moves), idealMeanForJoins: mean(moves.map((_, i) => SLOTS / (i + 2))) },
  joinHeartbeatsToConverge: { mean: mean(joinBeats.slice(1)), max: Math.max(...joinBeats.slice(1)) },
  leave: { ownedByLeaver: leaverOwned, moved: leaveMoved, heartbeatsToConverge: leaveBeats },
  failure: { heartbeatsToFullOwnership: failBeats, timeMs: failBeats * HEARTBEAT_MS },
  endpointsPerSlot: { min: Math.min(...perSlot), mean: mean(perSlot), max: Math.max(...perSlot) },
  endpointsPerNode: { min: Math.min(...nodeLoads), mean: mean(nodeLoads), max: Math.max(...nodeLoads), maxOverMean: Math.max(...nodeLoads) / mean(nodeLoads) },
};
console.log(JSON.stringify(result, null, 2));
for (const keeper of keepers.values()) await keeper.close();
await store.close();
rmSync(dir, { recursive: true, force: true });
