import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { systemClock } from '../../lib/clock.ts';
import { slotsFor } from '../../lib/cluster/rendezvous.ts';
import type { ConfigOverrides } from '../../lib/config/config.ts';
import type { SlotLease } from '../../lib/store/port.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { pauseOutsideAWrite } from '../../test-kit/pause-outside-write.ts';
import { LOOPBACK } from '../support/harness.ts';
import { banner, get, runHerald, type HeraldProcess } from '../support/herald-cli.ts';
import { startNodeProcess, type NodeProcess } from '../support/node-process.ts';

const SLOTS = 256;
/** Far longer than any test here runs: a slot changes hands in time only if a restart reaps its dead predecessor. */
const LONG_LEASE = { leaseMs: 60_000, renewIntervalMs: 200, sweepIntervalMs: 200 } as const;

/** The parts of `GET /v1/status` read here. */
interface Status {
  readonly node: string;
  readonly slotsOwned: number;
  readonly slotCount: number;
  readonly cluster: { readonly liveNodes: string[]; readonly leases: Array<{ slot: number; epoch: number }> };
}

describe('Restarting a node on the same data (real processes)', function () {
  this.timeout(30_000);
  let dir = '';
  const clis: HeraldProcess[] = [];
  const nodes: NodeProcess[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-restart-'));
  });

  afterEach(async () => {
    for (const proc of clis.splice(0)) {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
      await proc.exited;
    }
    await Promise.all(nodes.splice(0).map((n) => n.stop('SIGKILL')));
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every lease in the data, read by a store of this process (which records nothing). */
  async function leasesInStore(): Promise<SlotLease[]> {
    const store = new SqliteStore({ path: join(dir, 'herald.db'), clock: systemClock });
    try {
      await store.init({ slotCount: SLOTS });
      return await store.listLeases();
    } finally {
      await store.close();
    }
  }

  context('when the only node is killed with SIGKILL and started again', () => {
    it('is ready at once with every slot, taken at the next epoch, though the dead one\'s leases have a minute to run', async () => {
      const config = join(dir, 'long-lease.json');
      writeFileSync(config, JSON.stringify({ engine: LONG_LEASE }));
      const args = ['start', '--port', '0', '--data-dir', dir, '--store', `sqlite:${join(dir, 'herald.db')}`, '--config', config, '--log-level', 'silent'];
      const first = runHerald(args);
      clis.push(first);
      const { url } = await banner(first);
      const token = readFileSync(join(dir, 'admin-token'), 'utf8').trim();
      const before = JSON.parse((await get(`${url}/v1/status`, token)).body) as Status;
      expect(before.slotsOwned).to.equal(before.slotCount);
      expect(readdirSync(join(dir, 'nodes'))).to.deep.equal([`${before.node}.json`]);
      first.child.kill('SIGKILL');
      expect((await first.exited).signal).to.equal('SIGKILL');

      const second = runHerald(args);
      clis.push(second);
      const restarted = await banner(second);
      // The banner is printed after the first lease round: ready now, not after a lease period.
      const ready = await get(`${restarted.url}/readyz`);
      expect(ready.status, ready.body).to.equal(200);
      const after = JSON.parse((await get(`${restarted.url}/v1/status`, token)).body) as Status;
      expect(after.node).to.not.equal(before.node);
      expect(after.slotsOwned).to.equal(after.slotCount);
      expect(after.cluster.liveNodes, 'the dead node is no longer a member').to.deep.equal([after.node]);
      const epochs = (status: Status): number[][] => status.cluster.leases.map((lease) => [lease.slot, lease.epoch]);
      expect(epochs(after)).to.deep.equal(before.cluster.leases.map((lease) => [lease.slot, lease.epoch + 1]));
      expect(readdirSync(join(dir, 'nodes'))).to.deep.equal([`${after.node}.json`]);

      second.child.kill('SIGTERM');
      expect(await second.exited).to.deep.equal({ code: 0, signal: null });
      expect(readdirSync(join(dir, 'nodes')), 'a graceful stop removes its record').to.deep.equal([]);
    });
  });

  context('when of two nodes on one file one is paused (SIGSTOP), the other killed, and a third started', () => {
    it('takes only the killed node\'s slots at once and leaves the paused node its record and leases', async () => {
      const overrides: ConfigOverrides = {
        store: `sqlite:${join(dir, 'herald.db')}`,
        dataDir: dir,
        allowNetworks: [...LOOPBACK],
        logLevel: 'silent',
        engine: LONG_LEASE,
      };
      const paused = await startNodeProcess(overrides);
      const killed = await startNodeProcess(overrides);
      nodes.push(paused, killed);
      await paused.until(() => paused.slots.length + killed.slots.length === SLOTS && killed.slots.length > 0 && paused.slots.length > 0);
      await pauseOutsideAWrite(paused.child.pid, join(dir, 'herald.db'));
      // Read once the node is paused: it renews every 200 ms, and a renewal moves `until`, which the
      // comparison with `after` below would take for a lease it lost.
      const before = await leasesInStore();
      const ownerOf = (slot: number | undefined): string => before.find((lease) => lease.slot === slot)?.owner ?? '';
      const pausedId = ownerOf(paused.slots[0]);
      const killedId = ownerOf(killed.slots[0]);
      const killedSlots = before.filter((lease) => lease.owner === killedId).map((lease) => lease.slot);

      await killed.stop('SIGKILL');
      const third = await startNodeProcess(overrides);
      nodes.push(third);
      const after = await leasesInStore();
      const thirdId = after.find((lease) => lease.slot === third.slots[0])?.owner ?? '';

      // Its share over the members it sees (the paused node is still one), as far as the dead node held it.
      const share = slotsFor(thirdId, [pausedId, thirdId], SLOTS).filter((slot) => killedSlots.includes(slot));
      expect(share.length).to.be.greaterThan(0);
      expect(third.slots).to.deep.equal(share);
      const epochBefore = new Map(before.map((lease) => [lease.slot, lease.epoch]));
      for (const lease of after.filter((l) => l.owner === thirdId)) expect(lease.epoch).to.equal((epochBefore.get(lease.slot) ?? 0) + 1);
      expect(after.filter((lease) => lease.owner === pausedId), 'the paused node keeps its leases').to.deep.equal(
        before.filter((lease) => lease.owner === pausedId),
      );
      expect(after.some((lease) => lease.owner === killedId)).to.equal(false);
      expect(existsSync(join(dir, 'nodes', `${pausedId}.json`)), 'a paused process is alive: its record stays').to.equal(true);
      expect(existsSync(join(dir, 'nodes', `${killedId}.json`))).to.equal(false);
      paused.child.kill('SIGCONT');
    });
  });
});
