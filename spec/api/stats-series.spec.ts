/**
 * The delivery charts' data through a real Herald (SQLite, ManualClock) and its status server on
 * 127.0.0.1: attempts against real sinks, counted per minute, flushed, read back by
 * `GET /v1/stats/series`; the chart library's files; retention and the flush on close.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { request } from 'undici';
import { ManualClock, seededRandom } from '../../lib/clock.ts';
import { resolveConfig } from '../../lib/config/config.ts';
import { StoreError } from '../../lib/errors.ts';
import { Herald } from '../../lib/herald.ts';
import type { Store } from '../../lib/store/port.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { MINUTE_MS, minuteOf } from '../../lib/store/delivery-minutes.ts';
import { attemptsSeen, LOOPBACK, nextEvent, startHerald, startServer, type TestServer } from '../support/harness.ts';
import { expectOk, startStatus, type StatusFixture } from './status-fixture.ts';

const HOUR = 60 * MINUTE_MS;

describe('Delivery series (GET /v1/stats/series)', () => {
  let f: StatusFixture | undefined;
  const sinks: TestServer[] = [];

  afterEach(async () => {
    for (const sink of sinks.splice(0)) await sink.close();
    await f?.close();
    f = undefined;
  });

  /** Two endpoints of acme: `ok` answers 200, `busy` 503 (a retry each time); three events to ok, one to busy, attempted. */
  async function delivered(): Promise<{ ok: string; busy: string }> {
    f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
    const okSink = await startServer(() => ({ status: 200 }));
    const busySink = await startServer(() => ({ status: 503 }));
    sinks.push(okSink, busySink);
    const ok = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: `${okSink.url}/hooks` })).endpoint.id;
    const busy = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: `${busySink.url}/hooks` })).endpoint.id;
    await f.t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'acme', type: 'invoice.paid', endpointId: ok, payload: { n } })));
    await f.t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', endpointId: busy, payload: { n: 4 } });
    await attemptsSeen(f.t, 4);
    await f.t.herald.idle();
    return { ok, busy };
  }

  context('when attempts have been counted and flushed', () => {
    it("answers every endpoint's last hour a point a minute: delivered, retries scheduled, first-attempt success ratio, latency", async () => {
      await delivered();
      const before = await f!.api('GET', '/v1/stats/series?endpointId=all&window=1h');
      expectOk(before);
      expect(before.json.points.every((p: { attempts: number }) => p.attempts === 0), 'nothing written before the flush').to.equal(true);

      await f!.t.herald.flushDeliveryMinutes();
      const reply = await f!.api('GET', '/v1/stats/series?endpointId=all&window=1h');
      expectOk(reply);
      const now = f!.t.clock.now();
      expect(reply.json).to.include({ endpointId: 'all', window: '1h', stepMs: MINUTE_MS, to: minuteOf(now) + MINUTE_MS });
      expect(reply.json.points).to.have.length(60);
      const last = reply.json.points.at(-1);
      expect(last).to.include({ at: minuteOf(now), attempts: 4, delivered: 3, retriesScheduled: 1, deadLettered: 0, firstAttempts: 4, firstAttemptSuccessRatio: 0.75 });
      expect(last.latencyP50Ms).to.be.a('number');
      expect(last.latencyP95Ms).to.be.at.least(last.latencyP50Ms);
    });

    it("answers one endpoint's alone, and the last 24 h in 144 points of 10 minutes", async () => {
      const { busy } = await delivered();
      await f!.t.herald.flushDeliveryMinutes();
      const one = await f!.api('GET', `/v1/stats/series?endpointId=${busy}`);
      expectOk(one);
      expect(one.json.window).to.equal('1h');
      expect(one.json.points.at(-1)).to.include({ attempts: 1, delivered: 0, retriesScheduled: 1, firstAttemptSuccessRatio: 0 });

      const day = await f!.api('GET', '/v1/stats/series?endpointId=all&window=24h');
      expectOk(day);
      expect(day.json.stepMs).to.equal(10 * MINUTE_MS);
      expect(day.json.points).to.have.length(144);
      expect(day.json.points.reduce((n: number, p: { delivered: number }) => n + p.delivered, 0)).to.equal(3);
    });
  });

  context('when the query is wrong', () => {
    it('answers 400 naming the parameter and its rule, 404 for an unknown endpoint, 401 without the token', async () => {
      f = await startStatus();
      const window = await f.api('GET', '/v1/stats/series?endpointId=all&window=2h');
      expect(window.status).to.equal(400);
      expect(window.json.error).to.include({ code: 'HERALD_INVALID_INPUT', field: 'window' });
      expect(window.json.error.rule).to.include('1h, 24h');
      const missing = await f.api('GET', '/v1/stats/series?window=1h');
      expect(missing.status).to.equal(400);
      expect(missing.json.error.field).to.equal('endpointId');
      const unknown = await f.api('GET', '/v1/stats/series?endpointId=ep_nobody');
      expect(unknown.status).to.equal(404);
      expect(unknown.json.error.field).to.equal('endpointId');
      expect((await f.api('GET', '/v1/stats/series?endpointId=all', undefined, null)).status).to.equal(401);
    });
  });

  context('when the minutes are older than retention.deliveryMinutesKeepMs (48 h by default)', () => {
    it('the retention purge deletes them, and keeps younger ones', async () => {
      await delivered();
      await f!.t.herald.flushDeliveryMinutes();
      const store = f!.t.herald.store;
      const everything = () => store.deliveryMinutes({ scope: { kind: 'all' }, from: 0, to: f!.t.clock.now() + HOUR });
      f!.t.clock.advance(47 * HOUR);
      await f!.t.herald.purge();
      expect(await everything()).to.have.length(1);
      f!.t.clock.advance(2 * HOUR);
      await f!.t.herald.purge();
      expect(await everything()).to.deep.equal([]);
    });
  });

  context('when the store refuses the write', () => {
    it('reports an engine failure and writes the same counts, once, with the next flush', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'herald-spec-'));
      const clock = new ManualClock(Date.now());
      const inner = new SqliteStore({ path: join(dir, 'herald.db'), clock });
      let refusing = true;
      const store = new Proxy(inner, {
        get(target, key, receiver) {
          if (key === 'addDeliveryMinutes' && refusing) return async () => Promise.reject(new StoreError('sqlite: disk I/O error'));
          const value = Reflect.get(target, key, receiver) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      }) as Store;
      const config = resolveConfig({ store: `sqlite:${join(dir, 'herald.db')}`, dataDir: dir, allowNetworks: [...LOOPBACK], logLevel: 'silent' });
      const herald = await Herald.open(config, { clock, random: seededRandom(7), store });
      const sink = await startServer(() => ({ status: 200 }));
      sinks.push(sink);
      try {
        await herald.start();
        const { endpoint } = await herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/hooks` });
        const attempted = nextEvent(herald.events, 'attempt');
        await herald.publish({ tenantId: 'acme', type: 'invoice.paid', endpointId: endpoint.id, payload: {} });
        await attempted;
        await herald.idle();
        const failure = nextEvent(herald.events, 'failure');
        await herald.flushDeliveryMinutes();
        expect((await failure).where).to.equal('delivery minutes');
        refusing = false;
        await herald.flushDeliveryMinutes();
        await herald.flushDeliveryMinutes();
        const minutes = await inner.deliveryMinutes({ scope: { kind: 'all' }, from: 0, to: clock.now() + HOUR });
        expect(minutes.map((m) => [m.attempts, m.delivered])).to.deep.equal([[1, 1]]);
      } finally {
        await herald.close();
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  context('when Herald closes', () => {
    it('writes the counts not flushed yet before the store closes', async () => {
      const t = await startHerald({ breaker: { volumeThreshold: 1_000 } });
      const sink = await startServer(() => ({ status: 200 }));
      sinks.push(sink);
      let store: SqliteStore | undefined;
      try {
        const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/hooks` });
        await t.herald.publish([1, 2].map((n) => ({ tenantId: 'acme', type: 'invoice.paid', endpointId: endpoint.id, payload: { n } })));
        await attemptsSeen(t, 2);
        await t.herald.idle();
        await t.herald.close();
        store = new SqliteStore({ path: t.dbPath, clock: t.clock });
        await store.init({ slotCount: t.herald.slotCount });
        const minutes = await store.deliveryMinutes({ scope: { kind: 'endpoints', endpointIds: [endpoint.id] }, from: 0, to: t.clock.now() + HOUR });
        expect(minutes.map((m) => [m.attempts, m.delivered])).to.deep.equal([[2, 2]]);
      } finally {
        await store?.close();
        rmSync(t.dir, { recursive: true, force: true });
      }
    });
  });
});

describe('Chart assets (GET /assets/…)', () => {
  let f: StatusFixture | undefined;

  afterEach(async () => {
    await f?.close();
    f = undefined;
  });

  for (const [path, type, start] of [
    ['/assets/uplot.iife.min.js', 'text/javascript; charset=utf-8', '/*! https://github.com/leeoniya/uPlot (v1.6.32) */\nvar uPlot'],
    ['/assets/uplot.min.css', 'text/css; charset=utf-8', '.uplot'],
    ['/assets/herald-charts.js', 'text/javascript; charset=utf-8', "/* Herald's delivery charts"],
  ] as const) {
    it(`serves ${path} without a token, cached, 304 when unchanged`, async () => {
      f = await startStatus({}, { start: false });
      const reply = await request(`${f.base}${path}`);
      const body = await reply.body.text();
      expect(reply.statusCode).to.equal(200);
      expect(reply.headers['content-type']).to.equal(type);
      expect(reply.headers['cache-control']).to.equal('public, max-age=86400');
      expect(body.startsWith(start), body.slice(0, 40)).to.equal(true);
      const etag = String(reply.headers.etag);
      expect(etag).to.match(/^"[\w-]{43}"$/);
      const again = await request(`${f.base}${path}`, { headers: { 'if-none-match': etag } });
      expect(again.statusCode).to.equal(304);
      expect(await again.body.text()).to.equal('');
    });
  }
});
