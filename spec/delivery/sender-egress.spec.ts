import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ManualClock } from '../../lib/clock.ts';
import { ConfigError } from '../../lib/errors.ts';
import type { Outcome } from '../../lib/model.ts';
import { classify, countsAgainstBreaker, countsAgainstHealth, describeOutcome } from '../../lib/policy/classify.ts';
import { failureKind } from '../../lib/policy/failure-kind.ts';
import type { ClientCertificate } from '../../lib/delivery/client-tls.ts';
import { CLIENT_CERT_EXPIRED_CODE, createSender, PROXY_TUNNEL_TIMEOUT_MS } from '../../lib/delivery/sender.ts';
import type { Sender, SenderOptions } from '../../lib/delivery/sender.ts';
import { validateClientTls } from '../../lib/endpoints/client-tls-input.ts';
import { ConnectProxy, TlsSink, tlsFixture } from '../support/egress-parts.ts';

const LOCAL_NETWORKS = ['127.0.0.0/8', '::1/128'] as const;
const TIMEOUT_MS = 10_000;

/** The test client certificate as the sender gets it (opened). */
function clientCertificate(): ClientCertificate {
  const tls = validateClientTls({ cert: tlsFixture('client.pem'), key: tlsFixture('client.key') });
  return { fingerprint: tls.fingerprint, cert: tls.cert, key: tls.key, notAfter: tls.notAfter };
}

interface PlainSink {
  readonly url: string;
  readonly requests: string[];
  /** Connections accepted. */
  readonly connections: () => number;
}

async function plainSink(): Promise<PlainSink & { server: http.Server }> {
  const requests: string[] = [];
  let connections = 0;
  const server = http.createServer((req, res) => {
    requests.push(`${req.headers.host} ${req.url}`);
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, requests, connections: () => connections };
}

async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await nextTurn();
}

function proxyOutcome(outcome: Outcome): Extract<Outcome, { kind: 'proxy' }> {
  expect(outcome.kind, JSON.stringify(outcome)).to.equal('proxy');
  return outcome as Extract<Outcome, { kind: 'proxy' }>;
}

describe('createSender (egress: proxy and client certificates)', () => {
  let clock: ManualClock;
  let proxy: ConnectProxy;
  const senders: Sender[] = [];
  const closers: Array<() => Promise<void>> = [];

  function open(options: Partial<SenderOptions> = {}): Sender {
    const sender = createSender({ clock, allowNetworks: LOCAL_NETWORKS, ca: [tlsFixture('ca.pem')], ...options });
    senders.push(sender);
    return sender;
  }

  async function sink(): Promise<PlainSink> {
    const started = await plainSink();
    closers.push(() => closeServer(started.server));
    return started;
  }

  async function tlsSink(requireClientCert: boolean): Promise<TlsSink> {
    const started = await TlsSink.start({ requireClientCert });
    closers.push(() => started.close());
    return started;
  }

  function post(sender: Sender, url: string, clientTls?: ClientCertificate) {
    return sender.send({ url, headers: {}, body: '{}', timeoutMs: TIMEOUT_MS, ...(clientTls === undefined ? {} : { clientTls }) });
  }

  beforeEach(async () => {
    clock = new ManualClock();
    proxy = await ConnectProxy.start();
  });

  afterEach(async () => {
    await Promise.all(senders.splice(0).map((sender) => sender.close()));
    await Promise.all(closers.splice(0).map((close) => close()));
    await proxy.close();
  });

  context('with a proxy', () => {
    it('sends an http: delivery through a CONNECT tunnel to the resolved address, keeping the Host header', async () => {
      const consumer = await sink();
      const sender = open({ proxy: proxy.url });
      for (let i = 0; i < 3; i++) {
        const { outcome } = await post(sender, consumer.url);
        expect(outcome).to.include({ kind: 'response', status: 200 });
      }
      const { host } = new URL(consumer.url);
      expect(proxy.targets).to.have.length.within(1, 3);
      expect(new Set(proxy.targets)).to.deep.equal(new Set([host]));
      expect(proxy.tunnels, 'every connection is a tunnel').to.equal(consumer.connections());
      expect(consumer.requests).to.deep.equal([`${host} /hook`, `${host} /hook`, `${host} /hook`]);
    });

    it('sends an https: delivery through the tunnel, checking the endpoint certificate against the added CA', async () => {
      const consumer = await tlsSink(false);
      const { outcome } = await post(open({ proxy: proxy.url }), consumer.url());
      expect(outcome).to.include({ kind: 'response', status: 200 });
      expect(proxy.tunnels).to.equal(1);
      expect(consumer.requests).to.have.length(1);
    });

    it('connects to a name by the address it resolved to, not the name', async () => {
      const consumer = await tlsSink(false);
      const { outcome } = await post(open({ proxy: proxy.url, allowNetworks: ['127.0.0.0/8'] }), consumer.url('localhost'));
      expect(outcome).to.include({ kind: 'response', status: 200 });
      expect(proxy.targets[0]).to.match(/^127\.0\.0\.1:\d+$/);
      expect(consumer.requests[0]?.host).to.match(/^localhost:\d+$/);
    });

    it('refuses an endpoint whose name resolves to a blocked address, before asking the proxy (the proxy itself may be local)', async () => {
      const consumer = await tlsSink(false);
      const sender = open({ proxy: proxy.url, allowNetworks: [] });
      for (const url of [consumer.url('localhost'), consumer.url('127.0.0.1')]) {
        const { outcome } = await post(sender, url);
        expect(outcome.kind, JSON.stringify(outcome)).to.equal('blocked');
      }
      expect(proxy.targets).to.deep.equal([]);
      expect(consumer.requests).to.deep.equal([]);
    });

    it('sends Basic proxy credentials from the URL', async () => {
      const consumer = await sink();
      proxy.requireAuthorization = `Basic ${Buffer.from('herald:s3cret:x').toString('base64')}`;
      const { outcome } = await post(open({ proxy: `http://herald:s3cret%3Ax@127.0.0.1:${proxy.port}` }), consumer.url);
      expect(outcome).to.include({ kind: 'response', status: 200 });
      expect(proxy.authorizations).to.deep.equal([proxy.requireAuthorization]);
    });

    for (const status of [407, 502, 503]) {
      it(`turns a ${status} answer to the CONNECT into a proxy outcome, not the endpoint's failure`, async () => {
        const consumer = await sink();
        proxy.mode = { kind: 'refuse', status };
        const { outcome } = await post(open({ proxy: `http://user:hunter2@127.0.0.1:${proxy.port}` }), consumer.url);
        const failed = proxyOutcome(outcome);
        expect(failed.status).to.equal(status);
        expect(describeOutcome(outcome)).to.match(new RegExp(`^proxy: ${status} from proxy http://user:\\*\\*\\*@127\\.0\\.0\\.1:\\d+: `));
        expect(describeOutcome(outcome), 'the password is not shown').not.to.include('hunter2');
        expect(consumer.requests).to.deep.equal([]);
        expect(classify(outcome, clock.now())).to.include({ kind: 'retry' });
        expect(countsAgainstBreaker(outcome)).to.equal(false);
        expect(countsAgainstHealth(outcome)).to.equal(false);
        expect(failureKind(outcome)).to.equal('proxy');
      });
    }

    it('turns a proxy that refuses the connection into a proxy outcome', async () => {
      const consumer = await sink();
      const port = proxy.port;
      await proxy.close();
      proxy = await ConnectProxy.start();
      const { outcome } = await post(open({ proxy: `http://127.0.0.1:${port}` }), consumer.url);
      expect(proxyOutcome(outcome)).to.include({ status: null });
      expect(describeOutcome(outcome)).to.include('ECONNREFUSED');
    });

    it('turns a request timing out while the proxy has not answered the CONNECT into a proxy outcome', async () => {
      const consumer = await sink();
      proxy.mode = { kind: 'hang' };
      const sent = post(open({ proxy: proxy.url }), consumer.url);
      while (proxy.targets.length === 0) await nextTurn();
      clock.advance(TIMEOUT_MS);
      const { outcome } = await sent;
      expect(proxyOutcome(outcome).message).to.include('no tunnel within');
      // The tunnel's own timeout then gives the connection up.
      clock.advance(PROXY_TUNNEL_TIMEOUT_MS);
    });

    it('counts an endpoint failing after the tunnel is up as the endpoint\'s', async () => {
      const consumer = await tlsSink(true);
      const { outcome } = await post(open({ proxy: proxy.url }), consumer.url());
      expect(proxy.tunnels).to.equal(1);
      expect(outcome.kind, 'the TLS handshake with the endpoint failed').to.equal('network');
      expect(countsAgainstBreaker(outcome)).to.equal(true);
    });
  });

  context('with a client certificate', () => {
    it('is accepted by a sink that demands one, and refused without it', async () => {
      const consumer = await tlsSink(true);
      const sender = open();
      const withCert = await post(sender, consumer.url(), clientCertificate());
      expect(withCert.outcome).to.include({ kind: 'response', status: 200 });
      expect(consumer.requests.map((r) => r.clientCn)).to.deep.equal(['herald-client']);
      const without = await post(sender, consumer.url());
      expect(without.outcome.kind, JSON.stringify(without.outcome)).to.equal('network');
      expect(consumer.requests).to.have.length(1);
    });

    it('goes through the proxy too', async () => {
      const consumer = await tlsSink(true);
      const { outcome } = await post(open({ proxy: proxy.url }), consumer.url(), clientCertificate());
      expect(outcome).to.include({ kind: 'response', status: 200 });
      expect(proxy.tunnels).to.equal(1);
      expect(consumer.requests.map((r) => r.clientCn)).to.deep.equal(['herald-client']);
    });

    it('opens a key encrypted with a passphrase', async () => {
      const consumer = await tlsSink(true);
      const tls = validateClientTls({ cert: tlsFixture('client.pem'), key: tlsFixture('client-encrypted.key'), passphrase: 'test-passphrase' });
      const certificate = { fingerprint: tls.fingerprint, cert: tls.cert, key: tls.key, passphrase: 'test-passphrase', notAfter: tls.notAfter };
      const { outcome } = await post(open(), consumer.url(), certificate);
      expect(outcome).to.include({ kind: 'response', status: 200 });
    });

    it('makes no request once the certificate has expired by the clock', async () => {
      const consumer = await tlsSink(true);
      const certificate = clientCertificate();
      clock.advanceTo(certificate.notAfter);
      const { outcome } = await post(open(), consumer.url(), certificate);
      expect(outcome).to.include({ kind: 'network', code: CLIENT_CERT_EXPIRED_CODE });
      expect(failureKind(outcome)).to.equal('tls');
      expect(consumer.requests).to.deep.equal([]);
    });
  });

  context('without the test CA', () => {
    it('refuses the sink\'s certificate (verification stays on)', async () => {
      const consumer = await tlsSink(false);
      const { outcome } = await post(open({ ca: [] }), consumer.url());
      expect(outcome.kind).to.equal('network');
      expect(failureKind(outcome)).to.equal('tls');
    });
  });

  context('options', () => {
    it('refuses a proxy URL that is not http://host:port, naming the option without the password', () => {
      for (const bad of ['https://proxy:3128', 'socks5://proxy:1080', 'http://proxy:3128/path', 'not a url', '']) {
        expect(() => open({ proxy: bad }), bad).to.throw(ConfigError, /^config proxy=/);
      }
      expect(() => open({ proxy: 'ftp://user:hunter2@proxy:21' })).to.throw(ConfigError).that.satisfies((error: Error) => !error.message.includes('hunter2'));
    });

    it('refuses a ca that is not a list of PEM certificates', () => {
      expect(() => open({ ca: ['nope'] })).to.throw(ConfigError, /^config ca=/);
    });
  });
});
