/**
 * The sender against peers that answer, but not in HTTP: real `net` servers
 * on 127.0.0.1 that write bytes no HTTP/1.1 parser accepts.
 */
import { expect } from 'chai';
import net from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ManualClock } from '../../lib/clock.ts';
import type { Outcome } from '../../lib/model.ts';
import { classify, countsAgainstBreaker } from '../../lib/policy/classify.ts';
import { createSender } from '../../lib/delivery/sender.ts';
import type { Sender } from '../../lib/delivery/sender.ts';

const TIMEOUT_MS = 10_000;

/** When the server writes its bytes: as soon as a client connects (like an SSH banner), or once the request arrives. */
type When = 'on-connect' | 'on-request';

/** A TCP server on 127.0.0.1 that answers every connection with `bytes`, then keeps or closes it. */
class RawServer {
  readonly #server: net.Server;
  readonly #sockets = new Set<net.Socket>();

  private constructor(bytes: string, when: When, close: boolean) {
    this.#server = net.createServer((socket) => {
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
      socket.on('error', () => {
        // The client cuts the connection once it sees the garbage.
      });
      const answer = (): void => {
        if (close) socket.end(bytes);
        else socket.write(bytes);
      };
      if (when === 'on-connect') answer();
      else socket.once('data', answer);
    });
  }

  static async start(bytes: string, when: When, close: boolean): Promise<RawServer> {
    const server = new RawServer(bytes, when, close);
    await new Promise<void>((resolve, reject) => {
      server.#server.once('error', reject).listen(0, '127.0.0.1', () => resolve());
    });
    return server;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.#server.address() as net.AddressInfo).port}/hook`;
  }

  async close(): Promise<void> {
    for (const socket of this.#sockets) socket.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
    await nextTurn();
  }
}

describe('createSender, when the peer does not speak HTTP', () => {
  let clock: ManualClock;
  let sender: Sender;
  const servers: RawServer[] = [];

  beforeEach(() => {
    clock = new ManualClock();
    sender = createSender({ clock, allowNetworks: ['127.0.0.0/8'] });
  });

  afterEach(async () => {
    await sender.close();
    await Promise.all(servers.splice(0).map((server) => server.close()));
  });

  async function send(bytes: string, when: When, close: boolean): Promise<Outcome> {
    const server = await RawServer.start(bytes, when, close);
    servers.push(server);
    const { outcome } = await sender.send({ url: server.url, headers: {}, body: '{}', timeoutMs: TIMEOUT_MS });
    return outcome;
  }

  const cases: Array<[string, string, When, boolean, string]> = [
    ['garbage and a blank line, then a close', 'garbage\r\n\r\n', 'on-request', true, 'garbage\\r\\n\\r\\n'],
    ['an SSH banner on connect, holding the connection', 'SSH-2.0-x\r\n', 'on-connect', false, 'SSH-2.0-x'],
    ['an SSH banner after the request, holding the connection', 'SSH-2.0-x\r\n', 'on-request', false, 'SSH-2.0-x'],
    ['an SMTP greeting', '220 mail.example ESMTP\r\n', 'on-request', false, '220 mail.example'],
  ];
  for (const [what, bytes, when, close, quoted] of cases) {
    context(`when it answers ${what}`, () => {
      it(`records a network outcome with code PROTOCOL, quoting what came back`, async () => {
        const outcome = await send(bytes, when, close);
        expect(outcome).to.include({ kind: 'network', code: 'PROTOCOL' });
        if (outcome.kind !== 'network') return;
        expect(outcome.message).to.contain('does not match the HTTP/1.1 protocol').and.contain(quoted);
      });
    });
  }

  context('when it answers a malformed HTTP response', () => {
    for (const [what, bytes] of [
      ['a four-digit status', 'HTTP/1.1 2000 OK\r\n\r\n'],
      ['a Content-Length that is not a number', 'HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\n'],
      ['a header line without a colon', 'HTTP/1.1 200 OK\r\nno colon here\r\n\r\n'],
    ] as const) {
      it(`records ${what} as PROTOCOL`, async () => {
        expect(await send(bytes, 'on-request', true)).to.include({ kind: 'network', code: 'PROTOCOL' });
      });
    }
  });

  context('when the outcome is classified', () => {
    it('is retried like other network failures, and counts against the breaker', async () => {
      const outcome = await send('garbage\r\n\r\n', 'on-request', true);
      const verdict = classify(outcome, clock.now());
      expect(verdict).to.include({ kind: 'retry', retryAfterMs: undefined, pauseMailbox: false });
      if (verdict.kind === 'retry') expect(verdict.reason).to.match(/^PROTOCOL: /);
      expect(countsAgainstBreaker(outcome)).to.equal(true);
    });
  });

  context('when the peer does speak HTTP', () => {
    it('still records its response', async () => {
      const outcome = await send('HTTP/1.1 204 No Content\r\n\r\n', 'on-request', true);
      expect(outcome).to.deep.equal({ kind: 'response', status: 204, location: null, retryAfter: null, body: '' });
    });
  });
});
