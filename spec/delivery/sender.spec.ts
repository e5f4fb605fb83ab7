import { expect } from 'chai';
import diagnosticsChannel from 'node:diagnostics_channel';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ManualClock } from '../../lib/clock.ts';
import { ClosedError, ConfigError } from '../../lib/errors.ts';
import type { Outcome } from '../../lib/model.ts';
import { createAddressGuard } from '../../lib/delivery/address-guard.ts';
import { createSender, USER_AGENT } from '../../lib/delivery/sender.ts';
import type { Sender, SenderOptions } from '../../lib/delivery/sender.ts';

const LOCAL_NETWORKS = ['127.0.0.0/8', '::1/128'] as const;
const TIMEOUT_MS = 10_000;

interface Received {
  readonly method: string;
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

/** A real HTTP server on a loopback address that records what reaches it. */
class TestServer {
  readonly requests: Received[] = [];
  connections = 0;
  readonly #server: http.Server;
  readonly #host: string;
  #waiters: Array<(received: Received) => void> = [];

  private constructor(host: string, handler: Handler) {
    this.#host = host;
    this.#server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        const received = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
        this.requests.push(received);
        handler(req, res, received.body);
        const waiters = this.#waiters;
        this.#waiters = [];
        for (const resolve of waiters) resolve(received);
      });
    });
    this.#server.on('connection', () => {
      this.connections++;
    });
  }

  static async start(handler: Handler, host = '127.0.0.1'): Promise<TestServer> {
    const server = new TestServer(host, handler);
    await new Promise<void>((resolve, reject) => {
      server.#server.once('error', reject).listen(0, host, () => resolve());
    });
    return server;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  url(path = '/hook', host = this.#host.includes(':') ? `[${this.#host}]` : this.#host): string {
    return `http://${host}:${this.port}${path}`;
  }

  /** Resolves when the next request has been fully received (before the handler's response is seen by the client). */
  nextRequest(): Promise<Received> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    // The listening handle is released by libuv one turn after 'close'.
    await nextTurn();
  }
}

/** A port that was just listening and no longer is: connecting to it is refused. */
async function closedPort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function post(sender: Sender, url: string, extra: { headers?: Record<string, string>; body?: string; timeoutMs?: number } = {}) {
  return sender.send({ url, headers: extra.headers ?? {}, body: extra.body ?? '{"ok":true}', timeoutMs: extra.timeoutMs ?? TIMEOUT_MS });
}

function responseOf(outcome: Outcome): Extract<Outcome, { kind: 'response' }> {
  expect(outcome.kind).to.equal('response');
  return outcome as Extract<Outcome, { kind: 'response' }>;
}

describe('createSender', () => {
  let clock: ManualClock;
  const senders: Sender[] = [];
  const servers: TestServer[] = [];

  async function serve(handler: Handler, host?: string): Promise<TestServer> {
    const server = await TestServer.start(handler, host);
    servers.push(server);
    return server;
  }

  function open(options: Partial<SenderOptions> = {}): Sender {
    const sender = createSender({ clock, allowNetworks: LOCAL_NETWORKS, ...options });
    senders.push(sender);
    return sender;
  }

  beforeEach(() => {
    clock = new ManualClock();
  });

  afterEach(async () => {
    await Promise.all(senders.splice(0).map((sender) => sender.close()));
    await Promise.all(servers.splice(0).map((server) => server.close()));
  });

  context('when the endpoint answers 2xx', () => {
    it('records the status and captures the body', async () => {
      const server = await serve((_req, res) => res.end('{"received":true}'));
      const { outcome, durationMs } = await post(open(), server.url());
      expect(outcome).to.deep.equal({ kind: 'response', status: 200, location: null, retryAfter: null, body: '{"received":true}' });
      expect(durationMs).to.equal(0);
      expect(clock.pendingTimerCount, 'the timeout timer is cancelled').to.equal(0);
    });

    it('truncates a large body at responseBodyMaxBytes', async () => {
      const server = await serve((_req, res) => res.end('x'.repeat(100 * 1024)));
      const { outcome } = await post(open(), server.url());
      expect(responseOf(outcome).body).to.equal('x'.repeat(4_096));
    });

    it('keeps to a smaller limit without splitting a character', async () => {
      const server = await serve((_req, res) => res.end('héllo'));
      const { outcome } = await post(open({ responseBodyMaxBytes: 2 }), server.url());
      expect(responseOf(outcome).body).to.equal('h');
    });

    it('measures the duration on the injected clock', async () => {
      let respond: (() => void) | undefined;
      const server = await serve((_req, res) => {
        respond = () => res.end();
      });
      const received = server.nextRequest();
      const sent = post(open(), server.url());
      await received;
      clock.advance(1_234);
      respond?.();
      const { outcome, durationMs } = await sent;
      expect(responseOf(outcome).status).to.equal(200);
      expect(durationMs).to.equal(1_234);
    });
  });

  context('when the endpoint answers with an error status', () => {
    for (const status of [400, 408, 410, 422, 500, 502, 503]) {
      it(`records ${status}`, async () => {
        const server = await serve((_req, res) => {
          res.statusCode = status;
          res.end('nope');
        });
        const { outcome } = await post(open(), server.url());
        expect(outcome).to.deep.equal({ kind: 'response', status, location: null, retryAfter: null, body: 'nope' });
      });
    }

    it('records the Retry-After of a 429, in seconds or as an HTTP date', async () => {
      const values = ['120', 'Thu, 01 Jan 2026 00:10:00 GMT'];
      const server = await serve((_req, res) => {
        res.writeHead(429, { 'retry-after': values[server.requests.length - 1] });
        res.end();
      });
      const sender = open();
      for (const value of values) {
        const { outcome } = await post(sender, server.url());
        expect(responseOf(outcome)).to.include({ status: 429, retryAfter: value });
      }
    });
  });

  context('when the endpoint redirects', () => {
    it('does not follow, and records the Location', async () => {
      const target = await serve((_req, res) => res.end());
      const server = await serve((_req, res) => {
        res.writeHead(301, { location: target.url('/moved') });
        res.end();
      });
      const { outcome } = await post(open(), server.url());
      expect(responseOf(outcome)).to.include({ status: 301, location: target.url('/moved') });
      await nextTurn();
      expect(target.requests).to.have.length(0);
      expect(target.connections).to.equal(0);
    });
  });

  context('when the endpoint does not answer in time', () => {
    it('times out on the injected clock', async () => {
      const server = await serve(() => {
        // Holds the response until the connection is closed.
      });
      const received = server.nextRequest();
      const sent = post(open(), server.url(), { timeoutMs: 5_000 });
      await received;
      clock.advance(4_999);
      clock.advance(1);
      const { outcome, durationMs } = await sent;
      expect(outcome).to.deep.equal({ kind: 'timeout', timeoutMs: 5_000 });
      expect(durationMs).to.equal(5_000);
    });

    it('still reports a timeout when a 200 arrives after it', async () => {
      let respond: (() => void) | undefined;
      const server = await serve((_req, res) => {
        respond = () => res.end('late');
      });
      const received = server.nextRequest();
      const sent = post(open(), server.url(), { timeoutMs: 5_000 });
      await received;
      clock.advance(5_000);
      respond?.();
      expect((await sent).outcome).to.deep.equal({ kind: 'timeout', timeoutMs: 5_000 });
    });
  });

  context('when the connection fails', () => {
    it('reports a refused connection as ECONNREFUSED', async () => {
      const port = await closedPort();
      const { outcome } = await post(open(), `http://127.0.0.1:${port}/hook`);
      expect(outcome).to.include({ kind: 'network', code: 'ECONNREFUSED' });
    });

    it('reports a connection the server drops as a network error', async () => {
      const server = await serve((req) => req.socket.destroy());
      const { outcome } = await post(open(), server.url());
      expect(outcome.kind).to.equal('network');
      if (outcome.kind !== 'network') return;
      expect(outcome.code).to.be.oneOf(['ECONNRESET', 'UND_ERR_SOCKET', 'EPIPE']);
      expect(outcome.message).to.be.a('string').and.not.equal('');
    });

    it('reports a malformed URL as ERR_INVALID_URL instead of throwing', async () => {
      const sender = open();
      expect((await post(sender, 'not a url')).outcome).to.include({ kind: 'network', code: 'ERR_INVALID_URL' });
      expect((await post(sender, 'ftp://127.0.0.1/hook')).outcome).to.include({ kind: 'network', code: 'ERR_INVALID_URL' });
    });
  });

  context('when requests follow each other', () => {
    it('reuses one keep-alive connection', async () => {
      const server = await serve((_req, res) => res.end('ok'));
      const sender = open();
      await post(sender, server.url());
      // undici marks the connection idle a moment after the body ends; one turn of the event loop, no timers.
      await nextTurn();
      await post(sender, server.url());
      expect(server.requests).to.have.length(2);
      expect(server.connections).to.equal(1);
    });

    it('drains a moderately large remainder to keep the connection', async () => {
      const server = await serve((_req, res) => res.end('y'.repeat(20 * 1024)));
      const sender = open();
      await post(sender, server.url());
      await nextTurn();
      await post(sender, server.url());
      expect(server.connections).to.equal(1);
    });
  });

  it('sends the body and headers it is given, as JSON from Herald', async () => {
    const server = await serve((_req, res) => res.end());
    const body = '{"type":"invoice.paid","data":{"id":"in_1"}}';
    await post(open(), server.url('/hooks/in?x=1'), { body, headers: { 'webhook-id': 'evt_1', 'Webhook-Timestamp': '1767225600' } });
    const [received] = server.requests;
    expect(received).to.include({ method: 'POST', url: '/hooks/in?x=1', body });
    expect(received?.headers).to.include({
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'webhook-id': 'evt_1',
      'webhook-timestamp': '1767225600',
    });
  });

  context('without allowNetworks (the SSRF guard closed)', () => {
    const sockets: unknown[] = [];
    const onSocket = (message: unknown): void => {
      sockets.push(message);
    };

    beforeEach(() => {
      sockets.length = 0;
      diagnosticsChannel.subscribe('net.client.socket', onSocket);
    });

    afterEach(() => {
      diagnosticsChannel.unsubscribe('net.client.socket', onSocket);
    });

    it('refuses loopback addresses and names that resolve to them; nothing reaches the server', async () => {
      const v4 = await serve((_req, res) => res.end());
      const v6 = await serve((_req, res) => res.end(), '::1');
      const sender = open({ allowNetworks: [] });
      const urls = [v4.url(), v4.url('/hook', 'localhost'), v6.url(), v4.url('/hook', '[::ffff:127.0.0.1]')];
      for (const url of urls) {
        const { outcome } = await post(sender, url);
        expect(outcome.kind, url).to.equal('blocked');
      }
      await nextTurn();
      expect(v4.connections + v6.connections).to.equal(0);
      expect(v4.requests.length + v6.requests.length).to.equal(0);
    });

    it('refuses metadata and private IP literals before opening any socket', async () => {
      const sender = open({ allowNetworks: [] });
      for (const address of ['169.254.169.254', '10.0.0.1']) {
        // Never send off this machine: were the guard to let the address pass, stop before the request.
        expect(createAddressGuard([]).isAllowed(address), address).to.equal(false);
        const { outcome } = await post(sender, `http://${address}/latest/meta-data/`);
        expect(outcome).to.include({ kind: 'blocked', address });
        if (outcome.kind === 'blocked') expect(outcome.message).to.contain('allowNetworks');
      }
      expect(sockets, 'no socket was created').to.have.length(0);
    });

    it('reaches the same local server once allowNetworks opens loopback', async () => {
      const server = await serve((_req, res) => res.end('hello'));
      const sender = open({ allowNetworks: LOCAL_NETWORKS });
      for (const url of [server.url(), server.url('/hook', 'localhost')]) {
        const { outcome } = await post(sender, url);
        expect(responseOf(outcome).body, url).to.equal('hello');
      }
    });
  });

  context('when misconfigured or closed', () => {
    it('names a bad option', () => {
      expect(() => createSender({ clock, responseBodyMaxBytes: -1 })).to.throw(ConfigError, /responseBodyMaxBytes/);
      expect(() => createSender({ clock, connectionsPerOrigin: 0 })).to.throw(ConfigError, /connectionsPerOrigin/);
      expect(() => createSender({ clock, allowNetworks: ['127.0.0.1/33'] })).to.throw(ConfigError, /allowNetworks/);
    });

    it('refuses to send after close()', async () => {
      const sender = open();
      await sender.close();
      let error: unknown;
      try {
        await post(sender, 'http://127.0.0.1:1/hook');
      } catch (caught) {
        error = caught;
      }
      expect(error).to.be.instanceOf(ClosedError);
    });
  });
});
