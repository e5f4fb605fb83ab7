import { expect } from 'chai';
import { Client, request } from 'undici';
import type { ConfigOverrides } from '../../lib/config/config.ts';
import { verify } from '../../lib/signing/verify.ts';
import { StatusServer } from '../../lib/api/status-server.ts';
import { planDeliveries } from '../../lib/engine/fanout.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

const TOKEN = 'test-admin-token-0123456789';

interface ApiReply {
  readonly status: number;
  readonly text: string;
  readonly json: any;
}

interface ErrorBody {
  readonly code: string;
  readonly message: string;
  readonly field?: string;
  readonly rule?: string;
}

describe('StatusServer (admin API over HTTP)', () => {
  let t: TestHerald | undefined;
  let status: StatusServer | undefined;
  let base = '';
  let sink: TestServer | undefined;
  let otherSink: TestServer | undefined;

  async function boot(overrides: ConfigOverrides = {}, options: { start?: boolean } = {}): Promise<TestHerald> {
    t = await startHerald(overrides, options);
    status = new StatusServer(t.herald, { host: '127.0.0.1', port: 0, adminToken: TOKEN });
    base = await status.listen();
    return t;
  }

  async function api(
    method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'PUT',
    path: string,
    body?: unknown,
    options: { token?: string | null; raw?: string } = {},
  ): Promise<ApiReply> {
    const token = options.token === undefined ? TOKEN : options.token;
    const headers: Record<string, string> = {};
    if (token !== null) headers.authorization = `Bearer ${token}`;
    let payload: string | undefined = options.raw;
    if (body !== undefined) payload = JSON.stringify(body);
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const response = await request(`${base}${path}`, { method, headers, ...(payload === undefined ? {} : { body: payload }) });
    const text = await response.body.text();
    const isJson = String(response.headers['content-type'] ?? '').startsWith('application/json');
    return { status: response.statusCode, text, json: isJson ? JSON.parse(text) : undefined };
  }

  function expectError(reply: ApiReply, status: number, code: string, field?: string): ErrorBody {
    expect(reply.status, reply.text).to.equal(status);
    const error = reply.json?.error as ErrorBody;
    expect(error, reply.text).to.be.an('object');
    expect(error.code).to.equal(code);
    expect(error.message).to.be.a('string').and.not.equal('');
    if (field !== undefined) {
      expect(error.field, reply.text).to.equal(field);
      expect(error.rule, reply.text).to.be.a('string').and.not.equal('');
      expect(error.message).to.include(field);
    }
    return error;
  }

  async function createEndpoint(fields: Record<string, unknown>): Promise<{ id: string; secret: string }> {
    const reply = await api('POST', '/v1/endpoints', { tenantId: 'acme', ...fields });
    expect(reply.status, reply.text).to.equal(201);
    return { id: reply.json.id as string, secret: reply.json.secret as string };
  }

  afterEach(async () => {
    await status?.close();
    status = undefined;
    await sink?.close();
    sink = undefined;
    await otherSink?.close();
    otherSink = undefined;
    await t?.close();
    t = undefined;
  });

  describe('health and readiness', () => {
    context('when the herald is started', () => {
      it('answers /healthz 200 without a token', async () => {
        await boot();
        const reply = await api('GET', '/healthz', undefined, { token: null });
        expect(reply.status).to.equal(200);
        expect(reply.json).to.deep.equal({ status: 'ok' });
      });

      it('answers /readyz 200 ready without a token, since it holds leases', async () => {
        await boot();
        const reply = await api('GET', '/readyz', undefined, { token: null });
        expect(reply.status, reply.text).to.equal(200);
        expect(reply.json.status).to.equal('ready');
        expect(reply.json.slotsOwned).to.be.greaterThan(0);
      });
    });

    context('when the herald is not started', () => {
      it('answers /readyz 503 with the reason', async () => {
        await boot({}, { start: false });
        const reply = await api('GET', '/readyz', undefined, { token: null });
        expect(reply.status).to.equal(503);
        expect(reply.json.status).to.equal('not ready');
        expect(reply.json.reason).to.match(/lease/);
      });
    });
  });

  describe('authorization', () => {
    context('when a /v1 route is called without a bearer token', () => {
      it('answers 401 HERALD_UNAUTHORIZED', async () => {
        await boot();
        expectError(await api('GET', '/v1/endpoints', undefined, { token: null }), 401, 'HERALD_UNAUTHORIZED');
        expectError(await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: {} }, { token: null }), 401, 'HERALD_UNAUTHORIZED');
      });
    });

    context('when the bearer token is wrong', () => {
      it('answers 401 HERALD_UNAUTHORIZED, whatever its length', async () => {
        await boot();
        expectError(await api('GET', '/v1/status', undefined, { token: 'wrong' }), 401, 'HERALD_UNAUTHORIZED');
        expectError(await api('GET', '/v1/status', undefined, { token: `${TOKEN.slice(0, -1)}X` }), 401, 'HERALD_UNAUTHORIZED');
      });
    });

    context('when an unknown /v1 route or a wrong method is called without a token', () => {
      it('answers 401 rather than revealing which routes exist', async () => {
        await boot();
        expectError(await api('GET', '/v1/nothing-here', undefined, { token: null }), 401, 'HERALD_UNAUTHORIZED');
        expectError(await api('PUT', '/v1/endpoints', undefined, { token: null }), 401, 'HERALD_UNAUTHORIZED');
      });
    });

    context('when many requests with bodies are refused on one keep-alive connection', () => {
      it('answers each, and leaves no listener behind on the socket (no MaxListenersExceededWarning)', async () => {
        await boot();
        const warnings: string[] = [];
        const onWarning = (warning: Error): void => void warnings.push(warning.name);
        process.on('warning', onWarning);
        const client = new Client(base, { pipelining: 1 });
        try {
          for (let i = 0; i < 15; i++) {
            const response = await client.request({
              path: '/v1/events',
              method: 'POST',
              headers: { authorization: 'Bearer wrong', 'content-type': 'application/json' },
              body: JSON.stringify({ tenantId: 'acme', type: 'a.b', payload: { i } }),
            });
            expect(response.statusCode).to.equal(401);
            await response.body.text();
          }
          // A warning is emitted on the tick after the listener that crosses the limit is added.
          await new Promise<void>((resolve) => setImmediate(resolve));
        } finally {
          process.off('warning', onWarning);
          await client.close();
        }
        expect(warnings).to.not.include('MaxListenersExceededWarning');
      });
    });

    context('when the token is right', () => {
      it('answers /v1/status with this node', async () => {
        const { herald } = await boot();
        const reply = await api('GET', '/v1/status');
        expect(reply.status).to.equal(200);
        expect(reply.json.node).to.equal(herald.nodeId);
        expect(reply.json.slotsOwned).to.equal(herald.leases.length);
      });
    });
  });

  describe('endpoints', () => {
    context('when an endpoint goes through its lifecycle', () => {
      it('creates, lists, patches, disables, enables, rotates and deletes it, never listing a secret', async () => {
        await boot();
        const created = await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://example.com/hooks', eventTypes: ['invoice.*'] });
        expect(created.status, created.text).to.equal(201);
        expect(created.json.secret).to.match(/^whsec_/);
        expect(created.json).to.include({ tenantId: 'acme', url: 'https://example.com/hooks', status: 'enabled', secretCount: 1 });
        expect(created.json).to.not.have.property('secrets');
        const id = created.json.id as string;

        const list = await api('GET', '/v1/endpoints');
        expect(list.status).to.equal(200);
        expect(list.json.data.map((e: { id: string }) => e.id)).to.deep.equal([id]);
        expect(list.text).to.not.include('whsec_');

        const one = await api('GET', `/v1/endpoints/${id}`);
        expect(one.status).to.equal(200);
        expect(one.json).to.include({ id, secretCount: 1 });
        expect(one.text).to.not.include('whsec_');

        const patched = await api('PATCH', `/v1/endpoints/${id}`, { url: 'https://example.org/v2', eventTypes: ['order.created'], timeoutMs: 5_000 });
        expect(patched.status, patched.text).to.equal(200);
        expect(patched.json).to.include({ url: 'https://example.org/v2', timeoutMs: 5_000 });
        expect(patched.json.eventTypes).to.deep.equal(['order.created']);
        expect(patched.text).to.not.include('whsec_');
        expect((await api('GET', `/v1/endpoints/${id}`)).json).to.include({ url: 'https://example.org/v2', timeoutMs: 5_000 });

        const disabled = await api('POST', `/v1/endpoints/${id}/disable`);
        expect(disabled.status).to.equal(200);
        expect(disabled.json).to.include({ status: 'disabled', disabledReason: 'operator' });
        const enabled = await api('POST', `/v1/endpoints/${id}/enable`);
        expect(enabled.status).to.equal(200);
        expect(enabled.json).to.include({ status: 'enabled', disabledReason: null });

        const rotated = await api('POST', `/v1/endpoints/${id}/rotate-secret`);
        expect(rotated.status).to.equal(200);
        expect(rotated.json.secret).to.match(/^whsec_/);
        expect(rotated.json.secret).to.not.equal(created.json.secret);
        expect(rotated.json.secretCount).to.equal(2);
        expect(rotated.json.previousSecretExpiresAt).to.be.a('number');
        const afterRotation = await api('GET', `/v1/endpoints/${id}`);
        expect(afterRotation.json.secretCount).to.equal(2);
        expect(afterRotation.text).to.not.include('whsec_');

        const deleted = await api('DELETE', `/v1/endpoints/${id}`);
        expect(deleted.status).to.equal(204);
        expect(deleted.text).to.equal('');
        expectError(await api('GET', `/v1/endpoints/${id}`), 404, 'HERALD_NOT_FOUND');
        expectError(await api('DELETE', `/v1/endpoints/${id}`), 404, 'HERALD_NOT_FOUND');
        expect((await api('GET', '/v1/endpoints')).json.data).to.deep.equal([]);
      });
    });

    context('when an endpoint has a rate limit', () => {
      it('creates, shows, patches and lifts it; refuses a bad one naming the field, leaving the limit unchanged', async () => {
        await boot();
        const plain = await createEndpoint({ url: 'https://example.com/plain' });
        expect((await api('GET', `/v1/endpoints/${plain.id}`)).json.rateLimit).to.equal(null);
        const created = await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://example.com', rateLimit: { perSecond: 10 } });
        expect(created.status, created.text).to.equal(201);
        const id = created.json.id as string;
        expect(created.json.rateLimit).to.deep.equal({ perSecond: 10, burst: 10 });
        expect((await api('GET', `/v1/endpoints/${id}`)).json.rateLimit).to.deep.equal({ perSecond: 10, burst: 10 });

        const patched = await api('PATCH', `/v1/endpoints/${id}`, { rateLimit: { perSecond: 0.5, burst: 5 } });
        expect(patched.json.rateLimit).to.deep.equal({ perSecond: 0.5, burst: 5 });
        const bad = expectError(await api('PATCH', `/v1/endpoints/${id}`, { rateLimit: { perSecond: 0 } }), 400, 'HERALD_INVALID_INPUT', 'rateLimit.perSecond');
        expect(bad.rule).to.equal('must be a number from 0.01 to 10000 (got 0)');
        expectError(await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://example.com', rateLimit: { perSecond: 1, burst: 0 } }), 400, 'HERALD_INVALID_INPUT', 'rateLimit.burst');
        expect((await api('GET', `/v1/endpoints/${id}`)).json.rateLimit, 'unchanged by the refused patch').to.deep.equal({ perSecond: 0.5, burst: 5 });

        const lifted = await api('PATCH', `/v1/endpoints/${id}`, { rateLimit: null });
        expect(lifted.status, lifted.text).to.equal(200);
        expect(lifted.json.rateLimit).to.equal(null);
        expect((await api('GET', '/v1/endpoints')).json.data.map((e: { rateLimit: unknown }) => e.rateLimit)).to.deep.equal([null, null]);
      });
    });

    context('when the endpoint body is invalid', () => {
      it('refuses a URL that does not parse, naming url', async () => {
        await boot();
        expectError(await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'not a url' }), 400, 'HERALD_INVALID_INPUT', 'url');
      });

      it('refuses a URL that is not http(s), naming url', async () => {
        await boot();
        const error = expectError(await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'ftp://x' }), 400, 'HERALD_INVALID_INPUT', 'url');
        expect(error.rule).to.match(/http/);
      });

      it('refuses timeoutMs below 1 s and above 30 s, naming timeoutMs', async () => {
        await boot();
        for (const timeoutMs of [500, 31_000]) {
          const reply = await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://example.com', timeoutMs });
          const error = expectError(reply, 400, 'HERALD_INVALID_INPUT', 'timeoutMs');
          expect(error.rule).to.include(String(timeoutMs));
        }
      });

      it('refuses a custom schedule with a zero or unparsable duration, naming retry.schedule[0]', async () => {
        await boot();
        for (const schedule of [['PT0S'], ['soon']]) {
          const reply = await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://example.com', retry: { schedule } });
          expectError(reply, 400, 'HERALD_INVALID_INPUT', 'retry.schedule[0]');
        }
      });

      it('refuses an unknown retry preset, naming retry.preset', async () => {
        await boot();
        const reply = await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://example.com', retry: { preset: 'sometimes' } });
        const error = expectError(reply, 400, 'HERALD_INVALID_INPUT', 'retry.preset');
        expect(error.rule).to.include('sometimes');
      });

      it('takes a retry formula and patches it, and refuses a broken one naming its field and rule', async () => {
        await boot();
        const retry = { initial: 'PT30S', multiplier: 2, max: 'PT6H', attempts: 9, window: 'P2D', jitter: 'full' };
        const { id } = await createEndpoint({ url: 'https://example.com', retry });
        expect((await api('GET', `/v1/endpoints/${id}`)).json.retry).to.deep.equal(retry);
        const decorrelated = { initial: 'PT1S', max: 'PT1H', window: 'P1D', jitter: 'decorrelated' };
        expect((await api('PATCH', `/v1/endpoints/${id}`, { retry: decorrelated })).json.retry).to.deep.equal(decorrelated);

        const cases: Array<[Record<string, unknown>, string, string]> = [
          [{ ...retry, multiplier: 0 }, 'retry.multiplier', 'must be a number from 1 to 10 (got 0)'],
          [{ ...retry, window: 'P3M' }, 'retry.window', 'must be at most 30 days, P30D (got "P3M")'],
          [{ initial: 'PT30S', multiplier: 2, max: 'PT6H' }, 'retry', 'a formula must have "attempts", "window" or both, to say when retrying stops'],
          [{ preset: 'default', jitter: 'decorrelated' }, 'retry.jitter', '"decorrelated" needs a formula ("initial", "max"); a preset or a schedule takes "±20%", "full" or "equal"'],
        ];
        for (const [bad, field, rule] of cases) {
          const error = expectError(await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://example.com', retry: bad }), 400, 'HERALD_INVALID_INPUT', field);
          expect(error.rule).to.equal(rule);
        }
        expectError(await api('PATCH', `/v1/endpoints/${id}`, { retry: { ...retry, attempts: 100 } }), 400, 'HERALD_INVALID_INPUT', 'retry.attempts');
        expect((await api('GET', `/v1/endpoints/${id}`)).json.retry, 'unchanged by the refused patch').to.deep.equal(decorrelated);
      });

      it('refuses an unknown field, naming it', async () => {
        await boot();
        const reply = await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://example.com', secret: 'whsec_mine' });
        expectError(reply, 400, 'HERALD_INVALID_INPUT', 'secret');
      });

      it('refuses an invalid patch the same way, and leaves the endpoint unchanged', async () => {
        await boot();
        const { id } = await createEndpoint({ url: 'https://example.com' });
        expectError(await api('PATCH', `/v1/endpoints/${id}`, { url: 'ftp://x' }), 400, 'HERALD_INVALID_INPUT', 'url');
        expectError(await api('PATCH', `/v1/endpoints/${id}`, { tenantId: 'other' }), 400, 'HERALD_INVALID_INPUT', 'tenantId');
        expect((await api('GET', `/v1/endpoints/${id}`)).json.url).to.equal('https://example.com/');
      });

      it('refuses a body that is not JSON, naming body', async () => {
        await boot();
        expectError(await api('POST', '/v1/endpoints', undefined, { raw: '{"tenantId": "acme",' }), 400, 'HERALD_INVALID_INPUT', 'body');
        expectError(await api('POST', '/v1/endpoints', undefined, { raw: '' }), 400, 'HERALD_INVALID_INPUT', 'body');
        expectError(await api('POST', '/v1/endpoints', ['not', 'an', 'object']), 400, 'HERALD_INVALID_INPUT', 'body');
      });

      it('refuses an id that exists already with 409', async () => {
        await boot();
        await createEndpoint({ id: 'ep-1', url: 'https://example.com' });
        expectError(await api('POST', '/v1/endpoints', { id: 'ep-1', tenantId: 'acme', url: 'https://example.com' }), 409, 'HERALD_CONFLICT');
      });
    });

    context('when a path parameter is not valid percent-encoding', () => {
      it('answers 400 naming the parameter instead of failing with 500', async () => {
        await boot();
        expectError(await api('GET', '/v1/endpoints/%E0%A4%A'), 400, 'HERALD_INVALID_INPUT', 'id');
      });
    });
  });

  describe('events and deliveries', () => {
    context('when an event is published over HTTP', () => {
      it('answers 202 with the event, delivers it, and lists the delivery and its attempt', async () => {
        const th = await boot();
        sink = await startServer(() => ({ status: 200 }));
        const { id: endpointId } = await createEndpoint({ url: `${sink.url}/hooks` });

        const published = await api('POST', '/v1/events', { tenantId: 'acme', type: 'invoice.paid', payload: { amount: 42 } });
        expect(published.status, published.text).to.equal(202);
        const eventId = published.json.id as string;
        expect(eventId).to.be.a('string').and.not.equal('');
        expect(published.json).to.deep.include({ tenantId: 'acme', type: 'invoice.paid', payload: { amount: 42 } });

        const [received] = await sink.requests(1);
        expect(received?.headers['webhook-id']).to.equal(eventId);
        expect(JSON.parse(received?.body ?? '')).to.deep.equal({ amount: 42 });
        await attemptsSeen(th, 1);

        const deliveries = await api('GET', `/v1/deliveries?endpointId=${endpointId}`);
        expect(deliveries.status).to.equal(200);
        expect(deliveries.json.data).to.have.length(1);
        const [delivery] = deliveries.json.data as Array<{ id: string; eventId: string; status: string; attempts: number }>;
        expect(delivery).to.include({ eventId, status: 'delivered', attempts: 1 });
        expect((await api('GET', '/v1/deliveries?endpointId=someone-else')).json.data).to.deep.equal([]);
        expect((await api('GET', `/v1/deliveries?status=delivered&since=2000-01-01T00:00:00Z&limit=10`)).json.data).to.have.length(1);
        expect((await api('GET', `/v1/deliveries?status=dead`)).json.data).to.deep.equal([]);

        const one = await api('GET', `/v1/deliveries/${delivery?.id}`);
        expect(one.status).to.equal(200);
        expect(one.json.id).to.equal(delivery?.id);

        const attempts = await api('GET', `/v1/deliveries/${delivery?.id}/attempts`);
        expect(attempts.status).to.equal(200);
        expect(attempts.json.data).to.have.length(1);
        expect(attempts.json.data[0].outcome).to.include({ kind: 'response', status: 200 });
        expectError(await api('GET', '/v1/deliveries/nope/attempts'), 404, 'HERALD_NOT_FOUND');
      });

      it('answers a list of events with the list, in order', async () => {
        await boot();
        await createEndpoint({ url: 'https://example.com' });
        const reply = await api('POST', '/v1/events', [
          { tenantId: 'acme', type: 'a.b', payload: 1, id: 'evt-1' },
          { tenantId: 'acme', type: 'a.b', payload: 2, id: 'evt-2', orderingKey: 'order-9' },
        ]);
        expect(reply.status, reply.text).to.equal(202);
        expect(reply.json.data.map((e: { id: string }) => e.id)).to.deep.equal(['evt-1', 'evt-2']);
        expect(reply.json.data.map((e: { orderingKey: string | null }) => e.orderingKey)).to.deep.equal([null, 'order-9']);
      });

      it('answers 400 naming orderingKey when it is longer than 200 characters', async () => {
        await boot();
        await createEndpoint({ url: 'https://example.com' });
        const reply = await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: 1, orderingKey: 'k'.repeat(201) });
        expectError(reply, 400, 'HERALD_INVALID_INPUT', 'orderingKey');
      });
    });

    context('when an endpoint\'s events are listed after a sequence number', () => {
      it('pages through them in sequence order with nextAfter, and names after or limit when they break the rule', async () => {
        const th = await boot({}, { start: false });
        const { id } = await createEndpoint({ url: 'https://example.com/hooks' });
        for (let n = 1; n <= 5; n++) await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: { n } });
        // Fanned out as the engine would (not started here: nothing is sent).
        const store = th.herald.store;
        const events = await store.unfannedEvents(10);
        const endpoints = await store.listEndpoints();
        await store.recordFanOuts(events.map((e) => ({ eventId: e.id, deliveries: planDeliveries(e, endpoints, 8, th.clock.now()) })), th.clock.now());
        const first = await api('GET', `/v1/endpoints/${id}/events?after=1&limit=2`);
        expect(first.status, first.text).to.equal(200);
        const [row] = first.json.data as Array<Record<string, unknown>>;
        expect(Object.keys(row ?? {}).sort()).to.deep.equal(['createdAt', 'deliveredAt', 'deliveryId', 'eventId', 'eventType', 'sequence', 'status']);
        expect(first.json.data.map((d: { sequence: number }) => d.sequence)).to.deep.equal([2, 3]);
        expect(first.json.nextAfter).to.equal(3);
        const second = await api('GET', `/v1/endpoints/${id}/events?after=${first.json.nextAfter}&limit=2`);
        expect(second.json).to.deep.include({ nextAfter: null });
        expect(second.json.data.map((d: { sequence: number; status: string }) => [d.sequence, d.status])).to.deep.equal([[4, 'pending'], [5, 'pending']]);
        expect((await api('GET', `/v1/endpoints/${id}/events`)).json.data).to.have.length(5);
        expectError(await api('GET', `/v1/endpoints/${id}/events?after=-1`), 400, 'HERALD_INVALID_INPUT', 'after');
        expectError(await api('GET', `/v1/endpoints/${id}/events?after=x`), 400, 'HERALD_INVALID_INPUT', 'after');
        expectError(await api('GET', `/v1/endpoints/${id}/events?limit=0`), 400, 'HERALD_INVALID_INPUT', 'limit');
        expectError(await api('GET', `/v1/endpoints/${id}/events?limit=1001`), 400, 'HERALD_INVALID_INPUT', 'limit');
        expectError(await api('GET', '/v1/endpoints/ep_missing/events'), 404, 'HERALD_NOT_FOUND', 'endpointId');
      });
    });

    context('when the event is invalid', () => {
      it('answers 404 naming tenantId for an unknown tenant', async () => {
        await boot();
        await createEndpoint({ url: 'https://example.com' });
        expectError(await api('POST', '/v1/events', { tenantId: 'nobody', type: 'a.b', payload: {} }), 404, 'HERALD_NOT_FOUND', 'tenantId');
      });

      it('answers 404 naming endpointId for an unknown endpoint', async () => {
        await boot();
        await createEndpoint({ url: 'https://example.com' });
        const reply = await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: {}, endpointId: 'ep_missing' });
        expectError(reply, 404, 'HERALD_NOT_FOUND', 'endpointId');
      });

      it('answers 413 naming payload when the payload is over delivery.maxPayloadBytes', async () => {
        await boot({ delivery: { maxPayloadBytes: 1024 } });
        await createEndpoint({ url: 'https://example.com' });
        const reply = await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: { text: 'x'.repeat(2_000) } });
        const error = expectError(reply, 413, 'HERALD_PAYLOAD_TOO_LARGE', 'payload');
        expect(error.rule).to.include('1024');
        expect((await api('GET', '/v1/deliveries')).json.data).to.deep.equal([]);
      });

      it('answers 413 naming body when the request body is far over the maximum', async () => {
        await boot({ delivery: { maxPayloadBytes: 1024 }, api: { maxRequestBytes: 1024 + 64 * 1024 } });
        await createEndpoint({ url: 'https://example.com' });
        const reply = await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: 'x'.repeat(200 * 1024) });
        expectError(reply, 413, 'HERALD_PAYLOAD_TOO_LARGE', 'body');
      });

      it('answers 400 naming body when the body is not JSON', async () => {
        await boot();
        expectError(await api('POST', '/v1/events', undefined, { raw: 'tenantId=acme' }), 400, 'HERALD_INVALID_INPUT', 'body');
      });

      it('answers 400 naming the field for a missing type', async () => {
        await boot();
        expectError(await api('POST', '/v1/events', { tenantId: 'acme', payload: {} }), 400, 'HERALD_INVALID_INPUT', 'type');
      });
    });

    context('when one event of a batch is rejected', () => {
      it('stores nothing of that batch, and still delivers what was accepted before', async () => {
        const th = await boot();
        let hold = true;
        sink = await startServer(() => (hold ? 'hold' : { status: 200 }));
        const { id: endpointId } = await createEndpoint({ url: sink.url, concurrency: 1 });
        const accepted = await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: { n: 0 } });
        expect(accepted.status).to.equal(202);
        await sink.requests(1);

        const rejected = await api('POST', '/v1/events', [
          { tenantId: 'acme', type: 'a.b', payload: { n: 1 }, id: 'batch-1' },
          { tenantId: 'nobody', type: 'a.b', payload: { n: 2 }, id: 'batch-2' },
        ]);
        expectError(rejected, 404, 'HERALD_NOT_FOUND', '[1].tenantId');
        const invalid = await api('POST', '/v1/events', [
          { tenantId: 'acme', type: 'a.b', payload: { n: 3 }, id: 'batch-3' },
          { tenantId: 'acme', payload: { n: 4 }, id: 'batch-4' },
        ]);
        expectError(invalid, 400, 'HERALD_INVALID_INPUT', '[1].type');

        hold = false;
        sink.held[0]?.respond(200);
        await attemptsSeen(th, 1);
        await th.herald.idle();
        const deliveries = await api('GET', `/v1/deliveries?endpointId=${endpointId}`);
        expect(deliveries.json.data.map((d: { eventId: string; status: string }) => [d.eventId, d.status])).to.deep.equal([
          [accepted.json.id, 'delivered'],
        ]);
        expect(await th.herald.store.getEvent('batch-1')).to.equal(undefined);
        expect(await th.herald.store.getEvent('batch-3')).to.equal(undefined);
        expect(sink.received.map((r) => r.headers['webhook-id'])).to.deep.equal([accepted.json.id]);
      });

      it('leaves /v1/deliveries empty when the first batch is rejected', async () => {
        const th = await boot();
        await createEndpoint({ url: 'https://example.com' });
        const rejected = await api('POST', '/v1/events', [
          { tenantId: 'acme', type: 'a.b', payload: {} },
          { tenantId: 'acme', type: 'a.b', payload: {}, endpointId: 'ep_missing' },
        ]);
        expectError(rejected, 404, 'HERALD_NOT_FOUND', '[1].endpointId');
        await th.herald.idle();
        expect((await api('GET', '/v1/deliveries')).json.data).to.deep.equal([]);
      });
    });

    context('when the delivery log query is invalid', () => {
      it('answers 400 naming status, since, until or limit', async () => {
        await boot();
        expectError(await api('GET', '/v1/deliveries?status=lost'), 400, 'HERALD_INVALID_INPUT', 'status');
        expectError(await api('GET', '/v1/deliveries?since=yesterday'), 400, 'HERALD_INVALID_INPUT', 'since');
        expectError(await api('GET', '/v1/deliveries?until=soon'), 400, 'HERALD_INVALID_INPUT', 'until');
        for (const limit of ['0', '-1', '1001', 'ten', '']) {
          expectError(await api('GET', `/v1/deliveries?limit=${limit}`), 400, 'HERALD_INVALID_INPUT', 'limit');
        }
      });
    });
  });

  describe('dead letters', () => {
    context('when an endpoint answers 404', () => {
      it('lists the dead letter with its attempts; replaying it delivers with the same webhook-id, once', async () => {
        const th = await boot();
        let answer = 404;
        sink = await startServer(() => ({ status: answer }));
        const { id: endpointId } = await createEndpoint({ url: sink.url });
        const published = await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
        const eventId = published.json.id as string;
        const [first] = await attemptsSeen(th, 1);
        expect(first?.settlement.kind).to.equal('dead');

        const letters = await api('GET', `/v1/dead-letters?endpointId=${endpointId}`);
        expect(letters.status).to.equal(200);
        expect(letters.json.data).to.have.length(1);
        const letter = letters.json.data[0];
        expect(letter).to.include({ eventId, endpointId, replayedAt: null });
        expect(letter.attempts).to.have.length(1);
        expect(letter.attempts[0].outcome).to.include({ kind: 'response', status: 404 });
        expect((await api('GET', `/v1/dead-letters/${letter.id}`)).json.id).to.equal(letter.id);

        answer = 200;
        const replayed = await api('POST', `/v1/dead-letters/${letter.id}/replay`);
        expect(replayed.status, replayed.text).to.equal(202);
        expect(replayed.json).to.deep.equal({ replayed: 1, ids: [letter.id] });
        const [, second] = await attemptsSeen(th, 2);
        expect(second?.settlement.kind).to.equal('delivered');
        expect(sink.received.map((r) => r.headers['webhook-id'])).to.deep.equal([eventId, eventId]);
        const [delivery] = (await api('GET', `/v1/deliveries?endpointId=${endpointId}`)).json.data;
        expect(delivery).to.include({ eventId, status: 'delivered' });

        expectError(await api('POST', `/v1/dead-letters/${letter.id}/replay`), 409, 'HERALD_CONFLICT');
        expectError(await api('POST', '/v1/dead-letters/dl_missing/replay'), 404, 'HERALD_NOT_FOUND');
        expect((await api('GET', '/v1/dead-letters')).json.data).to.deep.equal([]);
        expect((await api('GET', '/v1/dead-letters?includeReplayed=true')).json.data).to.have.length(1);
      });
    });

    context('when dead letters are replayed in bulk by endpoint', () => {
      it("replays only that endpoint's letters and returns the count", async () => {
        const th = await boot();
        sink = await startServer(() => ({ status: 404 }));
        otherSink = await startServer(() => ({ status: 404 }));
        const { id: first } = await createEndpoint({ url: sink.url });
        const { id: second } = await createEndpoint({ url: otherSink.url });
        await api('POST', '/v1/events', [1, 2].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
        await attemptsSeen(th, 4);
        await th.herald.idle();
        expect((await api('GET', '/v1/dead-letters')).json.data).to.have.length(4);

        const reply = await api('POST', '/v1/dead-letters/replay', { endpointId: first });
        expect(reply.status, reply.text).to.equal(202);
        expect(reply.json.replayed).to.equal(2);
        expect(reply.json.ids).to.have.length(2);
        await attemptsSeen(th, 6);
        await th.herald.idle();

        expect(sink.received).to.have.length(4);
        expect(otherSink.received).to.have.length(2);
        const remaining = (await api('GET', '/v1/dead-letters')).json.data as Array<{ endpointId: string }>;
        expect(remaining.map((l) => l.endpointId).sort()).to.deep.equal([first, first, second, second].sort());
        const secondLetters = (await api('GET', `/v1/dead-letters?endpointId=${second}`)).json.data as Array<{ replayedAt: number | null }>;
        expect(secondLetters.map((l) => l.replayedAt)).to.deep.equal([null, null]);
      });
    });

    context('when operators acknowledge and discard dead letters', () => {
      it('records the note and who, lists by state with each one\'s triage and age, and refuses closed, unknown and bad input naming the field', async () => {
        const th = await boot();
        sink = await startServer(() => ({ status: 404 }));
        await createEndpoint({ url: sink.url });
        await api('POST', '/v1/events', [1, 2, 3].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
        await attemptsSeen(th, 3);
        await th.herald.idle();
        const listed = (await api('GET', '/v1/dead-letters')).json.data as Array<{ id: string; createdAt: number; ageMs: number; triage: unknown }>;
        expect(listed).to.have.length(3);
        const [a, b, c] = listed.map((l) => l.id);
        expect(listed[0]?.triage).to.deep.equal({ state: 'new', note: null, by: null, at: listed[0]?.createdAt });
        expect(listed[0]?.ageMs).to.be.a('number').and.at.least(0);

        const acked = await api('POST', `/v1/dead-letters/${a}/acknowledge`, { note: 'fix deploys tonight', by: 'alice' });
        expect(acked.status, acked.text).to.equal(200);
        expect(acked.json).to.deep.include({ id: a });
        expect(acked.json.triage).to.include({ state: 'acknowledged', note: 'fix deploys tonight', by: 'alice' });
        const discarded = await api('POST', '/v1/dead-letters/discard', { ids: [b, 'dl_missing', b], note: 'test traffic', by: 'bob' });
        expect(discarded.status, discarded.text).to.equal(200);
        expect(discarded.json).to.deep.equal({ state: 'discarded', updated: 1, ids: [b], skipped: [{ id: 'dl_missing', reason: 'unknown' }] });

        const ids = async (query: string) => ((await api('GET', `/v1/dead-letters${query}`)).json.data as Array<{ id: string }>).map((l) => l.id);
        expect(await ids('?state=new')).to.deep.equal([c]);
        expect(await ids('?state=acknowledged')).to.deep.equal([a]);
        expect(await ids('?state=discarded')).to.deep.equal([b]);
        expect(await ids(''), 'the open ones, newest first').to.deep.equal([a, c]);
        expect(await ids('?includeReplayed=true')).to.have.length(3);

        expectError(await api('POST', `/v1/dead-letters/${b}/acknowledge`, { note: 'n', by: 'carol' }), 409, 'HERALD_CONFLICT');
        expectError(await api('POST', '/v1/dead-letters/dl_missing/discard', { note: 'n', by: 'carol' }), 404, 'HERALD_NOT_FOUND', 'deadLetterId');
        expectError(await api('POST', `/v1/dead-letters/${c}/acknowledge`, { by: 'carol' }), 400, 'HERALD_INVALID_INPUT', 'note');
        expectError(await api('POST', `/v1/dead-letters/${c}/discard`, { note: 'n', by: ' ' }), 400, 'HERALD_INVALID_INPUT', 'by');
        expectError(await api('POST', `/v1/dead-letters/${c}/discard`, { note: 'x'.repeat(2_001), by: 'carol' }), 400, 'HERALD_INVALID_INPUT', 'note');
        expectError(await api('POST', '/v1/dead-letters/acknowledge', { note: 'n', by: 'carol' }), 400, 'HERALD_INVALID_INPUT', 'ids');
        expectError(await api('GET', '/v1/dead-letters?state=open'), 400, 'HERALD_INVALID_INPUT', 'state');
        expect(await ids('?state=new'), 'nothing changed by the refused requests').to.deep.equal([c]);
      });
    });

    context('when the bulk replay body names no filter', () => {
      it('answers 400 naming body', async () => {
        await boot();
        expectError(await api('POST', '/v1/dead-letters/replay', {}), 400, 'HERALD_INVALID_INPUT', 'body');
        expectError(await api('POST', '/v1/dead-letters/replay', { everything: true }), 400, 'HERALD_INVALID_INPUT', 'everything');
      });
    });
  });

  describe('failures, grouped', () => {
    context('when one endpoint answers 404 and another 503', () => {
      it('lists the groups by endpoint and kind (dead, retrying) with a sample, and replays one group', async () => {
        const th = await boot();
        let answer = 404;
        sink = await startServer(() => ({ status: answer, body: 'no such hook' }));
        otherSink = await startServer(() => ({ status: 503, body: 'busy' }));
        const { id: gone } = await createEndpoint({ url: sink.url });
        const { id: busy } = await createEndpoint({ url: otherSink.url });
        await api('POST', '/v1/events', [1, 2].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
        await attemptsSeen(th, 4);
        await th.herald.idle();

        const listed = await api('GET', '/v1/failures');
        expect(listed.status, listed.text).to.equal(200);
        const groups = listed.json.data as Array<Record<string, unknown>>;
        expect(groups.map((g) => [g.endpointId, g.kind, g.count])).to.have.deep.members([
          [gone, 'http-404', { retrying: 0, dead: 2, total: 2 }],
          [busy, 'http-503', { retrying: 2, dead: 0, total: 2 }],
        ]);
        const goneGroup = groups.find((g) => g.endpointId === gone)!;
        expect(goneGroup).to.include({ tenantId: 'acme' });
        expect(goneGroup.sample).to.deep.equal({ summary: 'HTTP 404', status: 404, body: 'no such hook' });
        expect(goneGroup.firstSeen).to.be.a('number').and.at.most(goneGroup.lastSeen as number);
        expect((await api('GET', `/v1/failures?endpointId=${busy}`)).json.data.map((g: { kind: string }) => g.kind)).to.deep.equal(['http-503']);
        expect((await api('GET', '/v1/failures?tenantId=globex')).json.data).to.deep.equal([]);

        answer = 200;
        const replayed = await api('POST', '/v1/failures/replay', { endpointId: gone, kind: 'http-404' });
        expect(replayed.status, replayed.text).to.equal(202);
        expect(replayed.json).to.deep.equal({ deadLetters: 2, retrying: 0 });
        await attemptsSeen(th, 6);
        await th.herald.idle();
        expect(sink.received).to.have.length(4);
        expect((await api('GET', '/v1/failures')).json.data.map((g: { endpointId: string }) => g.endpointId)).to.deep.equal([busy]);
      });
    });

    context('when the query or the replay body is invalid', () => {
      it('answers 400 naming the field and the rule', async () => {
        await boot();
        expectError(await api('GET', '/v1/failures?kind=timeout'), 400, 'HERALD_INVALID_INPUT', 'kind');
        expectError(await api('GET', '/v1/failures?limit=0'), 400, 'HERALD_INVALID_INPUT', 'limit');
        expectError(await api('POST', '/v1/failures/replay', []), 400, 'HERALD_INVALID_INPUT', 'body');
        expectError(await api('POST', '/v1/failures/replay', { kind: 'timeout' }), 400, 'HERALD_INVALID_INPUT', 'endpointId');
        const kind = expectError(await api('POST', '/v1/failures/replay', { endpointId: 'ep_1', kind: 'http-5000' }), 400, 'HERALD_INVALID_INPUT', 'kind');
        expect(kind.rule).to.include('http-<status>');
        expectError(await api('POST', '/v1/failures/replay', { endpointId: 'ep_1', kind: 'dns', since: 0 }), 400, 'HERALD_INVALID_INPUT', 'since');
      });
    });
  });

  describe('publishing over HTTP (hostile input)', () => {
    /** Sends `body` as is, with the given Authorization header. */
    async function send(path: string, body: string | Buffer | undefined, authorization: string | undefined): Promise<ApiReply> {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (authorization !== undefined) headers.authorization = authorization;
      const response = await request(`${base}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers,
        ...(body === undefined ? {} : { body }),
      });
      const text = await response.body.text();
      return { status: response.statusCode, text, json: text === '' ? undefined : JSON.parse(text) };
    }

    context('when a payload has numbers, escapes and whitespace that JSON.parse would normalise', () => {
      // Raw text: `\u00e9` is six characters here, `é` one; the consumer must get exactly these bytes.
      const payload = String.raw`{
  "big": 12345678901234567890, "id64": -9223372036854775808, "float": 1.0, "exp": 1e2, "negzero": -0, "tenth": 0.1,
  "escapes": "\u00e9 \n \ud83d\ude00 \/ \"q\" \\ \t",
  "raw": "é ü 😀 日本",
  "nested": [ [ ], { "a" : [ 1 , { } , [ 2.50 ] ] } ],	"payload": { "payload": 1E-7 }
}`;

      it('stores, signs and delivers the payload byte for byte as sent', async () => {
        const th = await boot();
        sink = await startServer(() => ({ status: 200 }));
        const { secret } = await createEndpoint({ url: `${sink.url}/hooks` });
        const body = `{ "tenantId": "acme",\n "type": "invoice.paid", "payload":   ${payload}  }`;

        const published = await api('POST', '/v1/events', undefined, { raw: body });
        expect(published.status, published.text).to.equal(202);
        expect((await th.herald.store.getEvent(published.json.id))?.payload).to.equal(payload);

        const [received] = await sink.requests(1);
        expect(received?.body).to.equal(payload);
        expect(Buffer.from(received?.body ?? '', 'utf8').equals(Buffer.from(payload, 'utf8'))).to.equal(true);
        expect(() =>
          verify({ payload: received?.body ?? '', headers: received?.headers ?? {}, secret, nowSec: Math.floor(th.clock.now() / 1000) }),
        ).not.to.throw();
        await attemptsSeen(th, 1);
      });

      it('keeps each payload of a list with its own event', async () => {
        const th = await boot();
        sink = await startServer(() => ({ status: 200 }));
        await createEndpoint({ url: `${sink.url}/hooks` });
        const payloads = [payload, '12345678901234567891', '[1.0,-0]', '"\\u00e9"', '{"payload":{"payload":0.10}}'];
        const body = `[${payloads.map((p, i) => `{"payload": ${i === 3 ? '"overwritten", "payload": ' : ''}${p}, "tenantId": "acme", "type": "a.b", "id": "evt-${i}"}`).join(',\n')}]`;
        const published = await api('POST', '/v1/events', undefined, { raw: body });
        expect(published.status, published.text).to.equal(202);

        const received = await sink.requests(payloads.length);
        const byId = new Map(received.map((r) => [r.headers['webhook-id'], r.body]));
        payloads.forEach((p, i) => expect(byId.get(`evt-${i}`), `evt-${i}`).to.equal(p));
        await attemptsSeen(th, payloads.length);
      });
    });

    context('when the body is not UTF-8', () => {
      it('answers 400 naming body instead of replacing the bytes', async () => {
        await boot({}, { start: false });
        await createEndpoint({ url: 'https://example.com' });
        const body = Buffer.concat([Buffer.from('{"tenantId":"acme","type":"a.b","payload":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
        const reply = await send('/v1/events', body, `Bearer ${TOKEN}`);
        expectError(reply, 400, 'HERALD_INVALID_INPUT', 'body');
        expect(reply.json.error.rule).to.include('UTF-8');
      });
    });

    context('when an event has a field Herald does not know', () => {
      it('answers 400 naming the field and listing the allowed ones, by index in a list', async () => {
        await boot({}, { start: false });
        await createEndpoint({ url: 'https://example.com' });
        const one = await api('POST', '/v1/events', { tenantId: 'acme', type: 'a.b', payload: {}, priority: 'high' });
        const error = expectError(one, 400, 'HERALD_INVALID_INPUT', 'priority');
        expect(error.rule).to.equal('is not a known field (allowed: tenantId, type, payload, id, endpointId, orderingKey)');
        const list = [0, 1, 2, 3].map((i) => ({ tenantId: 'acme', type: 'a.b', payload: i, ...(i === 3 ? { priority: 'high' } : {}) }));
        expectError(await api('POST', '/v1/events', list), 400, 'HERALD_INVALID_INPUT', '[3].priority');
        expect((await api('GET', '/v1/deliveries')).json.data).to.deep.equal([]);
      });
    });

    context('when a list of 1 000 events of about 1 KiB is published', () => {
      it('accepts it, though its body is far over maxPayloadBytes + 64 KiB', async () => {
        const th = await boot({}, { start: false });
        await createEndpoint({ url: 'https://example.com' });
        const events = Array.from({ length: 1_000 }, (_, i) => ({ tenantId: 'acme', type: 'a.b', id: `bulk-${i}`, payload: { n: i, text: 'x'.repeat(1_024) } }));
        const body = JSON.stringify(events);
        expect(Buffer.byteLength(body)).to.be.greaterThan(th.herald.config.delivery.maxPayloadBytes + 64 * 1024);
        const reply = await api('POST', '/v1/events', undefined, { raw: body });
        expect(reply.status, reply.text.slice(0, 300)).to.equal(202);
        expect(reply.json.data).to.have.length(1_000);
        expect((await th.herald.store.getEvent('bulk-999'))?.payload).to.equal(JSON.stringify(events[999]?.payload));
      });
    });

    context('when the request body is over api.maxRequestBytes', () => {
      it('answers 413 naming body, the limit and the advice to split the list', async () => {
        const limit = 1_024 + 64 * 1024;
        await boot({ delivery: { maxPayloadBytes: 1_024 }, api: { maxRequestBytes: limit } }, { start: false });
        await createEndpoint({ url: 'https://example.com' });
        const events = Array.from({ length: 100 }, (_, i) => ({ tenantId: 'acme', type: 'a.b', payload: { n: i, text: 'x'.repeat(900) } }));
        const reply = await api('POST', '/v1/events', events);
        const error = expectError(reply, 413, 'HERALD_PAYLOAD_TOO_LARGE', 'body');
        expect(error.rule).to.include(`at most ${limit} bytes`);
        expect(error.rule).to.include('api.maxRequestBytes');
        expect(error.rule).to.include('split');
        expect((await api('POST', '/v1/events', events.slice(0, 50))).status).to.equal(202);
      });
    });

    context('when a payload is nested deeper than 64 levels', () => {
      it('answers 400 naming payload, the limit and the depth found; 64 levels pass', async () => {
        await boot({}, { start: false });
        await createEndpoint({ url: 'https://example.com' });
        const nested = (depth: number): string => `${'['.repeat(depth)}${']'.repeat(depth)}`;
        const publish = (payload: string): Promise<ApiReply> =>
          api('POST', '/v1/events', undefined, { raw: `{"tenantId": "acme", "type": "a.b", "payload": ${payload}}` });
        expect((await publish(nested(64))).status).to.equal(202);
        const error = expectError(await publish(nested(65)), 400, 'HERALD_INVALID_INPUT', 'payload');
        expect(error.rule).to.equal('must be nested at most 64 levels of arrays and objects deep (got 65)');
        expect(expectError(await publish(nested(100_000)), 400, 'HERALD_INVALID_INPUT', 'payload').rule).to.include('(got 100000)');
      });
    });

    context('when a time filter names a date that does not exist', () => {
      it('answers 400 naming since or until and the rule, on deliveries, dead letters and bulk replay', async () => {
        await boot({}, { start: false });
        for (const query of ['since=2026-02-30', 'since=2026-02-29', 'until=2026-13-01', 'until=2026-01-31T24:00:00Z', 'since=2026-01-31T10:00:00']) {
          const field = query.split('=')[0] ?? '';
          const error = expectError(await api('GET', `/v1/deliveries?${query}`), 400, 'HERALD_INVALID_INPUT', field);
          expect(error.rule).to.include('ISO-8601').and.include('calendar');
          expectError(await api('GET', `/v1/dead-letters?${query}`), 400, 'HERALD_INVALID_INPUT', field);
        }
        expectError(await api('POST', '/v1/dead-letters/replay', { since: '2026-02-29' }), 400, 'HERALD_INVALID_INPUT', 'since');
        expectError(await api('POST', '/v1/dead-letters/replay', { until: '2026-04-31T00:00:00Z' }), 400, 'HERALD_INVALID_INPUT', 'until');
        for (const query of ['since=2024-02-29', 'since=2024-02-29T23:59:59.999%2B01:00', `until=${Date.UTC(2026, 0, 1)}`]) {
          expect((await api('GET', `/v1/deliveries?${query}`)).status, query).to.equal(200);
          expect((await api('GET', `/v1/dead-letters?${query}`)).status, query).to.equal(200);
        }
      });
    });

    context('when the Authorization scheme is written in another case or with extra spaces', () => {
      it('accepts it, as the scheme is case-insensitive (RFC 9110 §11.1)', async () => {
        await boot({}, { start: false });
        for (const header of [`bearer ${TOKEN}`, `BEARER ${TOKEN}`, `BeArEr ${TOKEN}`, `Bearer   ${TOKEN}`, `bearer  ${TOKEN}  `]) {
          expect((await send('/v1/endpoints', undefined, header)).status, header).to.equal(200);
        }
      });

      it('still refuses a wrong scheme, a missing separator or a wrong token', async () => {
        await boot({}, { start: false });
        for (const header of [`Basic ${TOKEN}`, `Bearer${TOKEN}`, `Bearer ${TOKEN}x`, `Bearer x${TOKEN}`, 'Bearer', `${TOKEN}`, `Bearer ${TOKEN} ${TOKEN}`]) {
          expectError(await send('/v1/endpoints', undefined, header), 401, 'HERALD_UNAUTHORIZED');
        }
      });
    });
  });

  describe('routing', () => {
    context('when the route does not exist', () => {
      it('answers 404 with a code', async () => {
        await boot();
        expectError(await api('GET', '/v1/nothing-here'), 404, 'HERALD_NOT_FOUND');
        expectError(await api('GET', '/nothing-here', undefined, { token: null }), 404, 'HERALD_NOT_FOUND');
      });
    });

    context('when the method is not allowed on the route', () => {
      it('answers 405 with a code', async () => {
        await boot();
        expectError(await api('PUT', '/v1/endpoints'), 405, 'HERALD_METHOD_NOT_ALLOWED');
        expectError(await api('DELETE', '/healthz', undefined, { token: null }), 405, 'HERALD_METHOD_NOT_ALLOWED');
      });
    });
  });
});
