/**
 * Test helpers: a Herald on a temporary SQLite file driven by a ManualClock,
 * and real HTTP servers on 127.0.0.1 that answer as each test scripts them.
 */
import { once, type EventEmitter } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock, seededRandom } from '../../lib/clock.ts';
import { resolveConfig, type ConfigOverrides } from '../../lib/config/config.ts';
import type { AttemptEvent, EngineEvents } from '../../lib/engine/engine-events.ts';
import { Herald } from '../../lib/herald.ts';

export const LOOPBACK = ['127.0.0.0/8', '::1/128'] as const;

export interface TestHerald {
  readonly herald: Herald;
  readonly clock: ManualClock;
  readonly dir: string;
  readonly dbPath: string;
  /** Attempt events seen so far, in order. */
  readonly attempts: AttemptEvent[];
  close(): Promise<void>;
}

/**
 * A started Herald on a fresh data folder; loopback allowed unless `config.allowNetworks` says otherwise.
 * `options.dir`: an existing folder instead (a restart on the same data); `close()` then leaves it.
 */
export async function startHerald(overrides: ConfigOverrides = {}, options: { start?: boolean; dir?: string } = {}): Promise<TestHerald> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), 'herald-spec-'));
  const dbPath = join(dir, 'herald.db');
  // Start at the real time: consumers (standardwebhooks) check the signed timestamp against it.
  const clock = new ManualClock(Date.now());
  const config = resolveConfig({
    store: `sqlite:${dbPath}`,
    dataDir: dir,
    allowNetworks: [...LOOPBACK],
    logLevel: 'silent',
    ...overrides,
  });
  const herald = await Herald.open(config, { clock, random: seededRandom(7) });
  const attempts: AttemptEvent[] = [];
  herald.events.on('attempt', (e) => attempts.push(e));
  herald.events.on('failure', (e) => {
    // Surface engine failures in the test output instead of losing them.
    console.error(`engine failure in ${e.where}:`, e.error);
  });
  if (options.start !== false) await herald.start();
  return {
    herald,
    clock,
    dir,
    dbPath,
    attempts,
    async close() {
      await herald.close();
      if (options.dir === undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves with the first event of `name` whose arguments pass `test`. */
export function nextEvent<K extends keyof EngineEvents>(
  emitter: EventEmitter<EngineEvents>,
  name: K,
  test: (...args: EngineEvents[K]) => boolean = () => true,
): Promise<EngineEvents[K][0]> {
  return new Promise((resolve) => {
    const listener = (...args: EngineEvents[K]): void => {
      if (!test(...args)) return;
      (emitter as EventEmitter).off(name, listener as never);
      resolve(args[0]);
    };
    (emitter as EventEmitter).on(name, listener as never);
  });
}

/** Resolves once `count` attempts matching `test` have been seen (counting those already seen). */
export async function attemptsSeen(t: TestHerald, count: number, test: (e: AttemptEvent) => boolean = () => true): Promise<AttemptEvent[]> {
  while (t.attempts.filter(test).length < count) await nextEvent(t.herald.events, 'attempt');
  return t.attempts.filter(test);
}

export interface ReceivedRequest {
  readonly path: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

/** How a test server answers one request: a status (and headers), or `hold` to keep it waiting. */
export type Answer = { status: number; headers?: Record<string, string>; body?: string } | 'hold' | 'destroy';

export interface TestServer {
  readonly url: string;
  readonly port: number;
  readonly received: ReceivedRequest[];
  /** Responses waiting for `release()`. */
  readonly held: Array<{ request: ReceivedRequest; respond: (status: number) => void }>;
  /** Resolves when `count` requests have arrived in all. */
  requests(count: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

/** A real HTTP server on 127.0.0.1 answering as `answer` decides for each request. */
export async function startServer(answer: (request: ReceivedRequest, index: number) => Answer): Promise<TestServer> {
  const received: ReceivedRequest[] = [];
  const held: TestServer['held'] = [];
  const waiters: Array<{ count: number; resolve: () => void }> = [];
  const server: Server = createServer((req, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const request = { path: req.url ?? '/', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      const index = received.length;
      received.push(request);
      const reply = answer(request, index);
      if (reply === 'hold') {
        held.push({
          request,
          respond: (status) => {
            if (!res.destroyed) res.writeHead(status).end();
          },
        });
      } else if (reply === 'destroy') {
        req.socket.destroy();
      } else {
        res.writeHead(reply.status, reply.headers ?? {}).end(reply.body ?? '');
      }
      for (const w of waiters.splice(0)) {
        if (received.length >= w.count) w.resolve();
        else waiters.push(w);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    received,
    held,
    requests(count) {
      if (received.length >= count) return Promise.resolve(received.slice());
      return new Promise((resolve) => waiters.push({ count, resolve: () => resolve(received.slice()) }));
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      // The listening handle is freed on the next turn of the event loop.
      await new Promise((resolve) => setImmediate(resolve));
    },
  };
}

/** A port that was just free: connecting to it is refused. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
