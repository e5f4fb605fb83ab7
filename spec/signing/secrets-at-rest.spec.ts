/**
 * Endpoint secrets at rest, end to end: what the database holds (the raw
 * SQLite file, the PostgreSQL table as text), a key rotation with
 * `reencryptSecrets()`, plain rows written before encryption, and an endpoint
 * sealed under a key this node lacks.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { systemClock } from '../../lib/clock.ts';
import { resolveConfig } from '../../lib/config/config.ts';
import { ErrorCode, SecretUnreadableError } from '../../lib/errors.ts';
import { Herald } from '../../lib/herald.ts';
import { generateSecret } from '../../lib/signing/secret.ts';
import { keyIdOf, SecretBox } from '../../lib/signing/secret-box.ts';
import { GENERATED_KEY_FILE, SecretKeyOrigin } from '../../lib/signing/secret-key-source.ts';
import { verify } from '../../lib/signing/verify.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';
import { attemptsSeen, LOOPBACK, nextEvent, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

/** Every text that must not be found at rest: each secret (whole and its base64 body) and the key (base64 and hex). */
function forbiddenTexts(secrets: readonly string[], key: Buffer): string[] {
  return [
    'whsec_',
    ...secrets.map((s) => s.slice('whsec_'.length)),
    key.toString('base64'),
    key.toString('base64').slice(0, 20),
    key.toString('hex'),
  ];
}

/** The SQLite database's files (the main file, its WAL and shared memory), byte for byte, as latin1 text. */
function rawDatabaseText(dir: string): string {
  return readdirSync(dir)
    .filter((name) => name.startsWith('herald.db'))
    .map((name) => readFileSync(join(dir, name)).toString('latin1'))
    .join('\n');
}

function keyFrom(dir: string): Buffer {
  return Buffer.from(readFileSync(join(dir, GENERATED_KEY_FILE), 'utf8').trim(), 'base64');
}

describe('Secrets at rest', () => {
  let dir: string;
  let t: TestHerald | undefined;
  let sink: TestServer | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-secrets-'));
  });
  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
    t = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  context('on SQLite without a configured key', () => {
    it('generates dataDir/secret-key, and the database file holds no secret and no key', async () => {
      t = await startHerald({}, { start: false, dir });
      expect(t.herald.secretKeys.origin).to.equal(SecretKeyOrigin.GENERATED);
      const secrets: string[] = [];
      for (let i = 0; i < 5; i++) secrets.push((await t.herald.createEndpoint({ tenantId: 'acme', url: `http://127.0.0.1:9/${i}` })).secret);
      const [first] = await t.herald.listEndpoints();
      secrets.push((await t.herald.rotateSecret(first?.id ?? '')).secret);
      await t.close();
      t = undefined;

      const raw = rawDatabaseText(dir);
      expect(raw, 'the endpoints are in the file').to.include('http://127.0.0.1:9/4');
      expect(raw).to.include('enc:v1:');
      for (const text of forbiddenTexts(secrets, keyFrom(dir))) expect(raw).to.not.include(text);
    });

    it('seals on the store thread path too (system clock, engine.storeThread): the thread never sees a secret', async () => {
      const config = resolveConfig({ store: `sqlite:${join(dir, 'herald.db')}`, dataDir: dir, logLevel: 'silent', engine: { storeThread: true } });
      const herald = await Herald.open(config, { clock: systemClock });
      const { secret } = await herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/' });
      await herald.close();
      const raw = rawDatabaseText(dir);
      expect(raw).to.include('enc:v1:');
      for (const text of forbiddenTexts([secret], keyFrom(dir))) expect(raw).to.not.include(text);
    });
  });

  context('on PostgreSQL with HERALD_SECRET_KEY', () => {
    it('stores the secrets sealed: the endpoints table as text holds no secret and no key', async () => {
      const url = await createTestDatabase();
      const key = randomBytes(32);
      const config = resolveConfig({ store: url, dataDir: dir, logLevel: 'silent', secrets: { key: key.toString('base64') } });
      const herald = await Herald.open(config, { clock: systemClock });
      const secrets: string[] = [];
      try {
        expect(herald.secretKeys.origin).to.equal(SecretKeyOrigin.CONFIG);
        for (let i = 0; i < 3; i++) secrets.push((await herald.createEndpoint({ tenantId: 'acme', url: `http://127.0.0.1:9/${i}` })).secret);
        const [first] = await herald.listEndpoints();
        secrets.push((await herald.rotateSecret(first?.id ?? '')).secret);
      } finally {
        await herald.close();
      }
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      try {
        const { rows } = await client.query<{ row: string }>('SELECT e::text AS row FROM herald.endpoints e');
        const text = rows.map((r) => r.row).join('\n');
        expect(rows).to.have.length(3);
        expect(text).to.include(`enc:v1:${keyIdOf(key)}:`);
        for (const forbidden of forbiddenTexts(secrets, key)) expect(text).to.not.include(forbidden);
      } finally {
        await client.end();
      }
    });

    it('keeps them plain, with a warning, when no key is configured (no key is generated for a store that spans hosts)', async () => {
      const url = await createTestDatabase();
      const herald = await Herald.open(resolveConfig({ store: url, dataDir: dir, logLevel: 'silent' }), { clock: systemClock });
      try {
        expect(herald.secretKeys.origin).to.equal(SecretKeyOrigin.NONE);
        expect(herald.secretKeys.warnings.join()).to.include('HERALD_SECRET_KEY');
        const { endpoint, secret } = await herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/' });
        expect((await herald.store.getEndpoint(endpoint.id))?.secrets[0]?.secret).to.equal(secret);
        expect(readdirSync(dir)).to.not.include(GENERATED_KEY_FILE);
      } finally {
        await herald.close();
      }
    });
  });

  context('when the key is rotated', () => {
    it('opens old values with the previous key, re-encrypts them all, and signs after the old key is dropped', async () => {
      const [oldKey, newKey] = [randomBytes(32), randomBytes(32)];
      sink = await startServer(() => ({ status: 200 }));
      const deliverOnce = async (h: TestHerald, n: number) => {
        await h.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n } });
        await attemptsSeen(h, 1);
        const request = sink?.received[n - 1];
        return request;
      };

      t = await startHerald({ secrets: { key: oldKey.toString('base64') } }, { dir });
      const { endpoint, secret } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const first = await deliverOnce(t, 1);
      expect(() => verify({ payload: first?.body ?? '', headers: first?.headers ?? {}, secret })).to.not.throw();
      await t.close();

      // Step 1: the new key current, the old one previous.
      t = await startHerald({ secrets: { key: newKey.toString('hex'), previousKeys: [oldKey.toString('base64')] } }, { dir });
      const second = await deliverOnce(t, 2);
      expect(() => verify({ payload: second?.body ?? '', headers: second?.headers ?? {}, secret })).to.not.throw();
      // Step 2: re-encrypt.
      const progress: number[] = [];
      const outcome = await t.herald.reencryptSecrets((done) => progress.push(done));
      expect({ checked: outcome.checked, rewritten: outcome.rewritten, unreadable: outcome.unreadable }).to.deep.equal({ checked: 1, rewritten: 1, unreadable: [] });
      expect(progress).to.deep.equal([1]);
      const stored = (await t.herald.store.getEndpoint(endpoint.id))?.secrets ?? [];
      expect(stored.map((s) => s.secret.split(':').slice(0, 3).join(':'))).to.deep.equal([`enc:v1:${keyIdOf(newKey)}`]);
      expect((await t.herald.reencryptSecrets()).rewritten, 'a second run finds nothing to do').to.equal(0);
      await t.close();

      // Step 3: the old key dropped.
      t = await startHerald({ secrets: { key: newKey.toString('base64') } }, { dir });
      const third = await deliverOnce(t, 3);
      expect(() => verify({ payload: third?.body ?? '', headers: third?.headers ?? {}, secret })).to.not.throw();
    });
  });

  context('when a rotation is written between re-encryption\'s read and its write', () => {
    it('keeps the rotated secret: the re-encryption reads again instead of overwriting', async () => {
      sink = await startServer(() => ({ status: 200 }));
      t = await startHerald({}, { dir });
      const h = t;
      const { endpoint } = await h.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const legacy = generateSecret();
      await h.herald.store.updateEndpoint(endpoint.id, { secrets: [{ secret: legacy, createdAt: h.clock.now(), expiresAt: null }] }, h.clock.now());
      // Another node's rotation lands just before the re-encryption writes.
      const store = h.herald.store;
      const write = store.updateEndpoint.bind(store);
      let rotated: string | undefined;
      store.updateEndpoint = async (id, patch, now) => {
        if (rotated === undefined && patch.expectedSecrets !== undefined) {
          rotated = 'rotating';
          rotated = (await h.herald.rotateSecret(id)).secret;
        }
        return write(id, patch, now);
      };
      const outcome = await h.herald.reencryptSecrets();
      expect(outcome.unreadable).to.deep.equal([]);
      const stored = (await store.getEndpoint(endpoint.id))?.secrets ?? [];
      expect(stored, 'the rotated secret and the previous one').to.have.length(2);
      expect(stored.every((s) => s.secret.startsWith('enc:v1:'))).to.equal(true);

      await h.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(h, 1);
      const request = sink.received[0];
      for (const one of [legacy, rotated ?? '']) {
        expect(() => verify({ payload: request?.body ?? '', headers: request?.headers ?? {}, secret: one })).to.not.throw();
      }
    });
  });

  context('when two rotations of one endpoint race', () => {
    it('writes the first and refuses the second with HERALD_CONFLICT, so no issued secret is lost', async () => {
      t = await startHerald({}, { start: false });
      const h = t;
      const { endpoint } = await h.herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/' });
      const store = h.herald.store;
      const write = store.updateEndpoint.bind(store);
      let inner: Promise<{ secret: string }> | undefined;
      store.updateEndpoint = async (id, patch, now) => {
        // The other rotation lands between this one's read and its write.
        if (inner === undefined) await (inner = h.herald.rotateSecret(id));
        return write(id, patch, now);
      };
      const outer = await h.herald.rotateSecret(endpoint.id).then(() => undefined, (e: unknown) => e);
      expect(outer).to.have.property('code', ErrorCode.CONFLICT);
      const stored = (await store.getEndpoint(endpoint.id))?.secrets ?? [];
      expect(stored).to.have.length(2);
      expect(h.herald.secretKeys.box.open(stored[0]?.secret ?? '', endpoint.id)).to.equal((await inner)?.secret);
    });
  });

  context('when a row was written before encryption (a plain whsec_ secret)', () => {
    it('signs with it, and reencryptSecrets() seals it', async () => {
      sink = await startServer(() => ({ status: 200 }));
      t = await startHerald({}, { dir });
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const legacy = generateSecret();
      await t.herald.store.updateEndpoint(endpoint.id, { secrets: [{ secret: legacy, createdAt: t.clock.now(), expiresAt: null }] }, t.clock.now());

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t, 1);
      const request = sink.received[0];
      expect(() => verify({ payload: request?.body ?? '', headers: request?.headers ?? {}, secret: legacy })).to.not.throw();

      expect((await t.herald.reencryptSecrets()).rewritten).to.equal(1);
      const stored = (await t.herald.store.getEndpoint(endpoint.id))?.secrets[0]?.secret ?? '';
      expect(stored).to.match(/^enc:v1:/);
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t, 2);
      const after = sink.received[1];
      expect(() => verify({ payload: after?.body ?? '', headers: after?.headers ?? {}, secret: legacy })).to.not.throw();
    });

    it('is sealed by a rotation, and both secrets sign during the overlap', async () => {
      sink = await startServer(() => ({ status: 200 }));
      t = await startHerald({}, { dir });
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const legacy = generateSecret();
      await t.herald.store.updateEndpoint(endpoint.id, { secrets: [{ secret: legacy, createdAt: t.clock.now(), expiresAt: null }] }, t.clock.now());

      const { secret } = await t.herald.rotateSecret(endpoint.id);
      const stored = (await t.herald.store.getEndpoint(endpoint.id))?.secrets ?? [];
      expect(stored.map((s) => s.secret.slice(0, 7))).to.deep.equal(['enc:v1:', 'enc:v1:']);
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t, 1);
      const request = sink.received[0];
      for (const one of [legacy, secret]) {
        expect(() => verify({ payload: request?.body ?? '', headers: request?.headers ?? {}, secret: one })).to.not.throw();
      }
    });
  });

  context('when an endpoint was sealed under a key this node does not hold', () => {
    it('holds its deliveries without spending an attempt, names the key and endpoint, and the other endpoints deliver', async () => {
      sink = await startServer(() => ({ status: 200 }));
      const nodeKey = randomBytes(32).toString('base64');
      t = await startHerald({ secrets: { key: nodeKey }, allowNetworks: [...LOOPBACK] }, { dir });
      const { endpoint: good } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/good` });
      const { endpoint: lost } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/lost` });
      const foreignKey = randomBytes(32);
      const foreign = new SecretBox(foreignKey).seal(generateSecret(), lost.id);
      await t.herald.store.updateEndpoint(lost.id, { secrets: [{ secret: foreign, createdAt: t.clock.now(), expiresAt: null }] }, t.clock.now());

      const failure = nextEvent(t.herald.events, 'failure', (e) => e.where === `signing for ${lost.id}`);
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      const { error } = await failure;
      await attemptsSeen(t, 1);
      expect(error).to.be.instanceOf(SecretUnreadableError);
      expect(error).to.include({ code: ErrorCode.SECRET_KEY_UNKNOWN, keyId: keyIdOf(foreignKey), endpointId: lost.id });
      expect(t.attempts.map((a) => a.endpointId)).to.deep.equal([good.id]);
      expect(sink.received.map((r) => r.path)).to.deep.equal(['/good']);
      const [held] = await t.herald.listDeliveries({ endpointId: lost.id });
      expect(held).to.include({ status: 'pending', attempts: 0 });

      const outcome = await t.herald.reencryptSecrets();
      expect(outcome.checked).to.equal(2);
      expect(outcome.unreadable.map((u) => [u.endpointId, u.error.keyId])).to.deep.equal([[lost.id, keyIdOf(foreignKey)]]);
      expect((await t.herald.store.getEndpoint(lost.id))?.secrets[0]?.secret, 'left as it was').to.equal(foreign);

      // Tried again a minute later, still without spending an attempt.
      const again = nextEvent(t.herald.events, 'failure', (e) => e.where === `signing for ${lost.id}`);
      t.clock.advance(60_000);
      await again;
      expect(t.attempts.map((a) => a.endpointId)).to.deep.equal([good.id]);
      await t.close();

      // Given the key (as a previous one), the node delivers what waited.
      t = await startHerald({ secrets: { key: nodeKey, previousKeys: [foreignKey.toString('base64')] } }, { dir });
      // Released twice above, each for a minute, on a clock that restarts at the real time.
      t.clock.advance(3 * 60_000);
      await attemptsSeen(t, 1);
      expect(t.attempts.map((a) => [a.endpointId, a.outcome.kind])).to.deep.equal([[lost.id, 'response']]);
      expect(sink.received.map((r) => r.path)).to.deep.equal(['/good', '/lost']);
    });
  });
});
