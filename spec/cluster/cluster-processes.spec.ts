import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { slotOf } from '../../lib/ids.ts';
import { pauseOutsideAWrite } from '../../test-kit/pause-outside-write.ts';
import { LOOPBACK, startServer, type TestServer } from '../support/harness.ts';
import { createEndpoints, deliverThroughAKill, recordingSink } from '../support/kill-one-node.ts';
import { startNodeProcess, type NodeProcess } from '../support/node-process.ts';

const SLOTS = 256;

/** True when the nodes' reported slots cover every slot exactly once and each holds its share ±10 %. */
function balanced(nodes: readonly NodeProcess[]): boolean {
  const all = nodes.flatMap((n) => n.slots);
  const fair = SLOTS / nodes.length;
  return all.length === SLOTS && new Set(all).size === SLOTS && nodes.every((n) => Math.abs(n.slots.length - fair) <= 0.1 * fair);
}

function ownerMap(nodes: readonly NodeProcess[]): Map<number, NodeProcess> {
  return new Map(nodes.flatMap((n) => n.slots.map((slot) => [slot, n] as const)));
}

describe('Cluster (real processes on one SQLite file)', function () {
  this.timeout(60_000);
  const nodes: NodeProcess[] = [];
  let dir = '';
  let sink: TestServer | undefined;
  let overrides: ConfigOverrides;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-cluster-'));
    overrides = {
      store: `sqlite:${join(dir, 'herald.db')}`,
      dataDir: dir,
      allowNetworks: [...LOOPBACK],
      logLevel: 'silent',
      engine: { leaseMs: 1_000, renewIntervalMs: 200, sweepIntervalMs: 200 },
    };
  });

  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.stop('SIGKILL')));
    await sink?.close();
    sink = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  context('when three nodes run, a fourth joins and one leaves', () => {
    it('balances the slots, moves only about a quarter on the join, and takes over a leaver\'s slots at once', async () => {
      for (let i = 0; i < 3; i++) nodes.push(await startNodeProcess(overrides));
      await nodes[0]?.until(() => balanced(nodes));
      const before = ownerMap(nodes);

      nodes.push(await startNodeProcess(overrides));
      await nodes[0]?.until(() => balanced(nodes));
      const after = ownerMap(nodes);
      const moved = [...before].filter(([slot, owner]) => after.get(slot) !== owner).length;
      // Bounded-load rendezvous: the newcomer takes its quarter, and the cap moves a few more among the others.
      expect(moved).to.be.within(0.2 * SLOTS, 0.32 * SLOTS);
      expect(nodes[3]?.slots.length).to.be.within(0.9 * (SLOTS / 4), 1.1 * (SLOTS / 4));

      const leaver = nodes.shift() as NodeProcess;
      const leftAt = Date.now();
      expect(await leaver.stop('SIGTERM')).to.equal(0);
      await nodes[0]?.until(() => balanced(nodes));
      // Reported, not asserted: wall-clock time depends on this machine's load.
      console.log(`      (a graceful leave was covered again ${Date.now() - leftAt} ms after exit, heartbeat 200 ms, lease 1000 ms)`);
    });
  });

  context('when a node is killed with SIGKILL in the middle of 5 000 events to 50 endpoints', () => {
    it('delivers every event at least once; only deliveries in flight at the kill are sent twice', async () => {
      // A longer lease than above: under this load a 1 s lease can lapse on a busy survivor, which is a
      // legitimate takeover (and duplicate) but not the one this test is about.
      overrides = { ...overrides, engine: { leaseMs: 3_000, renewIntervalMs: 300, sweepIntervalMs: 200 } };
      const recorded = await recordingSink();
      sink = recorded.sink;
      await createEndpoints(overrides, sink);
      for (let i = 0; i < 3; i++) nodes.push(await startNodeProcess(overrides));
      await nodes[0]?.until(() => balanced(nodes));

      const outcome = await deliverThroughAKill(overrides, nodes, recorded);
      console.log(`      (${outcome.duplicates} of 5000 events sent twice: ${outcome.inFlightAtKill} in flight at the kill, ${outcome.duplicates - outcome.inFlightAtKill} after a fenced write)`);
    });
  });

  context('when a node is paused (SIGSTOP) past its lease and then resumed (SIGCONT)', () => {
    it('has its late settles refused by epoch, lets go of its slots, never shares a slot with the other node, and loses nothing', async () => {
      let holding = true;
      sink = await startServer(() => (holding ? 'hold' : { status: 200 }));
      const setup = await Herald.open(resolveConfig(overrides));
      const slotOfPath = new Map<string, number>();
      for (let e = 0; e < 40; e++) {
        const { endpoint } = await setup.createEndpoint({ tenantId: `t${e}`, url: `${sink.url}/e${e}` });
        slotOfPath.set(`/e${e}`, slotOf(endpoint.id, SLOTS));
      }
      const a = await startNodeProcess(overrides);
      const b = await startNodeProcess(overrides);
      nodes.push(a, b);
      await a.until(() => balanced(nodes));
      const published = await setup.publish(Array.from({ length: 80 }, (_, n) => ({ tenantId: `t${n % 40}`, type: 'a.b', payload: { n } })));
      await setup.close();
      // Wait until a has a request in flight (held by the sink), so it has a settle to be refused.
      const fromA = (path: string): boolean => a.slots.includes(slotOfPath.get(path) ?? -1);
      for (let seen = 1; !sink.received.some((r) => fromA(r.path)); seen++) await sink.requests(seen);

      await pauseOutsideAWrite(a.child.pid, join(dir, 'herald.db'));
      await b.until(() => b.slots.length === SLOTS); // a's lease expired and b took every slot
      const takenByB = b.epochs;
      holding = false;
      for (const held of sink.held.splice(0)) held.respond(200); // b's settle; a's answers wait in its socket buffers
      const aSlotsBefore = a.slots;
      a.child.kill('SIGCONT');

      await a.until(() => a.fenced.size > 0);
      // a may hold a slot again only by taking it after b's lease on it ended, so at a later epoch than
      // b's. This used to compare a's slots with b's last report, which lags: b reports a slot gone at
      // its next renewal after releasing it, up to a heartbeat later. When a's first report after the
      // resume already had slots (its first round ran after b had released some, which load makes
      // likely, or a had reported none before the pause, so its empty report was no change), a
      // slot b had handed over legitimately was still in b's last line and the test failed.
      const sharedWithB = (): number[] => [...a.epochs].filter(([slot, epoch]) => epoch <= (takenByB.get(slot) ?? 0)).map(([slot]) => slot);
      await a.until(() => a.slots !== aSlotsBefore);
      expect(sharedWithB(), 'a reports no slot at an epoch b held').to.deep.equal([]);
      await a.until(() => balanced(nodes));
      expect(sharedWithB(), 'a reports no slot at an epoch b held').to.deep.equal([]);
      const ids = published.map((event) => event.id);
      await a.until(() => ids.every((id) => a.delivered.has(id) || b.delivered.has(id)));
    });
  });
});
