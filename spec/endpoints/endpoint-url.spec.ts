/**
 * Endpoint URLs through the admin API: a URL that `new URL()` would quietly
 * rewrite (control characters, surrounding spaces) is refused with a 400, and
 * the URL stored is the normalised one that requests actually go to.
 */
import { expect } from 'chai';
import { request } from 'undici';
import { StatusServer } from '../../lib/api/status-server.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

const TOKEN = 'test-admin-token-0123456789';
const RULE = 'must not contain control characters or surrounding spaces';

interface ApiReply {
  readonly status: number;
  readonly text: string;
  readonly json: any;
}

describe('endpoint URLs (admin API)', () => {
  let t: TestHerald | undefined;
  let status: StatusServer | undefined;
  let sink: TestServer | undefined;
  let base = '';

  beforeEach(async () => {
    t = await startHerald();
    status = new StatusServer(t.herald, { host: '127.0.0.1', port: 0, adminToken: TOKEN });
    base = await status.listen();
  });

  afterEach(async () => {
    await status?.close();
    status = undefined;
    await sink?.close();
    sink = undefined;
    await t?.close();
    t = undefined;
  });

  async function api(method: 'GET' | 'POST' | 'PATCH', path: string, body?: unknown): Promise<ApiReply> {
    const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const response = await request(`${base}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
    const text = await response.body.text();
    const isJson = String(response.headers['content-type'] ?? '').startsWith('application/json');
    return { status: response.statusCode, text, json: isJson ? JSON.parse(text) : undefined };
  }

  function expectUrlRefused(reply: ApiReply, found: string): void {
    expect(reply.status, reply.text).to.equal(400);
    expect(reply.json?.error, reply.text).to.include({ code: 'HERALD_INVALID_INPUT', field: 'url', rule: `${RULE} (${found})` });
  }

  context('when an endpoint is created with CR LF in its URL', () => {
    it('answers 400 naming url and the rule, and stores nothing', async () => {
      expectUrlRefused(await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'http://host/a\r\nX-Injected: 1' }), 'found "\\r" at index 13');
      expect((await api('GET', '/v1/endpoints')).json.data).to.deep.equal([]);
    });
  });

  context('when an endpoint is created with surrounding spaces', () => {
    it('answers 400 rather than trimming', async () => {
      expectUrlRefused(await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://hooks.example/in ' }), 'found " " at index 24');
    });
  });

  context('when an endpoint URL is patched with a tab', () => {
    it('answers 400 and leaves the URL as it was', async () => {
      const created = await api('POST', '/v1/endpoints', { tenantId: 'acme', url: 'https://hooks.example/in' });
      expect(created.status, created.text).to.equal(201);
      const { id } = created.json as { id: string };
      expectUrlRefused(await api('PATCH', `/v1/endpoints/${id}`, { url: 'https://hooks.example/\tv2' }), 'found "\\t" at index 22');
      expect((await api('GET', `/v1/endpoints/${id}`)).json.url).to.equal('https://hooks.example/in');
    });
  });

  context('when an acceptable URL is not in normal form', () => {
    it('stores and lists the normalised URL, which is where the request goes', async () => {
      sink = await startServer(() => ({ status: 204 }));
      const created = await api('POST', '/v1/endpoints', { tenantId: 'acme', url: `${sink.url}/a b?x=y z` });
      expect(created.status, created.text).to.equal(201);
      expect(created.json.url).to.equal(`${sink.url}/a%20b?x=y%20z`);

      const patched = await api('PATCH', `/v1/endpoints/${created.json.id as string}`, { url: `${sink.url.toUpperCase()}/c d` });
      expect(patched.status, patched.text).to.equal(200);
      expect(patched.json.url).to.equal(`${sink.url}/c%20d`);

      await t!.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t!, 1);
      expect(sink.received.map((r) => r.path)).to.deep.equal(['/c%20d']);
    });
  });
});
