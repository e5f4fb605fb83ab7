/**
 * Endpoint changes reach every node of a real cluster: two node processes on one PostgreSQL
 * database share the slots and deliver steady traffic to 24 endpoints; an operator moves half of
 * them to a new URL and rotates the other half's secrets through a third Herald (the node the
 * operator talks to). Every request that starts after the change's deadline must use the new URL,
 * or verify with the new secret (an independent implementation, `standardwebhooks`, checks).
 * The time the last old-style request arrived is reported.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import { publish as publishPg } from '../../lib/producer/postgres-publish.ts';
import { LOOPBACK, startServer, type TestServer } from '../support/harness.ts';
import { startNodeProcess, type NodeProcess } from '../support/node-process.ts';
import { createTestDatabase } from '../support/postgres-server.ts';

const SLOTS = 256;
const ENDPOINTS = 24;
/** What the cluster promises: a change reaches every node's actors within this long. */
const DEADLINE_MS = 1_000;

interface Arrival {
  readonly at: number;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

describe('Endpoint changes in a cluster (real processes on one PostgreSQL database)', function () {
  this.timeout(120_000);
  const nodes: NodeProcess[] = [];
  let dir = '';
  let sink: TestServer | undefined;
  let admin: Herald | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-pg-changes-'));
  });

  afterEach(async () => {
    await Promise.all(nodes.splice(0).map((n) => n.stop('SIGKILL')));
    await admin?.close();
    admin = undefined;
    await sink?.close();
    sink = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('every request sent after the deadline uses the new URL or verifies with the new secret, on both nodes', async () => {
    const overrides: ConfigOverrides = {
      store: await createTestDatabase(),
      dataDir: dir,
      allowNetworks: [...LOOPBACK],
      logLevel: 'silent',
      engine: { leaseMs: 3_000, renewIntervalMs: 300, sweepIntervalMs: 200 },
    };
    const arrivals: Arrival[] = [];
    sink = await startServer((request) => {
      arrivals.push({ at: Date.now(), path: request.path, headers: request.headers as Record<string, string>, body: request.body });
      return { status: 200 };
    });
    // The operator's node: it never starts (holds no slot), it only takes admin calls.
    admin = await Herald.open(resolveConfig(overrides));
    const endpoints: Array<{ id: string; secret: string; moves: boolean }> = [];
    for (let e = 0; e < ENDPOINTS; e++) {
      const { endpoint, secret } = await admin.createEndpoint({ tenantId: 'acme', url: `${sink.url}/old/e${e}` });
      endpoints.push({ id: endpoint.id, secret, moves: e % 2 === 0 });
    }
    for (let i = 0; i < 2; i++) nodes.push(await startNodeProcess(overrides));
    await nodes[0]?.until(() => nodes.every((n) => n.slots.length > 0) && nodes.flatMap((n) => n.slots).length === SLOTS);

    const producer = new pg.Client({ connectionString: overrides.store });
    await producer.connect();
    let publishing = true;
    const published = (async () => {
      while (publishing) {
        await publishPg(producer, { tenantId: 'acme', type: 'order.paid', payload: { at: Date.now() } });
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    try {
      // Traffic flows through both nodes before the change.
      while (new Set(arrivals.map((a) => a.path)).size < ENDPOINTS) await sink.requests(arrivals.length + 1);

      const newSecrets = new Map<string, string>();
      for (const endpoint of endpoints) {
        const index = endpoints.indexOf(endpoint);
        if (endpoint.moves) await admin.updateEndpoint(endpoint.id, { url: `${sink.url}/new/e${index}` });
        else newSecrets.set(endpoint.id, (await admin.rotateSecret(endpoint.id)).secret);
      }
      const changedAt = Date.now();
      // Traffic goes on for three deadlines after the change.
      while (arrivals.length === 0 || arrivals.at(-1)!.at < changedAt + 3 * DEADLINE_MS) await sink.requests(arrivals.length + 1);
      publishing = false;
      await published;

      const oldStyle = (arrival: Arrival): boolean => {
        if (arrival.path.startsWith('/old/')) {
          const index = Number(arrival.path.slice('/old/e'.length));
          const endpoint = endpoints[index]!;
          if (endpoint.moves) return true;
          try {
            new Webhook(newSecrets.get(endpoint.id)!).verify(arrival.body, arrival.headers);
            return false;
          } catch {
            return true;
          }
        }
        return false;
      };
      const late = arrivals.filter((a) => a.at >= changedAt && oldStyle(a));
      const lastOld = late.at(-1)?.at ?? changedAt;
      const after = arrivals.filter((a) => a.at > changedAt + DEADLINE_MS);
      console.log(`      (${arrivals.length} requests; the last with the old URL or only the old secret arrived ${lastOld - changedAt} ms ` +
        `after the change; ${after.length} after the ${DEADLINE_MS} ms deadline, ${after.filter(oldStyle).length} of them old)`);
      expect(after.length, 'traffic after the deadline').to.be.greaterThan(20);
      expect(after.filter(oldStyle), 'requests after the deadline with the old URL or only the old secret').to.deep.equal([]);
      const newPaths = new Set(after.filter((a) => a.path.startsWith('/new/')).map((a) => a.path));
      expect(newPaths.size, 'moved endpoints reached at their new URL').to.be.greaterThan(0);
    } finally {
      publishing = false;
      await published;
      await producer.end();
    }
  });
});
