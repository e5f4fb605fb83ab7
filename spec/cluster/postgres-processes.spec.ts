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
import { StatusServer } from '../../lib/status/status-server.ts';
import { LOOPBACK, nextEvent, startServer, type TestServer } from '../support/harness.ts';
import { startNodeProcess, type NodeProcess } from '../support/node-process.ts';
import { createTestDatabase, startDedicatedServer, type DedicatedServer } from '../support/postgres-server.ts';

const SLOTS = 256;

function covered(nodes: readonly NodeProcess[]): boolean {
  const all = nodes.flatMap((n) => n.slots);
  return all.length === SLOTS && new Set(all).size === SLOTS;
}

/** A sink that answers 200 and records when each webhook-id arrived. */
async function recordingSink(): Promise<{ sink: TestServer; seenAt: Map<string, number[]> }> {
  const seenAt = new Map<string, number[]>();
  const sink = await startServer((request) => {
    const id = String(request.headers['webhook-id']);
    const times = seenAt.get(id) ?? [];
    times.push(Date.now());
    seenAt.set(id, times);
    return { status: 200 };
  });
  return { sink, seenAt };
}

async function allSeen(sink: TestServer, seenAt: ReadonlyMap<string, unknown>, ids: readonly string[]): Promise<void> {
  for (let seen = sink.received.length; !ids.every((id) => seenAt.has(id)); seen++) await sink.requests(seen + 1);
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
      const { seenAt } = recorded;
      const setup = await Herald.open(resolveConfig(overrides));
      for (let e = 0; e < 50; e++) await setup.createEndpoint({ tenantId: `t${e}`, url: `${sink.url}/e${e}` });
      for (let i = 0; i < 3; i++) nodes.push(await startNodeProcess(overrides));
      await nodes[0]?.until(() => covered(nodes));

      const ids: string[] = [];
      for (let batch = 0; batch < 10; batch++) {
        const events = Array.from({ length: 500 }, (_, i) => ({ tenantId: `t${(batch * 500 + i) % 50}`, type: 'a.b', payload: { n: batch * 500 + i } }));
        ids.push(...(await setup.publish(events)).map((e) => e.id));
      }
      await setup.close();

      await sink.requests(1_500);
      const victim = nodes.shift() as NodeProcess;
      await victim.stop('SIGKILL');
      const killedAt = Date.now();
      await nodes[0]?.until(() => covered(nodes));
      const coveredAfterMs = Date.now() - killedAt;

      await allSeen(sink, seenAt, ids);
      const survivors = [...nodes];
      await Promise.all(nodes.map((n) => n.stop('SIGTERM')));
      nodes.length = 0;

      const check = await Herald.open(resolveConfig(overrides));
      try {
        expect((await check.store.countDeliveries()).delivered).to.equal(5_000);
      } finally {
        await check.close();
      }
      const fenced = new Set(survivors.flatMap((n) => [...n.fenced]));
      const duplicates = [...seenAt].filter(([, times]) => times.length > 1);
      for (const [id, times] of duplicates) {
        expect((times[0] ?? 0) <= killedAt || fenced.has(id), `${id} sent twice for no reason`).to.equal(true);
      }
      const byKill = duplicates.filter(([, times]) => (times[0] ?? 0) <= killedAt).length;
      console.log(`      (slots covered again ${coveredAfterMs} ms after the kill, lease 3000 ms, heartbeat 300 ms; ` +
        `${duplicates.length} of 5000 sent twice: ${byKill} in flight at the kill)`);
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
