/**
 * Cases where the caller is the enemy:
 *
 *   ssrf    endpoint URLs that spell a loopback address in other forms, on a
 *           Herald started without allowNetworks: each one blocked
 *   input   malformed and oversized admin API requests: the documented 4xx
 *           naming the field, and a process that stays healthy
 *   tokens  forged admin tokens: 401 and nothing leaked
 *
 * Safety: the SSRF forms are checked first with Herald's own guard
 * (lib/delivery/address-guard.ts, read only); a form whose address the guard
 * would let through and that is not 127.0.0.1 or ::1 itself is never given
 * to Herald, because its packets would leave this machine (e.g. `::7f00:1`
 * routes via eth0 here). That form is reported as failed, unsent.
 */
import { lookup } from 'node:dns/promises';
import { join } from 'node:path';
import { createAddressGuard } from '../../lib/delivery/address-guard.ts';
import {
  ADMIN_TOKEN,
  errorOf,
  finalDelivery,
  heraldNode,
  http,
  recordingServer,
  sleep,
  startSinkProcess,
  type ChaosCase,
  type HttpAnswer,
} from './harness.ts';

const SAFE_TARGETS = new Set(['127.0.0.1', '::1']);

async function addressesOf(hostname: string): Promise<string[]> {
  const bare = hostname.replace(/^\[|\]$/g, '');
  if (/^[\d.]+$/.test(bare) || bare.includes(':')) return [bare];
  return (await lookup(bare, { all: true })).map((a) => a.address);
}

const ssrfCase: ChaosCase = {
  name: 'ssrf',
  checks: '9 URL spellings of loopback, no allowNetworks: each refused at creation (400) or its delivery dead with outcome blocked; sinks on 127.0.0.1:P and [::1]:P receive nothing',
  limitMs: 60_000,
  async run(ctx) {
    const dir = ctx.tempDir();
    const sink = await startSinkProcess({ record: 'ids' });
    ctx.defer(() => sink.close());
    const P = sink.port;
    const v6 = await recordingServer(ctx, { host: '::1', port: P });
    const node = await heraldNode({ dbPath: join(dir, 'herald.db'), dir, allowNetworks: [] });
    await node.start(ctx);
    const guard = createAddressGuard([]);
    const forms = [
      `http://[::127.0.0.1]:${P}/`,
      `http://[::ffff:127.0.0.1]:${P}/`,
      `http://[::ffff:7f00:1]:${P}/`,
      `http://[64:ff9b::7f00:1]:${P}/`,
      `http://127.1:${P}/`,
      `http://0x7f.0.0.1:${P}/`,
      `http://2130706433:${P}/`,
      `http://[::1]:${P}/`,
      `http://localhost:${P}/`,
    ];
    const outcomes: string[] = [];
    for (const url of forms) {
      const addresses = await addressesOf(new URL(url).hostname);
      const leaking = addresses.filter((a) => guard.isAllowed(a) && !SAFE_TARGETS.has(a));
      if (leaking.length > 0) {
        outcomes.push(`${url}: guard allows`);
        ctx.check(`${url} blocked`, false, `Herald's guard allows ${leaking.join(', ')} (parsed as ${new URL(url).host}); not sent: it would route off this machine`);
        continue;
      }
      const created = await node.api('POST', '/v1/endpoints', { tenantId: 'ssrf', url, retry: { schedule: ['PT0.2S'] } });
      if (created.status === 400) {
        outcomes.push(`${url}: 400`);
        ctx.check(`${url} refused at creation`, true, errorOf(created).message ?? '');
        continue;
      }
      if (created.status !== 201) {
        ctx.check(`${url} refused (400) or created (201)`, false, `${created.status} ${created.text.slice(0, 120)}`);
        continue;
      }
      const endpointId = (created.json as { id: string }).id;
      await node.publish([{ tenantId: 'ssrf', type: 'chaos.ssrf', payload: { url }, endpointId }]);
      const final = await finalDelivery(ctx, node, endpointId, 10_000);
      const kinds = final.final ? final.attempts.map((a) => a.outcome.kind) : [];
      outcomes.push(`${url}: ${final.final ? final.status : 'not final'} ${kinds.join(',')}`);
      ctx.check(
        `${url} blocked`,
        final.final && final.status === 'dead' && kinds.length > 0 && kinds.every((k) => k === 'blocked'),
        final.final ? `${final.status}, attempts: ${final.attempts.map((a) => a.error ?? a.outcome.kind).join('; ')}` : 'delivery not final within 10 s',
      );
    }
    await sleep(500);
    const got = (await sink.take()).count;
    ctx.figure('requests at 127.0.0.1:P', got);
    ctx.figure('connections at [::1]:P', v6.connections);
    ctx.check('the sink on 127.0.0.1:P received nothing', got === 0, `${got} requests`);
    ctx.check('the sink on [::1]:P received nothing (not even a connection)', v6.connections === 0 && v6.received.length === 0, `${v6.connections} connections`);
    ctx.figure('forms', forms.length);
  },
};

interface Expectation {
  readonly what: string;
  readonly status: number;
  readonly field?: string;
  readonly send: () => Promise<HttpAnswer>;
}

const inputCase: ChaosCase = {
  name: 'input',
  checks: 'invalid JSON, wrong types, unknown fields, 100 MB body, deep nesting, CR/LF in URL, since=2026-02-30, 64-bit integers byte for byte: documented 4xx naming the field; process healthy',
  limitMs: 90_000,
  async run(ctx) {
    const dir = ctx.tempDir();
    const sink = await recordingServer(ctx);
    const node = await heraldNode({ dbPath: join(dir, 'herald.db'), dir, allowNetworks: ['127.0.0.0/8'] });
    await node.start(ctx);
    const { id: endpointId } = await node.createEndpoint({ tenantId: 'input', url: `${sink.url}/ok` });
    const raw = (method: string, path: string, body: string): Promise<HttpAnswer> => node.api(method, path, body);
    const MB = 1024 * 1024;
    const hundredMB = (declared: boolean): Promise<HttpAnswer> => {
      const chunk = Buffer.alloc(MB, 0x20);
      const chunks = function* () {
        yield Buffer.from('{"tenantId":"input","type":"a.b","payload":"');
        for (let i = 0; i < 100; i++) yield chunk;
        yield Buffer.from('"}');
      };
      return http(node.port, '/v1/events', {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json', ...(declared ? { 'content-length': 100 * MB + 47 } : {}) },
        body: chunks(),
        timeoutMs: 30_000,
      });
    };
    const depth = 100_000;
    const expectations: Expectation[] = [
      { what: 'invalid JSON on POST /v1/events', status: 400, field: 'body', send: () => raw('POST', '/v1/events', '{"tenantId": "input", "type": ') },
      { what: 'invalid JSON on POST /v1/endpoints', status: 400, field: 'body', send: () => raw('POST', '/v1/endpoints', "{tenantId: 'x'}") },
      { what: 'wrong type: event tenantId a number', status: 400, field: 'tenantId', send: () => raw('POST', '/v1/events', '{"tenantId": 42, "type": "a.b", "payload": {}}') },
      { what: 'wrong type: endpoint timeoutMs a string', status: 400, field: 'timeoutMs', send: () => raw('POST', '/v1/endpoints', JSON.stringify({ tenantId: 'input', url: `${sink.url}/x`, timeoutMs: '5000' })) },
      { what: 'wrong type: event list of numbers', status: 400, send: () => raw('POST', '/v1/events', '[1, 2, 3]') },
      { what: 'unknown field on an event', status: 400, field: 'colour', send: () => raw('POST', '/v1/events', '{"tenantId": "input", "type": "a.b", "payload": {}, "colour": "red"}') },
      { what: 'unknown field on an endpoint', status: 400, field: 'colour', send: () => raw('POST', '/v1/endpoints', JSON.stringify({ tenantId: 'input', url: `${sink.url}/x`, colour: 'red' })) },
      { what: 'unknown field on an endpoint change (PATCH)', status: 400, field: 'colour', send: () => raw('PATCH', `/v1/endpoints/${endpointId}`, '{"colour": "red"}') },
      { what: '100 MB body with content-length', status: 413, field: 'body', send: () => hundredMB(true) },
      { what: '100 MB body streamed (chunked)', status: 413, field: 'body', send: () => hundredMB(false) },
      { what: `payload nested ${depth} deep`, status: 400, field: 'payload', send: () => raw('POST', '/v1/events', `{"tenantId": "input", "type": "a.b", "payload": ${'['.repeat(depth)}${']'.repeat(depth)}}`) },
      { what: 'CR LF in an endpoint URL (header injection)', status: 400, field: 'url', send: () => raw('POST', '/v1/endpoints', JSON.stringify({ tenantId: 'input', url: `${sink.url}/a\r\nX-Injected: 1` })) },
      { what: 'NUL and tab in an endpoint URL', status: 400, field: 'url', send: () => raw('POST', '/v1/endpoints', JSON.stringify({ tenantId: 'input', url: `${sink.url}/a\u0000\tb` })) },
      { what: 'impossible date since=2026-02-30', status: 400, field: 'since', send: () => node.api('GET', '/v1/deliveries?since=2026-02-30') },
      { what: 'impossible date until=2026-02-30T25:61:00Z', status: 400, field: 'until', send: () => node.api('GET', '/v1/deliveries?until=2026-02-30T25:61:00Z') },
      { what: 'limit=1e3 (not an integer literal)', status: 400, field: 'limit', send: () => node.api('GET', '/v1/deliveries?limit=1e3') },
    ];
    let passed = 0;
    for (const e of expectations) {
      const answer = await e.send().catch((error: Error) => ({ status: 0, text: `no answer: ${error.message}`, json: undefined }) as unknown as HttpAnswer);
      const error = errorOf(answer);
      const ok = answer.status === e.status && (e.field === undefined || error.field === e.field);
      if (ok) passed++;
      ctx.check(`${e.what} → ${e.status}${e.field === undefined ? '' : ` naming ${e.field}`}`, ok, `${answer.status} ${error.code ?? ''} field=${error.field ?? '—'} ${(error.message ?? answer.text).slice(0, 100)}`);
      if (answer.status === 201) {
        const created = (answer.json as { id?: string }).id;
        if (created !== undefined) await node.api('DELETE', `/v1/endpoints/${created}`);
      }
    }
    ctx.figure('4xx as documented', `${passed} of ${expectations.length}`);

    // A 64-bit integer and a 1.0, published over HTTP, must reach the consumer byte for byte.
    const payloadText = '{"big": 12345678901234567890, "float": 1.0}';
    const published = await raw('POST', '/v1/events', `{"tenantId": "input", "type": "big.number", "payload": ${payloadText}}`);
    const deadline = performance.now() + 10_000;
    let body: string | undefined;
    while (body === undefined && performance.now() < deadline) {
      body = sink.received.find((r) => r.headers['webhook-id'] === (published.json as { id?: string } | undefined)?.id)?.body;
      await sleep(50);
    }
    ctx.figure('64-bit payload at the sink', body ?? `not delivered (publish ${published.status})`);
    ctx.check('64-bit integer payload reaches the sink byte for byte', body === payloadText, `sent ${payloadText}, got ${body ?? `nothing (publish ${published.status})`}`);
    ctx.check(
      'the numbers survive at least (12345678901234567890 and 1.0 in the body)',
      body !== undefined && body.includes('12345678901234567890') && body.includes('1.0'),
      body ?? 'nothing arrived',
    );
    ctx.check('no request ever carried an injected header', sink.received.every((r) => r.headers['x-injected'] === undefined));

    const healthz = await http(node.port, '/healthz', { timeoutMs: 5_000 }).catch(() => undefined);
    const readyz = await http(node.port, '/readyz', { timeoutMs: 5_000 }).catch(() => undefined);
    ctx.figure('healthz after', `${healthz?.status ?? 'no answer'} in ${Math.round(healthz?.ms ?? NaN)} ms`);
    ctx.check('the process stays healthy (alive, /healthz and /readyz 200)', node.running && healthz?.status === 200 && readyz?.status === 200, `alive ${node.running}, healthz ${healthz?.status}, readyz ${readyz?.status}`);
    const [after] = await node.publish([{ tenantId: 'input', type: 'after.all', payload: { ok: true } }]);
    let delivered = false;
    for (let i = 0; i < 100 && !delivered; i++) {
      delivered = sink.received.some((r) => r.headers['webhook-id'] === after);
      await sleep(50);
    }
    ctx.check('a normal event is still delivered afterwards', delivered);
  },
};

const tokensCase: ChaosCase = {
  name: 'tokens',
  checks: 'no token, wrong token, other length, token in the query: 401 and no data in the answer; "bearer" in lower case accepted',
  limitMs: 30_000,
  async run(ctx) {
    const dir = ctx.tempDir();
    const node = await heraldNode({ dbPath: join(dir, 'herald.db'), dir, allowNetworks: [] });
    await node.start(ctx);
    const secretTenant = 'tenant-that-must-not-leak';
    const created = await node.createEndpoint({ tenantId: secretTenant, url: 'http://127.0.0.1:9/never', description: 'leak-canary' });
    const wrongSameLength = ADMIN_TOKEN.slice(0, -1) + (ADMIN_TOKEN.endsWith('A') ? 'B' : 'A');
    const forged: Array<{ what: string; headers: Record<string, string>; query?: string }> = [
      { what: 'no token', headers: {} },
      { what: 'wrong token, same length', headers: { authorization: `Bearer ${wrongSameLength}` } },
      { what: 'token one character short', headers: { authorization: `Bearer ${ADMIN_TOKEN.slice(0, -1)}` } },
      { what: 'token with a character more', headers: { authorization: `Bearer ${ADMIN_TOKEN}x` } },
      { what: 'empty bearer', headers: { authorization: 'Bearer ' } },
      { what: 'Basic scheme with the token', headers: { authorization: `Basic ${Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64')}` } },
      { what: 'token in the query string (?token=)', headers: {}, query: `token=${ADMIN_TOKEN}` },
      { what: 'token in the query string (?access_token=)', headers: {}, query: `access_token=${ADMIN_TOKEN}` },
    ];
    const paths = ['/v1/status', '/v1/endpoints', `/v1/endpoints/${created.id}`, '/v1/deliveries', '/v1/dead-letters', '/v1/no-such-route'];
    let refused = 0;
    let total = 0;
    for (const f of forged) {
      const bad: string[] = [];
      for (const path of paths) {
        const answer = await http(node.port, f.query === undefined ? path : `${path}?${f.query}`, { headers: f.headers });
        total++;
        const leaked = [secretTenant, 'leak-canary', created.id, 'whsec_', ADMIN_TOKEN].filter((s) => answer.text.includes(s));
        if (answer.status === 401 && leaked.length === 0 && errorOf(answer).code === 'HERALD_UNAUTHORIZED') refused++;
        else bad.push(`${path} → ${answer.status}${leaked.length > 0 ? ` leaking ${leaked.join(',')}` : ''}`);
      }
      ctx.check(`${f.what}: 401 HERALD_UNAUTHORIZED on ${paths.length} routes, nothing leaked`, bad.length === 0, bad.join('; '));
    }
    const post = await http(node.port, '/v1/events', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tenantId: secretTenant, type: 'a.b', payload: {} }) });
    ctx.check('POST /v1/events without a token: 401 and nothing stored', post.status === 401 && ((await node.status())?.deliveries.pending ?? 0) === 0, `${post.status}`);
    for (const scheme of ['bearer', 'BEARER']) {
      const answer = await http(node.port, '/v1/status', { headers: { authorization: `${scheme} ${ADMIN_TOKEN}` } });
      ctx.check(`"${scheme} <token>" accepted (the scheme is case-insensitive)`, answer.status === 200, `${answer.status} ${errorOf(answer).code ?? ''}`);
    }
    const right = await http(node.port, '/v1/status', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    ctx.check('the right token works', right.status === 200, String(right.status));
    ctx.figure('forged requests refused', `${refused} of ${total}`);
  },
};

export const HOSTILE_INPUT_CASES: readonly ChaosCase[] = [ssrfCase, inputCase, tokensCase];
