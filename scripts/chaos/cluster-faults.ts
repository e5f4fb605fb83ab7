/**
 * Cases of a cluster: two `herald start` processes on one PostgreSQL database (the bench's
 * embedded server), steady traffic published through one of them:
 *
 *   changes    24 endpoints changed through node A while traffic flows (six moved to a new URL,
 *              six given a new secret, six disabled, six given new eventTypes): every request
 *              more than 1 s after its endpoint's change shows it, whichever node sent it
 *   partition  node A reaches the database through a TCP proxy that then holds every byte
 *              without closing (a partition, not a refusal) for 15 s: A keeps answering
 *              /healthz, says 503 on /readyz, B covers A's slots, nothing at-least-once is lost,
 *              nothing at-most-once is sent twice, and A is ready again soon after the heal
 *   skew       node A's clock 30 s ahead, then 30 s behind (libfaketime): the slots stay shared,
 *              A reports its offset, nothing at-least-once is lost, nothing at-most-once twice
 *
 * Both skip, saying why, when no PostgreSQL server can be started here.
 */
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Webhook } from 'standardwebhooks';
import type { ConfigOverrides } from '../../lib/config/config.ts';
import { PostgresUnavailableError, startPostgresServer } from '../../test-kit/postgres-server.ts';
import { Cleanup } from '../bench/peers/peer-kit.ts';
import { fmtMs, heraldNode, recordingServer, sleep, type CaseContext, type ChaosCase, type HeraldNode, type Received, type RecordingServer } from './harness.ts';

const LOOPBACK = ['127.0.0.0/8'];
/** One key for the whole cluster: every node opens the secrets the others sealed. */
const SECRET_KEY = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';
const ENGINE = { leaseMs: 3_000, renewIntervalMs: 300, sweepIntervalMs: 200 } as const;
const CHANGE_DEADLINE_MS = 1_000;

/** A database of its own on the bench's server, or `undefined` (the case is then skipped). */
async function database(ctx: CaseContext, name: string): Promise<string | undefined> {
  const cleanup = new Cleanup();
  ctx.defer(() => cleanup.run());
  try {
    const server = await startPostgresServer({ cleanup });
    return await server.createDatabase(name);
  } catch (error) {
    if (error instanceof PostgresUnavailableError) {
      ctx.skipped = `no PostgreSQL server could be started: ${error.message}`;
      return undefined;
    }
    throw error;
  }
}

/**
 * Two nodes of one cluster on `store` (A's own store setting may differ: a proxy; A may run with
 * more environment), both ready and sharing the slots.
 */
async function twoNodes(ctx: CaseContext, storeA: string, storeB: string, envA: Readonly<Record<string, string>> = {}): Promise<[HeraldNode, HeraldNode]> {
  const config = (store: string): ConfigOverrides => ({ store, engine: ENGINE, secrets: { key: SECRET_KEY } });
  const a = await heraldNode({ dbPath: '', dir: ctx.tempDir(), allowNetworks: LOOPBACK, config: config(storeA), label: 'a', env: envA });
  const b = await heraldNode({ dbPath: '', dir: ctx.tempDir(), allowNetworks: LOOPBACK, config: config(storeB), label: 'b' });
  await a.start(ctx);
  await b.start(ctx);
  const deadline = performance.now() + 30_000;
  while (performance.now() < deadline) {
    ctx.alive();
    const [sa, sb] = [await a.status(), await b.status()];
    if (sa !== undefined && sb !== undefined && sa.slotsOwned > 0 && sb.slotsOwned > 0 && sa.slotsOwned + sb.slotsOwned === sa.slotCount) break;
    await sleep(100);
  }
  return [a, b];
}

/** Publishes a pair of events every `everyMs` through `node` until stopped; the stop answers the ids accepted. */
function steadyTraffic(ctx: CaseContext, node: HeraldNode, tenantId: string, everyMs: number): () => Promise<string[]> {
  let going = true;
  let n = 0;
  const ids: string[] = [];
  const loop = (async () => {
    while (going && !ctx.signal.aborted) {
      n += 1;
      const accepted = await node
        .publish([
          { tenantId, type: 'order.paid', payload: { type: 'order.paid', n } },
          { tenantId, type: 'invoice.paid', payload: { type: 'invoice.paid', n } },
        ])
        .catch(() => []);
      ids.push(...accepted);
      await sleep(everyMs);
    }
  })();
  return async () => {
    going = false;
    await loop;
    return ids;
  };
}

/** A request's endpoint path and event: one (event, endpoint) pair. */
const pairOf = (r: Received): string => `${r.path} ${String(r.headers['webhook-id'])}`;

/**
 * Waits (at most `timeoutMs`) until every published event has reached each of the `endpoints`
 * at-least-once endpoints (`/least/0` …); answers how many (event, endpoint) pairs are missing.
 */
async function missingAtLeastOnce(ctx: CaseContext, sink: RecordingServer, published: readonly string[], endpoints: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    ctx.alive();
    const got = new Set(sink.received.map(pairOf));
    let missing = 0;
    for (let e = 0; e < endpoints; e++) for (const id of published) if (!got.has(`/least/${e} ${id}`)) missing += 1;
    if (missing === 0 || performance.now() >= deadline) return missing;
    await sleep(250);
  }
}

/** The requests to the at-most-once endpoints (`/most/…`), and how many of them repeat an (event, endpoint) pair. */
function atMostOnceSentTwice(sink: RecordingServer): { sent: number; twice: number } {
  const sent = sink.received.filter((r) => r.path.startsWith('/most/'));
  return { sent: sent.length, twice: sent.length - new Set(sent.map(pairOf)).size };
}

type Change = 'url' | 'secret' | 'disable' | 'eventTypes';
const CHANGES: readonly Change[] = ['url', 'secret', 'disable', 'eventTypes'];

const changesCase: ChaosCase = {
  name: 'changes',
  checks: 'two nodes on PostgreSQL, traffic flowing: a URL move, a secret rotation, a disable and an eventTypes change through node A show on every request sent more than 1 s after them, from either node',
  limitMs: 120_000,
  async run(ctx) {
    const store = await database(ctx, 'chaos_changes');
    if (store === undefined) return;
    const sink = await recordingServer(ctx);
    const [a, b] = await twoNodes(ctx, store, store);
    const endpoints: Array<{ id: string; change: Change; path: string; secret?: string }> = [];
    for (let e = 0; e < 24; e++) {
      const created = (await a.createEndpoint({ tenantId: 'acme', url: `${sink.url}/old/${e}`, eventTypes: ['order.*'] })) as { id: string };
      endpoints.push({ id: created.id, change: CHANGES[e % CHANGES.length]!, path: `/old/${e}` });
    }
    const stop = steadyTraffic(ctx, b, 'acme', 50);
    while (new Set(sink.received.map((r) => r.path)).size < endpoints.length) await ctx.sleep(50);

    const changedAt = new Map<string, number>();
    for (const [index, endpoint] of endpoints.entries()) {
      let answer;
      if (endpoint.change === 'url') answer = await a.api('PATCH', `/v1/endpoints/${endpoint.id}`, { url: `${sink.url}/new/${index}` });
      if (endpoint.change === 'secret') answer = await a.api('POST', `/v1/endpoints/${endpoint.id}/rotate-secret`);
      if (endpoint.change === 'disable') answer = await a.api('POST', `/v1/endpoints/${endpoint.id}/disable`);
      if (endpoint.change === 'eventTypes') answer = await a.api('PATCH', `/v1/endpoints/${endpoint.id}`, { eventTypes: ['invoice.*'] });
      if (answer?.status !== 200) throw new Error(`the ${endpoint.change} change answered ${answer?.status}: ${answer?.text.slice(0, 200)}`);
      if (endpoint.change === 'secret') endpoint.secret = (answer.json as { secret: string }).secret;
      changedAt.set(endpoint.path, Date.now());
    }
    await ctx.sleep(3 * CHANGE_DEADLINE_MS);
    const published = await stop();

    const byPath = new Map(endpoints.map((e) => [e.path, e]));
    const sinceChange = (r: Received): number => r.at - (changedAt.get(r.path) ?? changedAt.get(r.path.replace('/new/', '/old/')) ?? Infinity);
    const stale = (r: Received): boolean => {
      const endpoint = byPath.get(r.path);
      if (endpoint === undefined) return false;
      if (endpoint.change === 'url' || endpoint.change === 'disable') return true;
      if (endpoint.change === 'eventTypes') return (JSON.parse(r.body) as { type: string }).type === 'order.paid';
      try {
        new Webhook(endpoint.secret!).verify(r.body, r.headers as Record<string, string>);
        return false;
      } catch {
        return true;
      }
    };
    const lateness = sink.received.filter((r) => sinceChange(r) >= 0 && stale(r)).map(sinceChange);
    const after = sink.received.filter((r) => sinceChange(r) > CHANGE_DEADLINE_MS);
    ctx.figure('events published', published.length);
    ctx.figure('requests', sink.received.length);
    ctx.figure('last stale request after its change', fmtMs(Math.max(0, ...lateness)));
    ctx.figure('requests more than 1 s after their change', after.length);
    ctx.check('traffic went on after the deadline, at the new URLs too', after.some((r) => r.path.startsWith('/new/')), `${after.length} requests`);
    ctx.check(
      'no request more than 1 s after its endpoint\'s change shows the old version (URL, secret, enablement, eventTypes)',
      after.filter(stale).length === 0,
      `${after.filter(stale).length} stale; the latest stale one ${fmtMs(Math.max(0, ...lateness))} after its change`,
    );
  },
};

/** A TCP proxy to `port` that can hold every byte, both ways, without closing a connection. */
interface HoldingProxy {
  readonly port: number;
  hold(): void;
  heal(): void;
  close(): Promise<void>;
}

async function holdingProxy(targetPort: number): Promise<HoldingProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let held = false;
  const flow = ([client, server]: [Socket, Socket]): void => {
    if (held) {
      client.pause();
      server.pause();
    } else {
      client.resume();
      server.resume();
    }
  };
  const proxy: Server = createServer((client) => {
    const server = connect(targetPort, '127.0.0.1');
    const pair: [Socket, Socket] = [client, server];
    pairs.add(pair);
    client.on('data', (chunk: Buffer) => server.write(chunk));
    server.on('data', (chunk: Buffer) => client.write(chunk));
    const end = (): void => {
      pairs.delete(pair);
      client.destroy();
      server.destroy();
    };
    client.on('close', end).on('error', end);
    server.on('close', end).on('error', end);
    flow(pair);
  });
  proxy.listen(0, '127.0.0.1');
  await once(proxy, 'listening');
  const { port } = proxy.address() as { port: number };
  return {
    port,
    hold() {
      held = true;
      for (const pair of pairs) flow(pair);
    },
    heal() {
      held = false;
      for (const pair of pairs) flow(pair);
    },
    async close() {
      for (const [client, server] of pairs) {
        client.destroy();
        server.destroy();
      }
      await new Promise<void>((resolve) => proxy.close(() => resolve()));
    },
  };
}

const partitionCase: ChaosCase = {
  name: 'partition',
  checks: 'node A cut off from PostgreSQL by a proxy that holds bytes (15 s): /healthz answers, /readyz 503, B covers its slots, nothing at-least-once lost, nothing at-most-once sent twice, A ready again after the heal',
  limitMs: 150_000,
  async run(ctx) {
    const store = await database(ctx, 'chaos_partition');
    if (store === undefined) return;
    const url = new URL(store);
    const proxy = await holdingProxy(Number(url.port));
    ctx.defer(() => proxy.close());
    const viaProxy = new URL(store);
    viaProxy.port = String(proxy.port);
    const sink = await recordingServer(ctx);
    const [a, b] = await twoNodes(ctx, viaProxy.toString(), store);
    for (let e = 0; e < 20; e++) {
      await b.createEndpoint({ tenantId: 'acme', url: `${sink.url}/least/${e}`, retry: { schedule: ['PT0.5S', 'PT1S', 'PT2S', 'PT4S'] } });
    }
    for (let e = 0; e < 4; e++) await b.createEndpoint({ tenantId: 'acme', url: `${sink.url}/most/${e}`, mode: 'at-most-once' });
    const stop = steadyTraffic(ctx, b, 'acme', 50);
    await ctx.sleep(2_000);
    const before = await a.status();

    proxy.hold();
    const heldAt = performance.now();
    ctx.progress(`A (${before?.slotsOwned} slots) cut off from the database`);
    let unreadyMs: number | undefined;
    let coveredMs: number | undefined;
    let healthzFailures = 0;
    while (performance.now() - heldAt < 15_000) {
      ctx.alive();
      const [healthz, readyz] = await Promise.all([
        a.api('GET', '/healthz', undefined, { timeoutMs: 2_000 }).catch(() => undefined),
        a.api('GET', '/readyz', undefined, { timeoutMs: 2_000 }).catch(() => undefined),
      ]);
      if (healthz?.status !== 200) healthzFailures += 1;
      if (unreadyMs === undefined && readyz?.status === 503) unreadyMs = performance.now() - heldAt;
      const sb = await b.status(2_000);
      if (coveredMs === undefined && sb !== undefined && sb.slotsOwned === sb.slotCount) coveredMs = performance.now() - heldAt;
      await sleep(200);
    }
    proxy.heal();
    const healedAt = performance.now();
    let readyAgainMs: number | undefined;
    while (performance.now() - healedAt < 30_000 && readyAgainMs === undefined) {
      ctx.alive();
      const readyz = await a.api('GET', '/readyz', undefined, { timeoutMs: 2_000 }).catch(() => undefined);
      if (readyz?.status === 200) readyAgainMs = performance.now() - healedAt;
      else await sleep(100);
    }
    await ctx.sleep(2_000);
    const published = await stop();

    // Every event published reaches every at-least-once endpoint (they take every type).
    const settleStart = performance.now();
    const missing = await missingAtLeastOnce(ctx, sink, published, 20, 60_000);
    const settledMs = performance.now() - settleStart;
    const letters = await b.api('GET', '/v1/dead-letters?limit=1000');
    const unsent = ((letters.json as { data?: Array<{ reason: string }> } | undefined)?.data ?? []).filter((l) => l.reason.includes('TAKEN_OVER')).length;
    const mostOnce = atMostOnceSentTwice(sink);

    ctx.figure('events published', published.length);
    ctx.figure('A /readyz 503 after', fmtMs(unreadyMs));
    ctx.figure('B held every slot after', fmtMs(coveredMs));
    ctx.figure('A ready again after the heal', fmtMs(readyAgainMs));
    ctx.figure('at-least-once settled after traffic', fmtMs(settledMs));
    ctx.figure('at-most-once taken over and dead-lettered unsent', unsent);
    ctx.check('A answered /healthz throughout', healthzFailures === 0, `${healthzFailures} failures`);
    ctx.check('A said 503 on /readyz within 5 s', unreadyMs !== undefined && unreadyMs <= 5_000, fmtMs(unreadyMs));
    ctx.check(`B covered A's slots within ${(ENGINE.leaseMs + 2 * ENGINE.renewIntervalMs + 5_000) / 1000} s`, coveredMs !== undefined && coveredMs <= ENGINE.leaseMs + 2 * ENGINE.renewIntervalMs + 5_000, fmtMs(coveredMs));
    ctx.check('every event reached every at-least-once endpoint', missing === 0, `${missing} (event, endpoint) pairs missing`);
    ctx.check('no at-most-once delivery was sent twice', mostOnce.twice === 0, `${mostOnce.twice} sent twice of ${mostOnce.sent}`);
    ctx.check('A was ready again within 10 s of the heal', readyAgainMs !== undefined && readyAgainMs <= 10_000, fmtMs(readyAgainMs));
  },
};

const FAKETIME_LIBRARY = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1';

const skewCase: ChaosCase = {
  name: 'skew',
  checks: "node A's clock 30 s ahead, then 30 s behind (libfaketime), beside node B on PostgreSQL: slots shared, A's offset reported, every event at every at-least-once endpoint, no at-most-once sent twice",
  limitMs: 150_000,
  async run(ctx) {
    if (!existsSync(FAKETIME_LIBRARY)) {
      ctx.skipped = `${FAKETIME_LIBRARY} is missing: apt-get install -y libfaketime`;
      return;
    }
    const store = await database(ctx, 'chaos_skew');
    if (store === undefined) return;
    const sink = await recordingServer(ctx);
    for (const skew of ['+30s', '-30s'] as const) {
      const env = { LD_PRELOAD: FAKETIME_LIBRARY, FAKETIME: skew, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
      const [a, b] = await twoNodes(ctx, store, store, env);
      if (skew === '+30s') {
        for (let e = 0; e < 10; e++) await b.createEndpoint({ tenantId: 'acme', url: `${sink.url}/least/${e}`, retry: { schedule: ['PT0.5S', 'PT1S', 'PT2S', 'PT4S'] } });
        for (let e = 0; e < 2; e++) await b.createEndpoint({ tenantId: 'acme', url: `${sink.url}/most/${e}`, mode: 'at-most-once' });
      }
      const stop = steadyTraffic(ctx, b, 'acme', 50);
      // Ten heartbeats of the two nodes side by side: the shares must hold, not only be reached once.
      const splits: string[] = [];
      let offset: number | undefined;
      for (let look = 0; look < 10; look++) {
        await ctx.sleep(ENGINE.renewIntervalMs);
        const [sa, sb] = [await a.status(), await b.status()];
        splits.push(`${sa?.slotsOwned ?? '?'}+${sb?.slotsOwned ?? '?'}`);
        offset = sa?.clockOffsetMs ?? offset;
      }
      const published = await stop();
      const missing = await missingAtLeastOnce(ctx, sink, published, 10, 30_000);
      const shared = splits.every((split) => split.split('+').every((n) => Number(n) > 0));
      const expected = skew === '+30s' ? -30_000 : 30_000;
      ctx.figure(`${skew}: slots A+B at each look`, splits.join(' '));
      ctx.figure(`${skew}: A's offset`, offset);
      ctx.check(`${skew}: both nodes held slots at every look`, shared, splits.join(' '));
      ctx.check(`${skew}: A measured its offset (≈ ${expected} ms, within 2 s)`, offset !== undefined && Math.abs(offset - expected) <= 2_000, String(offset));
      ctx.check(`${skew}: every event reached every at-least-once endpoint`, missing === 0, `${missing} (event, endpoint) pairs missing of ${published.length * 10}`);
      await a.kill('SIGTERM');
      await b.kill('SIGTERM');
    }
    const { sent, twice } = atMostOnceSentTwice(sink);
    ctx.check('no at-most-once delivery was sent twice', twice === 0, `${twice} of ${sent}`);
  },
};

export const CLUSTER_FAULT_CASES: readonly ChaosCase[] = [changesCase, partitionCase, skewCase];
