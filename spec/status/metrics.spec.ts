import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { register } from 'prom-client';
import { METRIC_DOCS, MetricName } from '../../lib/status/metric-names.ts';
import { statusClassOf } from '../../lib/status/metrics.ts';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { expectOk, sample, startStatus, type StatusFixture } from '../api/status-fixture.ts';

const OBSERVABILITY = readFileSync(new URL('../../docs/OBSERVABILITY.md', import.meta.url), 'utf8');

describe('Metrics (GET /metrics)', () => {
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await f?.close();
    f = undefined;
  });

  context('after a scripted run: a success, a retry that then succeeds, and a dead letter', () => {
    it('counts each outcome, status class, first attempt, attempts per delivery, dead letter and latency, and reads the gauges at scrape time', async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      const { t } = f;
      const seen = new Map<string, number>();
      sink = await startServer((request) => {
        const n = seen.get(request.path) ?? 0;
        seen.set(request.path, n + 1);
        if (request.path === '/retry') return { status: n === 0 ? 500 : 200 };
        return { status: request.path === '/gone' ? 410 : 200 };
      });
      const ids: Record<string, string> = {};
      for (const path of ['ok', 'retry', 'gone']) {
        ids[path] = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/${path}` })).endpoint.id;
      }
      await t.herald.publish(['ok', 'retry', 'gone'].map((path) => ({ tenantId: 'acme', type: 'a.b', payload: { path }, endpointId: ids[path] })));
      const first = await attemptsSeen(t, 3);
      const retry = first.find((e) => e.settlement.kind === 'retry');
      if (retry?.settlement.kind !== 'retry') expect.fail('expected a retry');
      t.clock.advanceTo(retry.settlement.nextAttemptAt);
      await attemptsSeen(t, 4);
      await t.herald.idle();
      const waitedSec = (retry.settlement.nextAttemptAt - retry.eventCreatedAt) / 1000;

      const reply = await f.api('GET', '/metrics', undefined, null);
      expectOk(reply);
      expect(String(reply.headers['content-type'])).to.match(/^text\/plain/);
      const m = reply.text;
      expect(sample(m, MetricName.DELIVERIES, { outcome: 'delivered' })).to.equal(2);
      expect(sample(m, MetricName.DELIVERIES, { outcome: 'dead' })).to.equal(1);
      expect(sample(m, MetricName.RETRIES)).to.equal(1);
      expect(sample(m, `${MetricName.ATTEMPT_DURATION}_count`, { status_class: '2xx' })).to.equal(2);
      expect(sample(m, `${MetricName.ATTEMPT_DURATION}_count`, { status_class: '5xx' })).to.equal(1);
      expect(sample(m, `${MetricName.ATTEMPT_DURATION}_count`, { status_class: '4xx' })).to.equal(1);
      expect(sample(m, MetricName.FIRST_ATTEMPTS)).to.equal(3);
      expect(sample(m, MetricName.FIRST_ATTEMPT_SUCCESSES)).to.equal(1);
      expect(sample(m, MetricName.FIRST_ATTEMPT_SUCCESS_RATIO)).to.be.closeTo(1 / 3, 1e-9);
      expect(sample(m, `${MetricName.ATTEMPTS_PER_DELIVERY}_count`, { outcome: 'delivered' })).to.equal(2);
      expect(sample(m, `${MetricName.ATTEMPTS_PER_DELIVERY}_sum`, { outcome: 'delivered' })).to.equal(3);
      expect(sample(m, `${MetricName.ATTEMPTS_PER_DELIVERY}_bucket`, { outcome: 'delivered', le: '1' })).to.equal(1);
      expect(sample(m, `${MetricName.ATTEMPTS_PER_DELIVERY}_sum`, { outcome: 'dead' })).to.equal(1);
      expect(sample(m, MetricName.DEAD_LETTERS)).to.equal(1);
      expect(sample(m, `${MetricName.EVENT_TO_DELIVERY}_count`)).to.equal(2);
      expect(sample(m, `${MetricName.EVENT_TO_DELIVERY}_sum`)).to.be.closeTo(waitedSec, 0.001);
      expect(sample(m, MetricName.OPERATIONAL_EVENTS, { type: 'delivery.exhausted' })).to.equal(1);

      for (const id of Object.values(ids)) {
        expect(sample(m, MetricName.BREAKER_STATE, { endpoint: id }), id).to.equal(0);
        expect(sample(m, MetricName.MAILBOX_DEPTH, { endpoint: id }), id).to.equal(0);
        // Fixed endpoints: their concurrency (delivery.concurrencyPerEndpoint, 4).
        expect(sample(m, MetricName.CONCURRENCY_LIMIT, { endpoint: id }), id).to.equal(4);
      }
      expect(sample(m, MetricName.IN_FLIGHT)).to.equal(0);
      expect(sample(m, MetricName.SLOTS_OWNED)).to.equal(t.herald.leases.length).and.be.greaterThan(0);
      expect(sample(m, MetricName.DELIVERIES_BY_STATUS, { status: 'delivered' })).to.equal(2);
      expect(sample(m, MetricName.DELIVERIES_BY_STATUS, { status: 'dead' })).to.equal(1);
      expect(sample(m, MetricName.STORE_UP)).to.equal(1);
      expect(sample(m, MetricName.CHANGE_FEED_RESTARTS)).to.equal(0);
      expect(sample(m, MetricName.FENCED_WRITES)).to.equal(0);
      // No label carries an event id, a delivery id or a URL.
      expect(m).to.not.include('evt_').and.not.include('dlv_').and.not.include(sink.url);

      t.herald.events.emit('feedRestart', { reason: 'resume token lost' });
      expect(sample((await f.api('GET', '/metrics', undefined, null)).text, MetricName.CHANGE_FEED_RESTARTS)).to.equal(1);
    });
  });

  context('when events wait in the outbox', () => {
    it('reports how many in herald_outbox_unfanned_events, and 0 once they are fanned out', async () => {
      // Not started: nothing fans the published events out yet.
      f = await startStatus({}, { start: false });
      const { t } = f;
      await t.herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/hook' });
      await t.herald.publish(Array.from({ length: 3 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      expect(sample((await f.api('GET', '/metrics', undefined, null)).text, MetricName.OUTBOX_UNFANNED)).to.equal(3);
      expect((await f.api('GET', '/v1/status')).json).to.include({ unfannedEvents: 3 });

      await t.herald.start();
      await t.herald.idle();
      expect(sample((await f.api('GET', '/metrics', undefined, null)).text, MetricName.OUTBOX_UNFANNED)).to.equal(0);
    });
  });

  context('when the store does not answer a scrape', () => {
    it('still answers, with herald_store_up 0', async () => {
      f = await startStatus();
      const store = f.t.herald.store as { countDeliveries: () => Promise<unknown> };
      store.countDeliveries = async () => {
        throw new Error('database is locked');
      };
      const reply = await f.api('GET', '/metrics', undefined, null);
      expectOk(reply);
      expect(sample(reply.text, MetricName.STORE_UP)).to.equal(0);
      delete (store as Partial<typeof store>).countDeliveries;
    });
  });

  describe('names', () => {
    it('exposes every documented name, with its help, in a registry of its own (not the global one)', async () => {
      f = await startStatus();
      const text = (await f.api('GET', '/metrics', undefined, null)).text;
      for (const name of Object.values(MetricName)) {
        expect(text, name).to.include(`# HELP ${name} ${METRIC_DOCS[name].help}`);
        expect(text, name).to.include(`# TYPE ${name} ${METRIC_DOCS[name].type}`);
        expect(register.getSingleMetric(name), name).to.equal(undefined);
      }
    });

    it('lists every name in docs/OBSERVABILITY.md', () => {
      for (const name of Object.values(MetricName)) expect(OBSERVABILITY, name).to.include(`\`${name}\``);
    });
  });

  describe('statusClassOf', () => {
    it('maps each outcome to its bounded class', () => {
      const response = (status: number) => ({ kind: 'response', status, location: null, retryAfter: null, body: '' }) as const;
      expect([200, 204, 301, 404, 429, 503].map((s) => statusClassOf(response(s)))).to.deep.equal(['2xx', '2xx', '3xx', '4xx', '4xx', '5xx']);
      expect(statusClassOf({ kind: 'timeout', timeoutMs: 10 })).to.equal('timeout');
      expect(statusClassOf({ kind: 'network', code: 'ECONNREFUSED', message: '' })).to.equal('network');
      expect(statusClassOf({ kind: 'blocked', address: '10.0.0.1', message: '' })).to.equal('blocked');
    });
  });
});
