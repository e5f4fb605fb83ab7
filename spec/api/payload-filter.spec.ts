import { expect } from 'chai';
import { request } from 'undici';
import { startServer, type TestServer } from '../support/harness.ts';
import { startStatus, TOKEN, type StatusFixture } from './status-fixture.ts';

interface Reply {
  readonly status: number;
  readonly text: string;
  readonly json: any;
}

const FILTER = { 'payload.amount': { $gte: 100 }, 'payload.country': { $in: ['BR', 'PT'] } };

describe('Payload filters over the admin API', () => {
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await f?.close();
    f = undefined;
  });

  async function call(method: 'GET' | 'POST' | 'PATCH', path: string, body?: unknown, token = TOKEN): Promise<Reply> {
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await request(`${f!.base}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await response.body.text();
    return { status: response.statusCode, text, json: text === '' ? undefined : JSON.parse(text) };
  }

  function expectOk(reply: Reply, status = 200): any {
    expect(reply.status, reply.text).to.equal(status);
    return reply.json;
  }

  context('when an endpoint is created and changed', () => {
    it('keeps the filter, shows it, replaces it and removes it with null; a bad one is refused naming its place', async () => {
      f = await startStatus();
      const created = expectOk(await call('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://hooks.example/a', filter: FILTER }), 201);
      expect(created.filter).to.deep.equal(FILTER);
      expect(expectOk(await call('GET', `/v1/endpoints/${created.id}`)).filter).to.deep.equal(FILTER);
      const plain = expectOk(await call('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://hooks.example/b' }), 201);
      expect(plain.filter).to.equal(null);

      const bad = await call('PATCH', `/v1/endpoints/${created.id}`, { filter: { 'payload.amount': { $gte: true } } });
      expect(bad.status, bad.text).to.equal(400);
      expect(bad.json.error).to.deep.include({ code: 'HERALD_INVALID_INPUT', field: 'filter.payload.amount.$gte' });
      const unknown = await call('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://hooks.example/c', filter: { 'payload.a': { $regex: 'x' } } });
      expect(unknown.json.error.field, unknown.text).to.equal('filter.payload.a.$regex');
      expect(unknown.json.error.message).to.include('is not a known operator');

      expect(expectOk(await call('PATCH', `/v1/endpoints/${created.id}`, { filter: { type: 'order.paid' } })).filter).to.deep.equal({ type: 'order.paid' });
      expect(expectOk(await call('PATCH', `/v1/endpoints/${created.id}`, { concurrency: 2 })).filter, 'kept by other changes').to.deep.equal({ type: 'order.paid' });
      expect(expectOk(await call('PATCH', `/v1/endpoints/${created.id}`, { filter: null })).filter).to.equal(null);
      expect(await f.t.herald.store.getEndpoint(created.id)).to.not.have.property('filter');
    });
  });

  context('when events are published', () => {
    it('delivers to a filtered endpoint only the events it matches, numbered 1, 2, …; the endpoint without a filter gets all', async () => {
      f = await startStatus();
      sink = await startServer(() => ({ status: 204 }));
      const filtered = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/filtered`, filter: FILTER })).endpoint;
      const all = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/all` })).endpoint;
      const payloads = [{ amount: 150, country: 'BR' }, { amount: 50, country: 'BR' }, { amount: 500, country: 'US' }, { amount: 100, country: 'PT' }];
      const events = [];
      for (const payload of payloads) events.push(...(await f.t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload })));
      await sink.requests(6);
      await f.t.herald.idle();

      const bodies = (path: string) => sink!.received.filter((r) => r.path === path).map((r) => JSON.parse(r.body) as { amount: number });
      expect(bodies('/filtered').map((p) => p.amount).sort()).to.deep.equal([100, 150]);
      expect(bodies('/all')).to.have.length(4);
      const numbered = expectOk(await call('GET', `/v1/endpoints/${filtered.id}/events?after=0`));
      expect(numbered.data.map((d: { sequence: number; eventId: string }) => [d.sequence, d.eventId])).to.deep.equal([[1, events[0]!.id], [2, events[3]!.id]]);
      expect(await f.t.herald.listDeliveries({ endpointId: filtered.id })).to.have.length(2);
      expect(await f.t.herald.listDeliveries({ endpointId: all.id })).to.have.length(4);

      // A changed filter holds from the next fan-out on.
      expectOk(await call('PATCH', `/v1/endpoints/${filtered.id}`, { filter: { 'payload.country': 'US' } }));
      for (const payload of [{ amount: 7, country: 'US' }, { amount: 700, country: 'BR' }]) await f.t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload });
      await sink.requests(9);
      await f.t.herald.idle();
      expect(bodies('/filtered').map((p) => p.amount).sort((a, b) => a - b)).to.deep.equal([7, 100, 150]);
      expect(bodies('/all')).to.have.length(6);
    });

    it('still sends a test event (addressed to the endpoint) whatever its filter says', async () => {
      f = await startStatus();
      sink = await startServer(() => ({ status: 204 }));
      const filtered = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/filtered`, filter: { type: 'never.this' } })).endpoint;
      expectOk(await call('POST', `/v1/endpoints/${filtered.id}/test`), 202);
      const [received] = await sink.requests(1);
      expect(received?.path).to.equal('/filtered');
    });
  });

  describe('POST /v1/endpoints/:id/filter-test', () => {
    it('answers whether an event would reach the endpoint and which condition failed, with the saved filter or one to try', async () => {
      f = await startStatus();
      const endpoint = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://hooks.example/a', eventTypes: ['order.*'], filter: FILTER })).endpoint;
      const test = (body: unknown) => call('POST', `/v1/endpoints/${endpoint.id}/filter-test`, body);

      expect(expectOk(await test({ type: 'order.paid', payload: { amount: 120, country: 'PT' } }))).to.deep.equal({ matches: true, failed: null, filter: FILTER });
      expect(expectOk(await test({ payload: { amount: 99, country: 'PT' } }))).to.deep.include({ matches: false, failed: 'payload.amount.$gte' });
      expect(expectOk(await test({ payload: { amount: 120, country: 'US' } }))).to.deep.include({ matches: false, failed: 'payload.country.$in' });
      expect(expectOk(await test({ type: 'user.created', payload: { amount: 120, country: 'PT' } }))).to.deep.include({ matches: false, failed: 'eventTypes' });

      const tried = { $or: [{ 'payload.vip': true }, { 'payload.amount': { $gt: 1000 } }] };
      expect(expectOk(await test({ payload: { vip: true }, filter: tried }))).to.deep.equal({ matches: true, failed: null, filter: tried });
      expect(expectOk(await test({ payload: { amount: 5 }, filter: tried }))).to.deep.include({ matches: false, failed: '$or' });
      expect(expectOk(await test({ payload: { amount: 5 }, filter: null }))).to.deep.equal({ matches: true, failed: null, filter: null });
      expect((await f.t.herald.getEndpoint(endpoint.id)).filter, 'trying a filter saves nothing').to.deep.equal(FILTER);
      expect(await f.t.herald.listDeliveries({ endpointId: endpoint.id }), 'nor publishes anything').to.deep.equal([]);

      const noPayload = await test({ type: 'order.paid' });
      expect(noPayload.status).to.equal(400);
      expect(noPayload.json.error.field).to.equal('payload');
      const badFilter = await test({ payload: {}, filter: { 'payload.a': { $in: 'x' } } });
      expect(badFilter.json.error.field, badFilter.text).to.equal('filter.payload.a.$in');
      expect((await test({ payload: {}, extra: 1 })).json.error.field).to.equal('extra');
      expect((await call('POST', '/v1/endpoints/ep_missing/filter-test', { payload: {} })).status).to.equal(404);
    });

    it('is open to a tenant token on its own endpoints only', async () => {
      f = await startStatus();
      const own = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://hooks.example/a', filter: FILTER })).endpoint;
      const other = (await f.t.herald.createEndpoint({ tenantId: 'globex', url: 'https://hooks.example/b', filter: FILTER })).endpoint;
      const { token } = await f.t.herald.tenantTokens.issue('acme', { name: 'acme developers' });
      const answer = await call('POST', `/v1/endpoints/${own.id}/filter-test`, { payload: { amount: 100, country: 'BR' } }, token);
      expect(expectOk(answer)).to.deep.include({ matches: true });
      const refused = await call('POST', `/v1/endpoints/${other.id}/filter-test`, { payload: {} }, token);
      expect(refused.status).to.equal(404);
      expect(refused.json.error.code).to.equal('HERALD_NOT_FOUND');
      // And it may set its own endpoint's filter.
      expect(expectOk(await call('PATCH', `/v1/endpoints/${own.id}`, { filter: { type: 'order.paid' } }, token)).filter).to.deep.equal({ type: 'order.paid' });
    });
  });
});
