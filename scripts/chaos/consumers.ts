/**
 * Consumers that misbehave, each a server of its own on 127.0.0.1: one that
 * never answers, one that resets the connection, one that answers garbage,
 * one that answers a 50 MB body, one that answers 200 after the timeout, a
 * 301 to another local port, a 429 with Retry-After and a 410. Each outcome
 * must be recorded as such in GET /v1/deliveries/:id/attempts, while five
 * healthy endpoints on the sink process keep receiving a steady stream.
 */
import { createServer as createHttpServer, type Server } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { machineNowMs } from '../bench/machine-clock.ts';
import {
  finalDelivery,
  fmtMs,
  heraldNode,
  percentile,
  recordingServer,
  sleep,
  startSinkProcess,
  type AttemptView,
  type CaseContext,
  type ChaosCase,
} from './harness.ts';

const TIMEOUT_MS = 1_000;
const BIG_BYTES = 50 * 1024 * 1024;
/** Healthy endpoints' publish → arrival p99 bound: an isolation check, loose enough for 2 loaded cores. */
const HEALTHY_P99_MS = 1_000;

/** Listens on 127.0.0.1 (a free port) and closes at the end of the case, dropping its connections. */
async function listenLocal(ctx: CaseContext, server: Server | NetServer): Promise<number> {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  ctx.defer(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return (server.address() as AddressInfo).port;
}

interface Misbehaviour {
  readonly name: string;
  readonly port: number;
  /** Endpoint fields beyond url and tenant. */
  readonly endpoint: Record<string, unknown>;
  /** Judges the final delivery and its attempts: [pass, detail]. */
  judge(status: string, attempts: readonly AttemptView[]): [boolean, string];
  readonly expect: string;
}

const kinds = (attempts: readonly AttemptView[]): string =>
  attempts.map((a) => (a.outcome.kind === 'response' ? `${a.outcome.status}` : a.outcome.kind === 'network' ? `network ${a.outcome.code}` : a.outcome.kind)).join(', ');

async function misbehaviours(ctx: CaseContext): Promise<{ list: Misbehaviour[]; redirectTarget: { received: unknown[]; connections: number }; lateSeen: string[] }> {
  // Never answers.
  const slow = createHttpServer(() => undefined);
  // Resets the connection as soon as the request arrives.
  const reset = createNetServer((socket) => socket.once('data', () => socket.resetAndDestroy()));
  // Answers something that is not HTTP.
  const garbage = createNetServer((socket) =>
    socket.once('data', () => socket.end('SSH-2.0-OpenSSH_9.6\r\n\u0000\u0001 this is not http \u00ff\r\n\r\n')),
  );
  // A 50 MB body, streamed with backpressure; stops when the client goes.
  const big = createHttpServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(BIG_BYTES) });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    const pump = (): void => {
      while (sent < BIG_BYTES && !res.destroyed) {
        sent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      if (!res.destroyed) res.end();
    };
    pump();
  });
  // 200, but after the timeout.
  const lateSeen: string[] = [];
  const late = createHttpServer((req, res) => {
    lateSeen.push(String(req.headers['webhook-id']));
    req.resume();
    setTimeout(() => {
      if (!res.destroyed) res.writeHead(200).end('too late');
    }, TIMEOUT_MS + 500);
  });
  // 301 to another local port, which must never be asked.
  const target = await recordingServer(ctx);
  const redirect = createHttpServer((req, res) => {
    req.resume();
    res.writeHead(301, { location: `${target.url}/moved` }).end();
  });
  // 429 with Retry-After: 1 the first time, then 200.
  let throttled = 0;
  const throttle = createHttpServer((req, res) => {
    req.resume();
    if (throttled++ === 0) res.writeHead(429, { 'retry-after': '1' }).end('slow down');
    else res.writeHead(200).end('ok');
  });
  const gone = createHttpServer((req, res) => {
    req.resume();
    res.writeHead(410).end('gone');
  });
  const ports = await Promise.all([slow, reset, garbage, big, late, redirect, throttle, gone].map((s) => listenLocal(ctx, s)));
  const [slowP, resetP, garbageP, bigP, lateP, redirectP, throttleP, goneP] = ports as [number, number, number, number, number, number, number, number];
  const retry = (schedule: string[]) => ({ retry: { schedule }, timeoutMs: TIMEOUT_MS });
  const list: Misbehaviour[] = [
    {
      name: 'never answers',
      port: slowP,
      endpoint: retry(['PT0.3S']),
      expect: 'timeout on every attempt, then dead',
      judge: (status, a) => [status === 'dead' && a.length === 2 && a.every((x) => x.outcome.kind === 'timeout'), `${status}: ${kinds(a)}`],
    },
    {
      name: 'resets the connection',
      port: resetP,
      endpoint: retry(['PT0.3S']),
      expect: 'network ECONNRESET (retried), then dead',
      judge: (status, a) => [status === 'dead' && a.length === 2 && a.every((x) => x.outcome.kind === 'network' && /RESET|SOCKET/i.test(x.outcome.code ?? '')), `${status}: ${kinds(a)}`],
    },
    {
      name: 'answers non-HTTP garbage',
      port: garbageP,
      endpoint: retry(['PT0.3S']),
      expect: 'network error (parser), then dead',
      judge: (status, a) => [status === 'dead' && a.length === 2 && a.every((x) => x.outcome.kind === 'network'), `${status}: ${kinds(a)}; ${a[0]?.error ?? ''}`],
    },
    {
      name: 'answers a 50 MB body',
      port: bigP,
      endpoint: retry(['PT0.3S']),
      expect: 'delivered (200), at most a few KiB of the body kept',
      judge: (status, a) => {
        const kept = Buffer.byteLength(a[0]?.outcome.body ?? '');
        return [status === 'delivered' && a.length === 1 && a[0]?.outcome.status === 200 && kept <= 8 * 1024, `${status}: ${kinds(a)}, ${kept} bytes kept, ${a[0]?.durationMs} ms`];
      },
    },
    {
      name: 'answers 200 after the timeout',
      port: lateP,
      endpoint: retry(['PT0.3S', 'PT0.3S']),
      expect: 'timeout each time (the late 200 does not count), same webhook-id each time, dead',
      judge: (status, a) => [status === 'dead' && a.length === 3 && a.every((x) => x.outcome.kind === 'timeout'), `${status}: ${kinds(a)}`],
    },
    {
      name: '301 to another local port',
      port: redirectP,
      endpoint: retry(['PT0.3S']),
      expect: 'response 301 with its Location recorded, not followed, dead after 1 attempt',
      judge: (status, a) => [
        status === 'dead' && a.length === 1 && a[0]?.outcome.status === 301 && (a[0]?.outcome.location ?? '').includes(`:${target.port}/moved`),
        `${status}: ${kinds(a)}, location ${a[0]?.outcome.location ?? 'not recorded'}`,
      ],
    },
    {
      name: '429 with Retry-After: 1',
      port: throttleP,
      endpoint: retry(['PT0.1S', 'PT0.1S']),
      expect: '429 with retryAfter recorded, next attempt ≥ 1 s later (the floor), then delivered',
      judge: (status, a) => {
        const gap = a.length >= 2 ? a[1]!.startedAt - a[0]!.startedAt : NaN;
        return [status === 'delivered' && a[0]?.outcome.status === 429 && a[0]?.outcome.retryAfter === '1' && gap >= 950, `${status}: ${kinds(a)}, retryAfter ${a[0]?.outcome.retryAfter}, next after ${fmtMs(gap)}`];
      },
    },
    {
      name: '410 Gone',
      port: goneP,
      endpoint: retry(['PT0.3S']),
      expect: 'response 410, not retried, dead after 1 attempt',
      judge: (status, a) => [status === 'dead' && a.length === 1 && a[0]?.outcome.status === 410, `${status}: ${kinds(a)}`],
    },
  ];
  return { list, redirectTarget: target, lateSeen };
}

const consumersCase: ChaosCase = {
  name: 'consumers',
  checks: 'never answers, reset, garbage, 50 MB body, 200 after timeout, 301, 429 + Retry-After, 410: each outcome recorded in the attempts; 5 healthy endpoints keep delivering meanwhile',
  limitMs: 90_000,
  async run(ctx) {
    const dir = ctx.tempDir();
    const healthySink = await startSinkProcess({ record: 'ids' });
    ctx.defer(() => healthySink.close());
    const { list, redirectTarget, lateSeen } = await misbehaviours(ctx);
    const node = await heraldNode({ dbPath: join(dir, 'herald.db'), dir, allowNetworks: ['127.0.0.0/8'] });
    await node.start(ctx);
    const bad: Array<{ m: Misbehaviour; endpointId: string }> = [];
    for (const m of list) bad.push({ m, endpointId: (await node.createEndpoint({ tenantId: 'bad', url: `http://127.0.0.1:${m.port}/hook`, ...m.endpoint })).id });
    for (let e = 0; e < 5; e++) await node.createEndpoint({ tenantId: 'good', url: `${healthySink.url}/good${e}` });

    // The healthy stream: 10 events every 200 ms for 6 s, fanned out to 5 endpoints.
    const publishedAt = new Map<string, number>();
    const stream = (async () => {
      for (let i = 0; i < 30 && !ctx.signal.aborted; i++) {
        const ids = await node.publish(Array.from({ length: 10 }, (_, n) => ({ tenantId: 'good', type: 'chaos.good', payload: { n: i * 10 + n } })));
        const at = machineNowMs();
        for (const id of ids) publishedAt.set(id, at);
        await sleep(200);
      }
    })();
    await sleep(300);
    for (const { m, endpointId } of bad) await node.publish([{ tenantId: 'bad', type: 'chaos.bad', payload: { behaviour: m.name }, endpointId }]);
    await stream;

    for (const { m, endpointId } of bad) {
      const final = await finalDelivery(ctx, node, endpointId, 20_000);
      const [pass, detail] = m.judge(final.status, final.attempts);
      ctx.check(`${m.name}: ${m.expect}`, pass, detail);
    }
    ctx.check('the redirect target was never asked', redirectTarget.connections === 0, `${redirectTarget.connections} connections`);
    ctx.check('the late consumer saw the same webhook-id on every attempt', lateSeen.length >= 2 && new Set(lateSeen).size === 1, `${lateSeen.length} requests, ${new Set(lateSeen).size} ids`);

    // Healthy endpoints: every event, each to 5 endpoints, with its lag from the publish's answer.
    const arrivals: Array<{ id: string; at: number }> = [];
    const deadline = performance.now() + 15_000;
    while (performance.now() < deadline) {
      const take = await healthySink.take();
      take.ids.forEach((id, i) => arrivals.push({ id, at: take.times[i]! }));
      if (arrivals.length >= publishedAt.size * 5) break;
      await sleep(200);
    }
    const firstArrival = new Map<string, number>();
    const perEvent = new Map<string, number>();
    for (const { id, at } of arrivals) {
      perEvent.set(id, (perEvent.get(id) ?? 0) + 1);
      if (!firstArrival.has(id) || at < firstArrival.get(id)!) firstArrival.set(id, at);
    }
    const lags = arrivals.map(({ id, at }) => Math.max(0, at - (publishedAt.get(id) ?? at)));
    const complete = [...publishedAt.keys()].filter((id) => (perEvent.get(id) ?? 0) >= 5).length;
    ctx.figure('healthy events', publishedAt.size);
    ctx.figure('healthy lag p99', fmtMs(percentile(lags, 99)));
    ctx.figure('healthy lag max', fmtMs(Math.max(...lags)));
    ctx.check('healthy endpoints got every event (× 5 endpoints) meanwhile', complete === publishedAt.size, `${complete} of ${publishedAt.size} events at all 5`);
    ctx.check(`healthy endpoints kept their pace (lag p99 ≤ ${HEALTHY_P99_MS} ms)`, percentile(lags, 99) <= HEALTHY_P99_MS, `p99 ${fmtMs(percentile(lags, 99))}, max ${fmtMs(Math.max(...lags))}`);
    ctx.check('the process stayed alive', node.running);
  },
};

export const CONSUMER_CASES: readonly ChaosCase[] = [consumersCase];
