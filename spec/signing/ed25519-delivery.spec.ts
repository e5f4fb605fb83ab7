/**
 * ed25519 endpoints end to end on SQLite: real consumers on 127.0.0.1 verify `v1a` signatures with
 * node:crypto alone (the `whpk_` decoded as the specification describes it), a rotation from HMAC
 * to ed25519 signs with both during the overlap (manual clock), and the `whsk_` is sealed at rest
 * and survives a key rotation with `reencryptSecrets()`.
 */
import { expect } from 'chai';
import { createPublicKey, randomBytes, verify as cryptoVerify } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Webhook } from 'standardwebhooks';
import { keyIdOf } from '../../lib/signing/secret-box.ts';
import { verify } from '../../lib/signing/verify.ts';
import { attemptsSeen, startHerald, startServer, type ReceivedRequest, type TestHerald, type TestServer } from '../support/harness.ts';

/** What a consumer writes, with nothing but node:crypto: true when one `v1a` signature verifies. */
function consumerVerifies(whpk: string, request: ReceivedRequest | undefined): boolean {
  const raw = Buffer.from(whpk.slice('whpk_'.length), 'base64');
  const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
  const headers = request?.headers ?? {};
  const signed = Buffer.from(`${String(headers['webhook-id'])}.${String(headers['webhook-timestamp'])}.${request?.body ?? ''}`);
  return String(headers['webhook-signature'] ?? '')
    .split(' ')
    .filter((s) => s.startsWith('v1a,'))
    .some((s) => cryptoVerify(null, signed, key, Buffer.from(s.slice(4), 'base64')));
}

function versions(request: ReceivedRequest | undefined): string[] {
  return String(request?.headers['webhook-signature'] ?? '').split(' ').map((s) => s.slice(0, s.indexOf(',')));
}

describe('ed25519 endpoints, end to end', () => {
  let t: TestHerald | undefined;
  let sink: TestServer | undefined;
  /** A data folder kept across restarts, removed after the test. */
  let ownDir: string | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
    t = undefined;
    if (ownDir !== undefined) rmSync(ownDir, { recursive: true, force: true });
    ownDir = undefined;
  });

  context('when an endpoint is created with signatureScheme ed25519', () => {
    it('answers its whpk_, shows it any time after, and signs v1a that a consumer verifies with node:crypto', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      const { endpoint, secret } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, signatureScheme: 'ed25519' });
      expect(secret).to.match(/^whpk_/);
      expect((await t.herald.getEndpoint(endpoint.id)).signingKeys).to.deep.equal([
        { scheme: 'ed25519', publicKey: secret, createdAt: t.clock.now(), expiresAt: null },
      ]);

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
      const [request] = await sink.requests(1);
      expect(versions(request)).to.deep.equal(['v1a']);
      expect(consumerVerifies(secret, request)).to.equal(true);
      expect(consumerVerifies(secret, { ...(request as ReceivedRequest), body: '{"n":2}' })).to.equal(false);
      // Herald's own verify(), the sequence signature included.
      expect(verify({ payload: request?.body ?? '', headers: request?.headers ?? {}, secret, sequence: 'required' }).sequence).to.equal(1);
      await attemptsSeen(t, 1);
    });

    it('refuses an unknown scheme, naming the field', async () => {
      t = await startHerald({}, { start: false });
      const refused = await t.herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/', signatureScheme: 'rsa' }).then(() => undefined, (e: unknown) => e);
      expect(refused).to.have.property('code', 'HERALD_INVALID_INPUT');
      expect((refused as Error).message).to.match(/^signatureScheme: must be one of hmac-sha256, ed25519/);
    });
  });

  context('when an HMAC endpoint rotates to ed25519', () => {
    it('signs v1 and v1a during the overlap, each verifying, and only v1a after it', async () => {
      t = await startHerald({ signing: { rotationOverlapMs: 60_000 } });
      sink = await startServer(() => ({ status: 200 }));
      const { endpoint, secret: whsec } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const rotated = await t.herald.rotateSecret(endpoint.id, { signatureScheme: 'ed25519' });
      const whpk = rotated.secret;
      expect(whpk).to.match(/^whpk_/);
      expect(rotated.endpoint.signingKeys.map((k) => [k.scheme, k.publicKey, k.expiresAt])).to.deep.equal([
        ['ed25519', whpk, null],
        ['hmac-sha256', null, t.clock.now() + 60_000],
      ]);

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
      const [during] = await sink.requests(1);
      expect(versions(during), 'current first').to.deep.equal(['v1a', 'v1']);
      expect(consumerVerifies(whpk, during)).to.equal(true);
      expect(() => new Webhook(whsec).verify(during?.body ?? '', during?.headers as Record<string, string>)).to.not.throw();
      for (const secret of [whsec, whpk, [whsec, whpk]]) {
        expect(() => verify({ payload: during?.body ?? '', headers: during?.headers ?? {}, secret, sequence: 'required' })).to.not.throw();
      }
      await attemptsSeen(t, 1);

      t.clock.advance(60_001);
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 2 } });
      const after = (await sink.requests(2))[1];
      expect(versions(after)).to.deep.equal(['v1a']);
      expect(consumerVerifies(whpk, after)).to.equal(true);
      expect(() => new Webhook(whsec).verify(after?.body ?? '', after?.headers as Record<string, string>)).to.throw();
      await attemptsSeen(t, 2);

      // A rotation that names no scheme keeps the current one; and back to HMAC when asked.
      const again = await t.herald.rotateSecret(endpoint.id);
      expect(again.secret).to.match(/^whpk_/).and.not.equal(whpk);
      const back = await t.herald.rotateSecret(endpoint.id, { signatureScheme: 'hmac-sha256' });
      expect(back.secret).to.match(/^whsec_/);
      expect(back.endpoint.signingKeys.map((k) => k.scheme), 'both ed25519 keys still in their overlap').to.deep.equal(['hmac-sha256', 'ed25519', 'ed25519']);
      const refused = await t.herald.rotateSecret(endpoint.id, { scheme: 'ed25519' }).then(() => undefined, (e: unknown) => e);
      expect(refused).to.have.property('code', 'HERALD_INVALID_INPUT');
    });
  });

  context('at rest', () => {
    it('seals the whsk_ (no plaintext key in the SQLite file), keeps the public key plain, and re-encrypts it under a new key', async () => {
      const [oldKey, newKey] = [randomBytes(32), randomBytes(32)];
      sink = await startServer(() => ({ status: 200 }));
      const dir = (ownDir = mkdtempSync(join(tmpdir(), 'herald-ed25519-')));
      t = await startHerald({ secrets: { key: oldKey.toString('base64') } }, { dir });
      const { endpoint, secret: whpk } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, signatureScheme: 'ed25519' });
      const sealed = (await t.herald.store.getEndpoint(endpoint.id))?.secrets[0]?.secret ?? '';
      const whsk = t.herald.secretKeys.box.open(sealed, endpoint.id);
      expect(whsk).to.match(/^whsk_/);
      const raw = readdirSync(dir).filter((n) => n.startsWith('herald.db')).map((n) => readFileSync(join(dir, n)).toString('latin1')).join('\n');
      expect(raw).to.include(`enc:v1:${keyIdOf(oldKey)}:`);
      expect(raw, 'the public key is public').to.include(whpk);
      for (const forbidden of ['whsk_', whsk.slice(5, 49), whsk.slice(49)]) expect(raw).to.not.include(forbidden);

      // The key rotated: re-encryption opens the whsk_ with the old key and seals it under the new one.
      const before = await t.herald.listEndpoints();
      await t.close();
      t = await startHerald({ secrets: { key: newKey.toString('base64'), previousKeys: [oldKey.toString('base64')] } }, { dir });
      expect((await t.herald.listEndpoints()).map((e) => e.id)).to.deep.equal(before.map((e) => e.id));
      expect((await t.herald.reencryptSecrets()).rewritten).to.equal(1);
      const resealed = (await t.herald.store.getEndpoint(endpoint.id))?.secrets[0];
      expect(resealed?.secret).to.match(new RegExp(`^enc:v1:${keyIdOf(newKey)}:`));
      expect(resealed?.publicKey).to.equal(whpk);
      await t.close();

      t = await startHerald({ secrets: { key: newKey.toString('base64') } }, { dir });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      const [request] = await sink.requests(1);
      expect(consumerVerifies(whpk, request)).to.equal(true);
      await attemptsSeen(t, 1);
    });
  });
});
