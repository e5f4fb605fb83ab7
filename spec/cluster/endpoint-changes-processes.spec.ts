/**
 * Endpoint changes reach every node of a real cluster, as users run it: two `herald start`
 * processes on one store (PostgreSQL, then one SQLite file) share the slots and deliver steady
 * traffic, published by a producer in this process (its own transactions), to 24 endpoints. An
 * operator then changes them all through node A's admin API: six move to a new URL, six get a new
 * secret, six are disabled, six change their `eventTypes`. Every request that arrives after the
 * promised second must show it, whichever node sent it; an independent implementation
 * (`standardwebhooks`) checks the signatures. The time the last old-style request arrived is
 * reported.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { request } from 'undici';
import { Webhook } from 'standardwebhooks';
import { publish as publishPg } from '../../lib/producer/postgres-publish.ts';
import { publish as publishSqlite } from '../../lib/producer/sqlite-publish.ts';
import type { EventInput } from '../../lib/producer/validate-event.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';
import { startServer, type TestServer } from '../support/harness.ts';
import { banner, runHerald, type HeraldProcess } from '../support/herald-cli.ts';

const SLOTS = 256;
const ENDPOINTS = 24;
/** What the cluster promises: a change reaches every node's actors within this long. */
const DEADLINE_MS = 1_000;
const TOKEN = 'spec-admin-token-0123456789abcdef';
const SECRET_KEY = '00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff';

type Change = 'url' | 'secret' | 'disable' | 'eventTypes';
const CHANGES: readonly Change[] = ['url', 'secret', 'disable', 'eventTypes'];

interface Arrival {
  readonly at: number;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: string;
}

interface Node {
  readonly proc: HeraldProcess;
  readonly url: string;
}

async function call(node: Node, method: string, path: string, body?: unknown): Promise<any> {
  const response = await request(`${node.url}${path}`, {
    method: method as 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.body.text();
  if (response.statusCode >= 300) throw new Error(`${method} ${path}: ${response.statusCode} ${text}`);
  return JSON.parse(text);
}

describe('Endpoint changes in a cluster (two `herald start` processes)', function () {
  this.timeout(120_000);
  const running: HeraldProcess[] = [];
  let dir = '';
  let sink: TestServer | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-changes-'));
  });

  afterEach(async () => {
    for (const proc of running.splice(0)) {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
      await proc.exited;
    }
    await sink?.close();
    sink = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  async function startNode(store: string, dataDir: string): Promise<Node> {
    const config = join(dir, 'herald.json');
    writeFileSync(config, JSON.stringify({ engine: { leaseMs: 3_000, renewIntervalMs: 300, sweepIntervalMs: 200 } }));
    const proc = runHerald(
      ['start', '--port', '0', '--store', store, '--data-dir', dataDir, '--config', config, '--log-level', 'silent', '--allow-networks', '127.0.0.0/8'],
      { HERALD_ADMIN_TOKEN: TOKEN, HERALD_SECRET_KEY: SECRET_KEY },
    );
    running.push(proc);
    return { proc, url: (await banner(proc)).url };
  }

  /** Both nodes hold a share, and together every slot. */
  async function shared(nodes: readonly Node[]): Promise<void> {
    for (let turn = 0; turn < 600; turn++) {
      const owned = await Promise.all(nodes.map(async (n) => (await call(n, 'GET', '/v1/status')).slotsOwned as number));
      if (owned.every((count) => count > 0) && owned.reduce((a, b) => a + b, 0) === SLOTS) return;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error('the nodes never shared the slots');
  }

  async function changesReachEveryNode(store: string, dataDirs: readonly [string, string], publish: (events: readonly EventInput[]) => Promise<void>): Promise<void> {
    const arrivals: Arrival[] = [];
    sink = await startServer((received) => {
      arrivals.push({ at: Date.now(), path: received.path, headers: received.headers as Record<string, string>, body: received.body });
      return { status: 200 };
    });
    const a = await startNode(store, dataDirs[0]);
    const b = await startNode(store, dataDirs[1]);
    const endpoints: Array<{ id: string; secret: string; change: Change; path: string }> = [];
    for (let e = 0; e < ENDPOINTS; e++) {
      const created = await call(a, 'POST', '/v1/endpoints', { tenantId: 'acme', url: `${sink.url}/old/${e}`, eventTypes: ['order.*'] });
      endpoints.push({ id: created.id, secret: created.secret, change: CHANGES[e % CHANGES.length]!, path: `/old/${e}` });
    }
    await shared([a, b]);

    let publishing = true;
    let n = 0;
    const producer = (async () => {
      while (publishing) {
        n += 1;
        await publish([
          { tenantId: 'acme', type: 'order.paid', payload: { type: 'order.paid', n } },
          { tenantId: 'acme', type: 'invoice.paid', payload: { type: 'invoice.paid', n } },
        ]);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    try {
      // Traffic reaches every endpoint, through both nodes, before the change.
      while (new Set(arrivals.map((x) => x.path)).size < ENDPOINTS) await sink.requests(arrivals.length + 1);

      const secrets = new Map<string, string>();
      /** When each endpoint's change was answered (by node A, which applied it before answering). */
      const changedAt = new Map<string, number>();
      for (const [index, endpoint] of endpoints.entries()) {
        if (endpoint.change === 'url') await call(a, 'PATCH', `/v1/endpoints/${endpoint.id}`, { url: `${sink.url}/new/${index}` });
        if (endpoint.change === 'secret') secrets.set(endpoint.path, (await call(a, 'POST', `/v1/endpoints/${endpoint.id}/rotate-secret`)).secret);
        if (endpoint.change === 'disable') await call(a, 'POST', `/v1/endpoints/${endpoint.id}/disable`);
        if (endpoint.change === 'eventTypes') await call(a, 'PATCH', `/v1/endpoints/${endpoint.id}`, { eventTypes: ['invoice.*'] });
        changedAt.set(endpoint.path, Date.now());
      }
      const lastChangeAt = Date.now();
      // Traffic goes on for three deadlines after the last change.
      while (arrivals.length === 0 || arrivals.at(-1)!.at < lastChangeAt + 3 * DEADLINE_MS) await sink.requests(arrivals.length + 1);
      publishing = false;
      await producer;

      const byPath = new Map(endpoints.map((e) => [e.path, e]));
      /** A request that does not show the change made to its endpoint. */
      const old = (arrival: Arrival): boolean => {
        const endpoint = byPath.get(arrival.path);
        if (endpoint === undefined) return false;
        switch (endpoint.change) {
          case 'url':
          case 'disable':
            return true;
          case 'secret':
            try {
              new Webhook(secrets.get(endpoint.path)!).verify(arrival.body, arrival.headers);
              return false;
            } catch {
              return true;
            }
          case 'eventTypes':
            return (JSON.parse(arrival.body) as { type: string }).type === 'order.paid';
        }
      };
      /** How long after its endpoint's change a request arrived (moved endpoints: the change of their old path). */
      const sinceChange = (x: Arrival): number => x.at - (changedAt.get(x.path) ?? changedAt.get(x.path.replace('/new/', '/old/'))!);
      const late = arrivals.filter((x) => sinceChange(x) >= 0 && old(x)).map(sinceChange);
      const after = arrivals.filter((x) => sinceChange(x) > DEADLINE_MS);
      console.log(`      (${arrivals.length} requests; the latest showing no change arrived ${Math.max(0, ...late)} ms after its endpoint's ` +
        `change (${late.length} after a change in all); ${after.length} more than ${DEADLINE_MS} ms after it, ${after.filter(old).length} of them old)`);
      expect(after.filter(old), 'requests after the deadline that do not show their change').to.deep.equal([]);
      // Traffic went on after the deadline to the moved, rotated and re-filtered endpoints.
      expect(after.some((x) => x.path.startsWith('/new/')), 'a moved endpoint at its new URL').to.equal(true);
      expect(after.some((x) => byPath.get(x.path)?.change === 'secret'), 'a rotated endpoint').to.equal(true);
      expect(after.some((x) => byPath.get(x.path)?.change === 'eventTypes'), 're-filtered endpoints get invoices').to.equal(true);
    } finally {
      publishing = false;
      await producer;
    }
  }

  context('on one PostgreSQL database', () => {
    it('every request after a second shows the change, whichever node sent it', async () => {
      const store = await createTestDatabase();
      const client = new pg.Client({ connectionString: store });
      await client.connect();
      try {
        await changesReachEveryNode(store, [join(dir, 'a'), join(dir, 'b')], async (events) => {
          await publishPg(client, events);
        });
      } finally {
        await client.end();
      }
    });
  });

  context('on one SQLite file', () => {
    it('every request after a second shows the change, whichever node sent it', async () => {
      const file = join(dir, 'herald.db');
      let db: Database.Database | undefined;
      try {
        await changesReachEveryNode(`sqlite:${file}`, [dir, dir], async (events) => {
          // The file exists once the first node has started; the producer opens it then.
          db ??= new Database(file);
          db.pragma('busy_timeout = 5000');
          publishSqlite(db, events);
        });
      } finally {
        db?.close();
      }
    });
  });
});
