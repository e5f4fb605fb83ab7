import { expect } from 'chai';
import { request } from 'undici';
import { TEST_EVENT_TYPE } from '../../lib/producer/publisher.ts';
import type { RouteAccess } from '../../lib/tenants/caller-scope.ts';
import { verify } from '../../lib/signing/verify.ts';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { startStatus, TOKEN, type StatusFixture } from './status-fixture.ts';

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

interface Reply {
  readonly status: number;
  readonly text: string;
  readonly json: any;
}

const DAY = 24 * 60 * 60 * 1_000;

describe('Tenant tokens and the scoped admin API', () => {
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await f?.close();
    f = undefined;
    await sink?.close();
    sink = undefined;
  });

  async function call(method: Method, path: string, token: string | null, body?: unknown): Promise<Reply> {
    const headers: Record<string, string> = {};
    if (token !== null) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await request(`${f!.base}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await response.body.text();
    const isJson = String(response.headers['content-type'] ?? '').startsWith('application/json');
    return { status: response.statusCode, text, json: isJson ? JSON.parse(text) : undefined };
  }

  const admin = (method: Method, path: string, body?: unknown) => call(method, path, TOKEN, body);

  async function issue(tenantId: string, body?: unknown): Promise<string> {
    const reply = await admin('POST', `/v1/tenants/${tenantId}/tokens`, body);
    expect(reply.status, reply.text).to.equal(201);
    return reply.json.token as string;
  }

  function expectError(reply: Reply, status: number, code: string, field?: string): void {
    expect(reply.status, reply.text).to.equal(status);
    expect(reply.json?.error?.code, reply.text).to.equal(code);
    if (field !== undefined) expect(reply.json.error.field, reply.text).to.equal(field);
  }

  describe('issuing, listing and revoking', () => {
    it('shows the token once, lists it without its secret, and refuses it at once when revoked', async () => {
      f = await startStatus();
      const created = await admin('POST', '/v1/tenants/acme/tokens', { name: 'acme developers' });
      expect(created.status, created.text).to.equal(201);
      const { token, id } = created.json as { token: string; id: string };
      expect(token).to.match(/^htk_[0-9a-f]{32}_[A-Za-z0-9_-]{43}$/);
      expect(token.startsWith(`${id}_`), 'the token starts with its id').to.equal(true);
      expect(created.json).to.include({ tenantId: 'acme', name: 'acme developers', expiresAt: null });

      const listed = await admin('GET', '/v1/tenants/acme/tokens');
      expect(listed.json.data).to.have.length(1);
      expect(listed.json.data[0]).to.deep.equal({ id, tenantId: 'acme', name: 'acme developers', createdAt: created.json.createdAt, expiresAt: null });
      expect(listed.text).to.not.include(token.slice(id.length + 1));
      expect((await admin('GET', '/v1/tenants/globex/tokens')).json.data).to.deep.equal([]);

      // Only a digest is stored: the store does not hold the secret.
      const stored = await f.t.herald.store.getTenantToken(id);
      expect(stored?.secretHash).to.match(/^[0-9a-f]{64}$/);
      expect(JSON.stringify(stored)).to.not.include(token.slice(id.length + 1));

      expect((await call('GET', '/v1/endpoints', token)).status).to.equal(200);
      expect((await admin('DELETE', `/v1/tenants/acme/tokens/${id}`)).status).to.equal(204);
      expectError(await call('GET', '/v1/endpoints', token), 401, 'HERALD_UNAUTHORIZED');
      expectError(await admin('DELETE', `/v1/tenants/acme/tokens/${id}`), 404, 'HERALD_NOT_FOUND', 'tokenId');
    });

    it('takes no body at all, and refuses a bad name, an expiry in the past and unknown fields naming the field', async () => {
      f = await startStatus();
      const bare = await call('POST', '/v1/tenants/acme/tokens', TOKEN);
      expect(bare.status, bare.text).to.equal(201);
      expect(bare.json.name).to.equal('');
      expectError(await admin('POST', '/v1/tenants/acme/tokens', { name: 42 }), 400, 'HERALD_INVALID_INPUT', 'name');
      expectError(await admin('POST', '/v1/tenants/acme/tokens', { name: 'x'.repeat(129) }), 400, 'HERALD_INVALID_INPUT', 'name');
      expect((await admin('POST', '/v1/tenants/acme/tokens', { name: 'x'.repeat(128) })).status).to.equal(201);
      expectError(await admin('POST', '/v1/tenants/acme/tokens', { expiresAt: f.t.clock.now() - 1 }), 400, 'HERALD_INVALID_INPUT', 'expiresAt');
      expectError(await admin('POST', '/v1/tenants/acme/tokens', { expiresAt: '2026-02-30T00:00:00Z' }), 400, 'HERALD_INVALID_INPUT', 'expiresAt');
      expectError(await admin('POST', '/v1/tenants/acme/tokens', { scope: 'all' }), 400, 'HERALD_INVALID_INPUT', 'scope');
      expectError(await admin('POST', '/v1/tenants/ac%20me/tokens', {}), 400, 'HERALD_INVALID_INPUT', 'tenantId');
      expect((await admin('GET', '/v1/tenants/acme/tokens')).json.data).to.have.length(2);
    });

    it('refuses a token past its expiresAt with 401', async () => {
      f = await startStatus();
      const token = await issue('acme', { expiresAt: new Date(f.t.clock.now() + DAY).toISOString().replace(/\.\d+Z$/, 'Z') });
      expect((await call('GET', '/v1/endpoints', token)).status).to.equal(200);
      f.t.clock.advance(DAY);
      expectError(await call('GET', '/v1/endpoints', token), 401, 'HERALD_UNAUTHORIZED');
    });

    it('refuses a made-up token, and a real one with its secret changed, with 401', async () => {
      f = await startStatus();
      const token = await issue('acme');
      const changed = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
      expectError(await call('GET', '/v1/endpoints', changed), 401, 'HERALD_UNAUTHORIZED');
      expectError(await call('GET', '/v1/endpoints', `htk_${'0'.repeat(32)}_${'A'.repeat(43)}`), 401, 'HERALD_UNAUTHORIZED');
      expectError(await call('GET', '/v1/endpoints', 'not-a-token'), 401, 'HERALD_UNAUTHORIZED');
    });
  });

  describe('what a tenant token may do', () => {
    it('creates, reads, changes, tests, rotates and deletes its own endpoint; the test event arrives signed', async () => {
      f = await startStatus();
      sink = await startServer(() => ({ status: 200, body: 'thanks' }));
      const token = await issue('acme');
      const tenant = (method: Method, path: string, body?: unknown) => call(method, path, token, body);

      const created = await tenant('POST', '/v1/endpoints', { url: `${sink.url}/hooks`, eventTypes: ['invoice.*'] });
      expect(created.status, created.text).to.equal(201);
      expect(created.json.tenantId, 'the token\'s tenant, filled in').to.equal('acme');
      const id = created.json.id as string;
      expectError(await tenant('POST', '/v1/endpoints', { tenantId: 'globex', url: `${sink.url}/x` }), 400, 'HERALD_INVALID_INPUT', 'tenantId');
      expectError(await tenant('POST', '/v1/endpoints', { id: 'ep_mine', url: `${sink.url}/x` }), 400, 'HERALD_INVALID_INPUT', 'id');
      expect((await tenant('POST', '/v1/endpoints', { tenantId: 'acme', url: `${sink.url}/y` })).status).to.equal(201);

      expect((await tenant('PATCH', `/v1/endpoints/${id}`, { description: 'billing' })).json.description).to.equal('billing');
      expect((await tenant('GET', `/v1/endpoints/${id}`)).json.description).to.equal('billing');

      const sent = await tenant('POST', `/v1/endpoints/${id}/test`);
      expect(sent.status, sent.text).to.equal(202);
      expect(sent.json).to.include({ type: TEST_EVENT_TYPE, tenantId: 'acme', endpointId: id });
      expect(sent.json.payload).to.include({ test: true, endpointId: id });
      await attemptsSeen(f.t, 1);
      const [received] = await sink.requests(1);
      expect(received?.headers['webhook-id']).to.equal(sent.json.id);
      verify({ payload: received?.body ?? '', headers: received?.headers ?? {}, secret: created.json.secret, nowSec: Math.floor(f.t.clock.now() / 1000) });

      await f.t.herald.idle();
      const delivery = await tenant('GET', `/v1/deliveries/${sent.json.deliveryId}`);
      expect(delivery.json).to.include({ status: 'delivered', eventType: TEST_EVENT_TYPE });
      expect(delivery.json.payload).to.deep.equal(sent.json.payload);
      const attempts = await tenant('GET', `/v1/deliveries/${sent.json.deliveryId}/attempts`);
      expect(attempts.json.data[0].outcome).to.include({ kind: 'response', status: 200, body: 'thanks' });
      expect(attempts.json.data[0].durationMs).to.be.a('number');

      const rotated = await tenant('POST', `/v1/endpoints/${id}/rotate-secret`);
      expect(rotated.json.secret).to.match(/^whsec_/).and.not.equal(created.json.secret);
      expect((await tenant('POST', `/v1/endpoints/${id}/disable`)).json.status).to.equal('disabled');
      expect((await tenant('POST', `/v1/endpoints/${id}/enable`)).json.status).to.equal('enabled');
      expect((await tenant('DELETE', `/v1/endpoints/${id}`)).status).to.equal(204);
      expectError(await tenant('GET', `/v1/endpoints/${id}`), 404, 'HERALD_NOT_FOUND', 'endpointId');
    });

    it('replays its own dead letter and failure group, and sees its failures and stats', async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      let answer = 404;
      sink = await startServer(() => ({ status: answer }));
      const { endpoint } = await f.t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/hooks` });
      await f.t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: { n: 1 } });
      await attemptsSeen(f.t, 1);
      await f.t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: { n: 2 } });
      await attemptsSeen(f.t, 2);
      await f.t.herald.idle();
      const token = await issue('acme');

      const letters = await call('GET', '/v1/dead-letters', token);
      expect(letters.json.data).to.have.length(2);
      const letter = letters.json.data[1];
      expect((await call('GET', `/v1/dead-letters/${letter.id}`, token)).json.payload).to.equal('{"n":1}');
      const groups = await call('GET', '/v1/failures', token);
      expect(groups.json.data.map((g: any) => `${g.endpointId} ${g.kind}`)).to.deep.equal([`${endpoint.id} http-404`]);
      await f.t.herald.flushDeliveryMinutes();
      const stats = await call('GET', '/v1/stats', token);
      expect(stats.json.endpoints).to.deep.equal([{ ...stats.json.endpoints[0], endpointId: endpoint.id, attempts: 2, failures: 2 }]);
      expect((await admin('GET', '/v1/stats?tenantId=globex')).json.endpoints, "another tenant's, asked by the admin").to.deep.equal([]);

      answer = 200;
      expect((await call('POST', `/v1/dead-letters/${letter.id}/replay`, token)).status).to.equal(202);
      await attemptsSeen(f.t, 3);
      expect(f.t.attempts.at(-1)?.outcome).to.include({ kind: 'response', status: 200 });
      const group = await call('POST', '/v1/failures/replay', token, { endpointId: endpoint.id, kind: 'http-404' });
      expect(group.status, group.text).to.equal(202);
      expect(group.json).to.deep.equal({ deadLetters: 1, retrying: 0 });
      await attemptsSeen(f.t, 4);
    });

    it("reads the delivery series of its own endpoints: `all` sums only them; another tenant's endpoint or tenantId answers 404", async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      let globexSink: TestServer | undefined;
      sink = await startServer(() => ({ status: 200 }));
      try {
        globexSink = await startServer(() => ({ status: 503 }));
        // acme: 2 delivered. globex, in the same store: 3 attempts, each a retry scheduled.
        const acme = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/acme` })).endpoint.id;
        const globex = (await f.t.herald.createEndpoint({ tenantId: 'globex', url: `${globexSink.url}/globex` })).endpoint.id;
        await f.t.herald.publish([1, 2].map((n) => ({ tenantId: 'acme', type: 'invoice.paid', endpointId: acme, payload: { n } })));
        await f.t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'globex', type: 'invoice.paid', endpointId: globex, payload: { n } })));
        await attemptsSeen(f.t, 5);
        await f.t.herald.idle();
        await f.t.herald.flushDeliveryMinutes();
        const token = await issue('acme');
        const counts = (reply: Reply) => {
          expect(reply.status, reply.text).to.equal(200);
          const sum = (field: string) => reply.json.points.reduce((n: number, p: Record<string, number>) => n + (p[field] ?? 0), 0);
          return { attempts: sum('attempts'), delivered: sum('delivered'), retriesScheduled: sum('retriesScheduled') };
        };

        expect(counts(await admin('GET', '/v1/stats/series?endpointId=all')), "the admin's: both tenants").to.deep.equal({ attempts: 5, delivered: 2, retriesScheduled: 3 });
        for (const path of ['/v1/stats/series?endpointId=all', '/v1/stats/series?endpointId=all&window=24h', '/v1/stats/series?endpointId=all&tenantId=acme']) {
          expect(counts(await call('GET', path, token)), path).to.deep.equal({ attempts: 2, delivered: 2, retriesScheduled: 0 });
        }
        expect(counts(await call('GET', `/v1/stats/series?endpointId=${acme}`, token))).to.deep.equal({ attempts: 2, delivered: 2, retriesScheduled: 0 });

        const other = await call('GET', `/v1/stats/series?endpointId=${globex}`, token);
        expectError(other, 404, 'HERALD_NOT_FOUND', 'endpointId');
        const unknown = await call('GET', '/v1/stats/series?endpointId=ep_nobody', token);
        expect(other.text.replaceAll(globex, 'ep_nobody'), 'word for word what an unknown id answers').to.equal(unknown.text);
        expectError(await call('GET', '/v1/stats/series?endpointId=all&tenantId=globex', token), 404, 'HERALD_NOT_FOUND', 'tenantId');
        expectError(await call('GET', `/v1/stats/series?endpointId=${globex}&tenantId=globex`, token), 404, 'HERALD_NOT_FOUND', 'tenantId');
      } finally {
        await globexSink?.close();
      }
    });

    it('is refused the admin-only routes with 403 HERALD_FORBIDDEN naming the route', async () => {
      f = await startStatus();
      await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/hooks' });
      const token = await issue('acme');
      const refused: Array<[Method, string, unknown?]> = [
        ['GET', '/v1/status'],
        ['POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: {} }],
        ['POST', '/v1/dead-letters/replay', { tenantId: 'acme' }],
        ['POST', '/v1/dead-letters/acknowledge', { ids: ['dl_1'], note: 'n', by: 'b' }],
        ['GET', '/v1/tenants/acme/tokens'],
        ['POST', '/v1/tenants/acme/tokens', {}],
      ];
      for (const [method, path, body] of refused) {
        const reply = await call(method, path, token, body);
        expectError(reply, 403, 'HERALD_FORBIDDEN');
        expect(reply.json.error.message).to.match(new RegExp(`^${method} /v1/\\S+ needs the admin token`));
      }
      expect(await f.t.herald.store.unfannedEvents(10), 'nothing published').to.deep.equal([]);
      expect((await admin('GET', '/v1/tenants/acme/tokens')).json.data, 'no token issued').to.have.length(1);
    });
  });

  describe('isolation between tenants', () => {
    it("answers every route with another tenant's ids 404 (or 403 when admin-only), lists none of its data, and changes nothing", async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      const { herald } = f.t;
      sink = await startServer(() => ({ status: 404, body: 'gone away' }));
      // Both tenants: an endpoint, a delivery with its attempt, a dead letter, a token.
      const seeded: Record<'acme' | 'globex', { endpoint: string; delivery: string; deadLetter: string; token: string }> = {} as never;
      for (const tenantId of ['acme', 'globex'] as const) {
        const { endpoint } = await herald.createEndpoint({ tenantId, url: `${sink.url}/${tenantId}` });
        await herald.publish({ tenantId, type: 'invoice.paid', payload: { tenantId } });
        await attemptsSeen(f.t, tenantId === 'acme' ? 1 : 2);
        await herald.idle();
        const [letter] = await herald.listDeadLetters({ tenantId });
        seeded[tenantId] = { endpoint: endpoint.id, delivery: letter!.deliveryId, deadLetter: letter!.id, token: await issue(tenantId) };
      }
      // The stats are the cluster's, read from the stored delivery minutes: write this node's now.
      await herald.flushDeliveryMinutes();
      const b = seeded.globex;
      const snapshot = async () => {
        const deliveries = await herald.store.listDeliveries({ tenantId: 'globex' });
        return JSON.stringify({
          endpoints: await herald.store.listEndpoints({ tenantId: 'globex' }),
          deliveries,
          attempts: await Promise.all(deliveries.map((d) => herald.store.listAttempts(d.id))),
          deadLetters: await herald.store.listDeadLetters({ tenantId: 'globex', includeReplayed: true }),
          tokens: await herald.store.listTenantTokens('globex'),
        });
      };
      const before = await snapshot();

      const idOf = { endpoint: b.endpoint, delivery: b.delivery, 'dead letter': b.deadLetter } as const;
      const fill = (path: string, access: RouteAccess): string =>
        path.replace(/:(\w+)/g, (_, key: string) => {
          if (key === 'tenantId') return 'globex';
          const kind = typeof access === 'object' ? access.tenant.params?.[key] : undefined;
          return kind === undefined ? b.deadLetter : idOf[kind];
        });
      // A route that takes no id in its path is reached with the other tenant's ids where it takes them.
      const withoutParams: Record<string, { path?: string; body?: unknown; status: number; field: string }> = {
        'POST /v1/endpoints': { body: { tenantId: 'globex', url: `${sink.url}/mine` }, status: 400, field: 'tenantId' },
      };
      // Routes that read what belongs to no tenant (the event-type catalog): nothing of another tenant's to reach.
      const global = new Set(['GET /v1/event-types', 'GET /v1/event-types/:name']);
      const cases: Array<{ method: Method; path: string; body?: unknown; status: number; field?: string }> = [];
      for (const route of f.server.routes) {
        if (route.access === 'open') continue;
        const method = route.method as Method;
        const name = `${method} ${route.path}`;
        if (global.has(name)) continue;
        const body = method === 'POST' || method === 'PATCH' ? {} : undefined;
        if (route.access === 'admin') {
          cases.push({ method, path: fill(route.path, route.access), ...(body === undefined ? {} : { body }), status: 403 });
          continue;
        }
        const rule = route.access.tenant;
        const params = Object.keys(rule.params ?? {});
        if (params.length > 0) {
          cases.push({ method, path: fill(route.path, route.access), ...(body === undefined ? {} : { body }), status: 404 });
          continue;
        }
        let covered = false;
        if (rule.listsTenant === true) {
          cases.push({ method, path: `${route.path}?tenantId=globex`, status: 404, field: 'tenantId' });
          covered = true;
        }
        for (const key of Object.keys(rule.query ?? {})) {
          cases.push({ method, path: `${route.path}?${key}=${b.endpoint}`, status: 404, field: key });
          covered = true;
        }
        for (const key of Object.keys(rule.body ?? {})) {
          cases.push({ method, path: route.path, body: { [key]: b.endpoint, kind: 'http-404' }, status: 404, field: key });
          covered = true;
        }
        const special = withoutParams[name];
        if (special !== undefined) {
          cases.push({ method, path: special.path ?? route.path, body: special.body, status: special.status, field: special.field });
          covered = true;
        }
        expect(covered, `${name}: say in this test how another tenant's ids reach it`).to.equal(true);
      }
      expect(cases.length).to.be.greaterThan(25);

      for (const c of cases) {
        const reply = await call(c.method, c.path, seeded.acme.token, c.body);
        expectError(reply, c.status, c.status === 403 ? 'HERALD_FORBIDDEN' : c.status === 404 ? 'HERALD_NOT_FOUND' : 'HERALD_INVALID_INPUT', c.field);
        // Word for word what an unknown id answers: nothing tells that it exists.
        expect(reply.text, `${c.method} ${c.path}`).to.not.include('globex"').and.not.include(sink.url);
      }

      // Listings hold the caller's data only.
      for (const path of ['/v1/endpoints', '/v1/deliveries', '/v1/dead-letters?includeReplayed=true', '/v1/failures', '/v1/stats']) {
        const reply = await call('GET', path, seeded.acme.token);
        expect(reply.status, `${path}: ${reply.text}`).to.equal(200);
        for (const id of [b.endpoint, b.delivery, b.deadLetter]) expect(reply.text, path).to.not.include(id);
        expect(reply.text, path).to.include(seeded.acme.endpoint);
      }
      expect(await snapshot(), "the other tenant's data").to.equal(before);
      expect((await call('GET', `/v1/endpoints/${seeded.acme.endpoint}`, seeded.acme.token)).status, 'its own still answers').to.equal(200);
    });
  });
});
