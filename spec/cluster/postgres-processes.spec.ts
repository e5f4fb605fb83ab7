/**
 * Herald on PostgreSQL with real processes and a real server: a cluster that
 * loses a node to SIGKILL, and a node whose database goes away (stopped, then
 * killed) under load. Times are reported, not asserted: they depend on this
 * machine's load.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { publish as publishPg } from '../../lib/producer/postgres-publish.ts';
import type { PostgresStore } from '../../lib/store/postgres/postgres-store.ts';
import { StatusServer } from '../../lib/api/status-server.ts';
import { createTestDatabase, startDedicatedServer, type DedicatedServer } from '../../test-kit/postgres-server.ts';
import { LOOPBACK, nextEvent, type TestServer } from '../support/harness.ts';
import { allSeen, createEndpoints, deliverThroughAKill, recordingSink } from '../support/kill-one-node.ts';
import { startNodeProcess, type NodeProcess } from '../support/node-process.ts';

const SLOTS = 256;

function covered(nodes: readonly NodeProcess[]): boolean {
  const all = nodes.flatMap((n) => n.slots);
  return all.length === SLOTS && new Set(all).size === SLOTS;
}

describe('Cluster (real processes on one PostgreSQL server)', function () {
  this.timeout(120_000);
  const nodes: NodeProcess[] = [];
  let dir = '';
  let sink: TestServer | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-pg-cluster-'));
  });

  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.stop('SIGKILL')));
    await sink?.close();
    sink = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  context('when one of three nodes is killed with SIGKILL in the middle of 5 000 events to 50 endpoints', () => {
    it('delivers every event; only deliveries in flight at the kill are sent twice; the others cover its slots', async () => {
      const overrides: ConfigOverrides = {
        store: await createTestDatabase(),
        dataDir: dir,
        allowNetworks: [...LOOPBACK],
        logLevel: 'silent',
        engine: { leaseMs: 3_000, renewIntervalMs: 300, sweepIntervalMs: 200 },
      };
      const recorded = await recordingSink();
      sink = recorded.sink;
      await createEndpoints(overrides, sink);
      for (let i = 0; i < 3; i++) nodes.push(await startNodeProcess(overrides));
      await nodes[0]?.until(() => covered(nodes));

      let coveredAt = 0;
      const outcome = await deliverThroughAKill(overrides, nodes, recorded, async () => {
        await nodes[0]?.until(() => covered(nodes));
        coveredAt = Date.now();
      });
      console.log(`      (slots covered again ${coveredAt - outcome.killedAt} ms after the kill, lease 3000 ms, heartbeat 300 ms; ` +
        `${outcome.duplicates} of 5000 sent twice: ${outcome.inFlightAtKill} in flight at the kill)`);
    });
  });

  context('when the database is stopped, then killed, under load', () => {
    let server: DedicatedServer | undefined;
    let herald: Herald | undefined;
    let status: StatusServer | undefined;

    afterEach(async () => {
      await status?.close();
      await herald?.close().catch(() => undefined);
      await server?.close();
      status = undefined;
      herald = undefined;
      server = undefined;
    });

    it('answers /readyz 503 meanwhile, loses nothing accepted, resumes on its return, and listens again', async () => {
      server = await startDedicatedServer();
      const recorded = await recordingSink();
      sink = recorded.sink;
      const { seenAt } = recorded;
      herald = await Herald.open(resolveConfig({
        store: server.url,
        dataDir: dir,
        allowNetworks: [...LOOPBACK],
        logLevel: 'silent',
        engine: { leaseMs: 3_000, renewIntervalMs: 300, sweepIntervalMs: 200 },
      }));
      await herald.start();
      status = new StatusServer(herald, { host: '127.0.0.1', port: 0, adminToken: 'spec-admin-token-0123456789' });
      const statusUrl = await status.listen();
      const readyz = async (): Promise<number> => (await fetch(`${statusUrl}/readyz`)).status;
      const untilReadyz = async (code: number): Promise<void> => {
        // The verdict changes when the store's calls fail or succeed again: asked until it does.
        while ((await readyz()) !== code) await new Promise((resolve) => setTimeout(resolve, 100));
      };
      for (let e = 0; e < 10; e++) await herald.createEndpoint({ tenantId: `t${e}`, url: `${sink.url}/e${e}` });
      await (herald.store as PostgresStore).whenWatching();
      expect(await readyz()).to.equal(200);

      const ids: string[] = [];
      for (const outage of ['stop', 'kill'] as const) {
        const events = Array.from({ length: 1_000 }, (_, i) => ({ tenantId: `t${i % 10}`, type: 'a.b', payload: { outage, n: i } }));
        ids.push(...(await herald.publish(events)).map((e) => e.id));
        await sink.requests(sink.received.length + 200);

        const restarted = nextEvent(herald.events, 'feedRestart');
        const downAt = Date.now();
        if (outage === 'stop') await server.stop();
        else await server.kill();
        await untilReadyz(503);
        const refused = await herald.publish({ tenantId: 't0', type: 'a.b', payload: {} }).catch((e: unknown) => e);
        expect((refused as { code?: string }).code, 'a publish while the database is away is refused, not accepted').to.equal('HERALD_STORE');
        await restarted;

        await server.start();
        const upAt = Date.now();
        await untilReadyz(200);
        await allSeen(sink, seenAt, ids);
        const resumedMs = Date.now() - upAt;
        await (herald.store as PostgresStore).whenWatching();

        // The listener is back: a producer's commit wakes the engine.
        const pool = new pg.Pool({ connectionString: server.url, max: 1 });
        try {
          const [late] = await publishPg(pool, { tenantId: 't1', type: 'a.b', payload: { after: outage } });
          ids.push(late!.id);
          await allSeen(sink, seenAt, ids);
        } finally {
          await pool.end();
        }
        console.log(`      (${outage}: down ${upAt - downAt} ms; every accepted event delivered ${resumedMs} ms after the server returned)`);
      }
      // Seen by the sink is not yet settled: wait for the last settles to be written.
      for (;;) {
        const settled = nextEvent(herald.events, 'attempt');
        if ((await herald.store.countDeliveries()).delivered === ids.length) break;
        await settled;
      }
      const counts = await herald.store.countDeliveries();
      expect(counts.delivered).to.equal(ids.length);
      expect(counts.pending + counts.in_flight + counts.dead).to.equal(0);
      expect((herald.store as PostgresStore).workSignalRestarts).to.be.at.least(2);
    });
  });
});
