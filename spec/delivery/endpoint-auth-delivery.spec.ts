/**
 * Custom headers and authentication end to end, through a Herald on SQLite: what the consumer
 * receives, what the database holds, what the API shows, what the log says, and re-encryption.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { OAUTH_TOKEN_CODE } from '../../lib/delivery/oauth-tokens.ts';
import { ErrorCode, type HeraldError } from '../../lib/errors.ts';
import { createLogger, logEngineEvents } from '../../lib/logging.ts';
import { keyIdOf } from '../../lib/signing/secret-box.ts';
import { verify } from '../../lib/signing/verify.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

const SECRET_HEADER = 'hdr-Secret-7f3a9c';
const SECRET_TOKEN = 'tok-Secret-b81e22';
const SECRET_PASSWORD = 'pw-Secret-0c4d5e';
const CLIENT_SECRET = 'cs-Secret-93ad10';

function rawDatabaseText(dir: string): string {
  return readdirSync(dir)
    .filter((name) => name.startsWith('herald.db'))
    .map((name) => readFileSync(join(dir, name)).toString('latin1'))
    .join('\n');
}

function memoryLog(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter((l) => l !== ''));
      done();
    },
  });
  return { stream, lines };
}

describe('Endpoint headers and authentication, end to end', () => {
  let dir: string;
  let t: TestHerald | undefined;
  let sink: TestServer | undefined;
  let tokenServer: TestServer | undefined;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-auth-'));
  });
  afterEach(async () => {
    await sink?.close();
    await tokenServer?.close();
    sink = undefined;
    tokenServer = undefined;
    await t?.close();
    t = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends the custom headers and the bearer token, seals them at rest, and never shows or logs them', async () => {
    sink = await startServer((_, index) => (index === 0 ? { status: 500, body: 'try later' } : { status: 204 }));
    t = await startHerald({}, { dir });
    const log = memoryLog();
    logEngineEvents(t.herald, createLogger('trace', { format: 'json', destination: log.stream }));
    const created = await t.herald.createEndpoint({
      tenantId: 'acme',
      url: sink.url,
      headers: { 'X-Team': 'payments', 'X-Api-Key': { value: SECRET_HEADER, secret: true } },
      auth: { type: 'bearer', token: SECRET_TOKEN },
    });
    expect(created.endpoint.headers).to.deep.equal({ 'X-Team': { value: 'payments', secret: false }, 'X-Api-Key': { secret: true } });
    expect(created.endpoint.auth).to.deep.equal({ type: 'bearer', tokenSet: true });

    await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
    const [failed] = await attemptsSeen(t, 1);
    expect(failed?.settlement.kind).to.equal('retry');
    t.clock.advance(60_000);
    await attemptsSeen(t, 2);
    for (const request of sink.received) {
      expect(request.headers).to.include({ 'x-team': 'payments', 'x-api-key': SECRET_HEADER, authorization: `Bearer ${SECRET_TOKEN}` });
      expect(() => verify({ payload: request.body, headers: request.headers, secret: created.secret }), 'Herald\'s own headers are intact').to.not.throw();
    }

    const shown = JSON.stringify([created, await t.herald.getEndpoint(created.endpoint.id), await t.herald.listEndpoints()]);
    for (const secret of [SECRET_HEADER, SECRET_TOKEN]) expect(shown).to.not.include(secret);
    expect(log.lines.length, 'the attempts were logged').to.be.greaterThan(1);
    for (const secret of [SECRET_HEADER, SECRET_TOKEN]) expect(log.lines.join('\n')).to.not.include(secret);
    const dead = JSON.stringify(await t.herald.store.listAttempts(failed?.deliveryId ?? ''));
    for (const secret of [SECRET_HEADER, SECRET_TOKEN]) expect(dead).to.not.include(secret);

    await t.close();
    t = undefined;
    const raw = rawDatabaseText(dir);
    expect(raw, 'non-secret values are stored as they are').to.include('payments');
    for (const secret of [SECRET_HEADER, SECRET_TOKEN]) expect(raw).to.not.include(secret);
  });

  it('changes and removes them by update, refusing authorization beside auth', async () => {
    sink = await startServer(() => ({ status: 204 }));
    t = await startHerald({}, { dir });
    const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, headers: { Authorization: 'Token abc' } });
    const refused = await t.herald.updateEndpoint(endpoint.id, { auth: { type: 'bearer', token: 't' } }).catch((error: HeraldError) => error);
    expect(refused).to.include({ code: ErrorCode.INVALID_INPUT, field: 'headers.Authorization' });
    const basic = await t.herald.updateEndpoint(endpoint.id, { headers: null, auth: { type: 'basic', username: 'herald', password: SECRET_PASSWORD } });
    expect(basic).to.include({ headers: null });
    expect(basic.auth).to.deep.equal({ type: 'basic', username: 'herald', passwordSet: true });
    await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
    await attemptsSeen(t, 1);
    expect(sink.received[0]?.headers.authorization).to.equal(`Basic ${Buffer.from(`herald:${SECRET_PASSWORD}`).toString('base64')}`);
    expect(await t.herald.updateEndpoint(endpoint.id, { auth: null })).to.include({ auth: null });
  });

  it('obtains an OAuth token for the delivery; a token endpoint failure is a retried attempt that names it', async () => {
    sink = await startServer(() => ({ status: 204 }));
    tokenServer = await startServer((_, index) =>
      index === 0 ? { status: 503, body: 'maintenance' } : { status: 200, body: JSON.stringify({ access_token: 'at-1', token_type: 'bearer', expires_in: 3600 }) },
    );
    t = await startHerald({}, { dir });
    const { endpoint } = await t.herald.createEndpoint({
      tenantId: 'acme',
      url: sink.url,
      auth: { type: 'oauth2', tokenUrl: `${tokenServer.url}/token`, clientId: 'herald', clientSecret: CLIENT_SECRET },
    });
    expect(endpoint.auth).to.deep.equal({ type: 'oauth2', tokenUrl: `${tokenServer.url}/token`, clientId: 'herald', clientSecretSet: true, scope: null, audience: null });
    await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
    const [first] = await attemptsSeen(t, 1);
    expect(first?.outcome).to.deep.include({ kind: 'network', code: OAUTH_TOKEN_CODE });
    expect(first?.summary).to.match(/^retry in .*: OAUTH_TOKEN: token endpoint http:\/\/127\.0\.0\.1:\d+\/token: HTTP 503 "maintenance"$/);
    expect(sink.received, 'the consumer is not called without a token').to.have.length(0);
    t.clock.advance(60_000);
    const [, second] = await attemptsSeen(t, 2);
    expect(second?.settlement.kind).to.equal('delivered');
    expect(sink.received[0]?.headers.authorization).to.equal('Bearer at-1');
    expect(tokenServer.received[1]?.headers.authorization).to.equal(`Basic ${Buffer.from(`herald:${CLIENT_SECRET}`).toString('base64')}`);
    await t.close();
    t = undefined;
    expect(rawDatabaseText(dir)).to.not.include(CLIENT_SECRET);
  });

  it('re-seals secret header values and the auth secret under a new key (secrets reencrypt)', async () => {
    sink = await startServer(() => ({ status: 204 }));
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    t = await startHerald({ secrets: { key: oldKey.toString('base64') } }, { dir });
    const { endpoint } = await t.herald.createEndpoint({
      tenantId: 'acme',
      url: sink.url,
      headers: { 'X-Api-Key': { value: SECRET_HEADER, secret: true } },
      auth: { type: 'bearer', token: SECRET_TOKEN },
    });
    await t.close();
    t = await startHerald({ secrets: { key: newKey.toString('base64'), previousKeys: [oldKey.toString('base64')] } }, { dir });
    expect((await t.herald.reencryptSecrets()).rewritten).to.equal(1);
    const stored = await t.herald.store.getEndpoint(endpoint.id);
    const keyId = (sealed: string | undefined): string | undefined => sealed?.split(':')[2];
    expect(keyId(stored?.headers?.[0]?.value)).to.equal(keyIdOf(newKey));
    expect(keyId(stored?.auth?.type === 'bearer' ? stored.auth.token : undefined)).to.equal(keyIdOf(newKey));
    await t.close();
    // The old key gone: the values still open, and are sent.
    t = await startHerald({ secrets: { key: newKey.toString('base64') } }, { dir });
    await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
    await attemptsSeen(t, 1);
    expect(sink.received[0]?.headers).to.include({ 'x-api-key': SECRET_HEADER, authorization: `Bearer ${SECRET_TOKEN}` });
  });
});
