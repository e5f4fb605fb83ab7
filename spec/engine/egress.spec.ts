/**
 * The egress proxy and client certificates end to end: a Herald on SQLite whose deliveries leave
 * through a real CONNECT proxy on 127.0.0.1, and an HTTPS sink that demands the test CA's client
 * certificate.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { keyIdOf } from '../../lib/signing/secret-box.ts';
import { ConnectProxy, TlsSink, tlsFixture } from '../support/egress-parts.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

const CA_FILE = fileURLToPath(new URL('../fixtures/tls/ca.pem', import.meta.url));
/** A breaker that opens at the first failure it counts, and health that disables at the first: any slip shows. */
const STRICT = { breaker: { volumeThreshold: 1, errorThresholdPercentage: 1 }, health: { disableAfterMs: 1_000, failingThreshold: 1 } } as const;

describe('Egress (engine): proxy and client certificates', () => {
  let t: TestHerald | undefined;
  let proxy: ConnectProxy | undefined;
  let sink: TestServer | undefined;
  let tlsSink: TlsSink | undefined;
  let dir: string | undefined;

  afterEach(async () => {
    await t?.close();
    t = undefined;
    await proxy?.close();
    proxy = undefined;
    await sink?.close();
    sink = undefined;
    await tlsSink?.close();
    tlsSink = undefined;
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    dir = undefined;
  });

  context('when the proxy refuses the tunnel', () => {
    it('retries the delivery without counting it against the endpoint, then delivers through the proxy', async () => {
      proxy = await ConnectProxy.start();
      proxy.mode = { kind: 'refuse', status: 502 };
      sink = await startServer(() => ({ status: 200 }));
      t = await startHerald({ ...STRICT, delivery: { proxy: proxy.url } });
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });

      for (let n = 1; n <= 3; n++) {
        const attempt = (await attemptsSeen(t, n))[n - 1]!;
        expect(attempt.outcome).to.include({ kind: 'proxy', status: 502 });
        expect(attempt.summary).to.match(/^retry in .*: proxy: 502 from proxy http:\/\/127\.0\.0\.1:\d+: Bad Gateway \(CONNECT 127\.0\.0\.1:\d+\)$/);
        if (attempt.settlement.kind !== 'retry') throw new Error(`expected a retry, got ${attempt.settlement.kind}`);
        const view = await t.herald.getEndpoint(endpoint.id);
        expect(view).to.include({ status: 'enabled', failingSince: null });
        const actor = (await t.herald.status()).actors.find((a) => a.endpointId === endpoint.id);
        expect(actor?.breaker).to.equal('closed');
        t.clock.advanceTo(attempt.settlement.nextAttemptAt);
      }
      expect(sink.received).to.have.length(0);

      proxy.mode = { kind: 'tunnel' };
      const delivered = (await attemptsSeen(t, 4))[3]!;
      expect(delivered.settlement.kind).to.equal('delivered');
      expect(sink.received).to.have.length(1);
      expect(proxy.tunnels).to.equal(1);
      expect((await t.herald.status()).actors.find((a) => a.endpointId === endpoint.id)?.breaker).to.equal('closed');
    });
  });

  context('when the endpoint has a client certificate', () => {
    it('delivers to a sink that demands it, through the proxy, and shows only its summary', async () => {
      proxy = await ConnectProxy.start();
      tlsSink = await TlsSink.start({ requireClientCert: true });
      t = await startHerald({ delivery: { proxy: proxy.url, caFile: CA_FILE } });
      const clientTls = { cert: tlsFixture('client.pem'), key: tlsFixture('client-encrypted.key'), passphrase: 'test-passphrase' };
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: tlsSink.url(), clientTls });
      const plain = await t.herald.createEndpoint({ tenantId: 'acme', url: tlsSink.url('127.0.0.1', '/plain') });
      expect(endpoint.clientTls).to.include({ subject: 'CN=herald-client\nO=Herald Tests', issuer: 'CN=Herald Test CA' });
      expect(endpoint.clientTls?.fingerprint).to.match(/^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
      expect(JSON.stringify(endpoint)).to.not.include('PRIVATE KEY').and.not.include('test-passphrase');
      expect(plain.endpoint.clientTls).to.equal(null);

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      const attempts = await attemptsSeen(t, 2);
      const mine = attempts.find((a) => a.endpointId === endpoint.id);
      const theirs = attempts.find((a) => a.endpointId === plain.endpoint.id);
      expect(mine?.settlement.kind).to.equal('delivered');
      expect(theirs?.outcome.kind, 'refused without a client certificate').to.equal('network');
      expect(tlsSink.requests).to.deep.equal([{ path: '/hook', host: tlsSink.url().split('/')[2], clientCn: 'herald-client' }]);
      expect(proxy.tunnels).to.equal(2);
    });

    it('refuses an expired certificate, a key that does not match, and removes it with null', async () => {
      t = await startHerald({});
      const cert = tlsFixture('client.pem');
      const created = await t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/hook', clientTls: { cert, key: tlsFixture('client.key') } });
      await expectRejected(t.herald.updateEndpoint(created.endpoint.id, { clientTls: { cert, key: tlsFixture('server.key') } }), 'clientTls.key');
      await expectRejected(t.herald.updateEndpoint(created.endpoint.id, { clientTls: { cert, key: tlsFixture('client-encrypted.key') } }), 'clientTls.key');
      t.clock.advanceTo(created.endpoint.clientTls!.notAfter);
      await expectRejected(t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/x', clientTls: { cert, key: tlsFixture('client.key') } }), 'clientTls.cert');
      const removed = await t.herald.updateEndpoint(created.endpoint.id, { clientTls: null });
      expect(removed.clientTls).to.equal(null);
      expect((await t.herald.store.getEndpoint(created.endpoint.id))?.clientTls).to.equal(undefined);
    });
  });

  context('at rest', () => {
    it('keeps the key and passphrase sealed in the database, and reencryptSecrets() re-seals them under a new key', async () => {
      dir = mkdtempSync(join(tmpdir(), 'herald-egress-'));
      const [oldKey, newKey] = [randomBytes(32), randomBytes(32)];
      const key = tlsFixture('client-encrypted.key');
      t = await startHerald({ secrets: { key: oldKey.toString('base64') } }, { dir, start: false });
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/hook', clientTls: { cert: tlsFixture('client.pem'), key, passphrase: 'test-passphrase' } });
      await t.close();
      const raw = readdirSync(dir).filter((name) => name.startsWith('herald.db')).map((name) => readFileSync(join(dir!, name)).toString('latin1')).join('\n');
      expect(raw).to.include('herald-client');
      for (const line of key.split('\n').filter((l) => l.length > 20)) expect(raw).to.not.include(line);
      expect(raw).to.not.include('test-passphrase');

      t = await startHerald({ secrets: { key: newKey.toString('base64'), previousKeys: [oldKey.toString('base64')] } }, { dir, start: false });
      const outcome = await t.herald.reencryptSecrets();
      expect(outcome.rewritten).to.equal(1);
      const stored = (await t.herald.store.getEndpoint(endpoint.id))?.clientTls;
      expect(stored?.key.startsWith(`enc:v1:${keyIdOf(newKey)}:`)).to.equal(true);
      expect(stored?.passphrase?.startsWith(`enc:v1:${keyIdOf(newKey)}:`)).to.equal(true);
      expect((await t.herald.reencryptSecrets()).rewritten, 'a second run finds nothing to do').to.equal(0);
    });
  });
});

async function expectRejected(promise: Promise<unknown>, field: string): Promise<void> {
  try {
    await promise;
  } catch (error) {
    expect((error as { field?: string }).field, String(error)).to.equal(field);
    return;
  }
  throw new Error(`expected a ValidationError naming ${field}`);
}
