import { expect } from 'chai';
import { mkdtempSync, rmSync, statSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { launchChromiumOrSkip, type Chromium } from '../support/chromium.ts';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { tlsFixture } from '../support/egress-parts.ts';
import { CHART_COLOURS, canvasPixels } from './canvas-pixels.ts';
import { startStatus, TOKEN, type StatusFixture } from './status-fixture.ts';

describe('Dashboard (in Chromium)', function () {
  let browser: BrowserContext | undefined;
  let chromium: Chromium | undefined;
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;
  let shots: string | undefined;

  // One browser for the whole file; the suite skips, saying why, when Chromium is missing or cannot start.
  before(async function () {
    chromium = await launchChromiumOrSkip(this);
    browser = chromium.browser;
  });

  after(async () => {
    await chromium?.close();
  });

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await f?.close();
    f = undefined;
    if (shots !== undefined) rmSync(shots, { recursive: true, force: true });
    shots = undefined;
  });

  context('when an endpoint has a dead letter', () => {
    it('shows the endpoint and the dead letter; pressing Replay delivers it', async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      const { t } = f;
      let answer = 404;
      sink = await startServer(() => ({ status: answer }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/hooks`, description: 'billing' });
      const [event] = await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: { amount: 42 } });
      await attemptsSeen(t, 1);
      await t.herald.idle();
      // The failure rates are the cluster's, from the stored delivery minutes: write this node's.
      await t.herald.flushDeliveryMinutes();
      const [letter] = await t.herald.listDeadLetters({});

      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const row = page.locator(`tr[data-endpoint="${endpoint.id}"]`);
        await row.waitFor();
        expect(await row.innerText()).to.include('acme').and.include('closed').and.include('100 %').and.include('failing since');
        const dead = page.locator(`tr[data-dead-letter="${letter?.id}"]`);
        await dead.waitFor();
        expect(await dead.innerText()).to.include('invoice.paid').and.include(event?.id ?? '?').and.include('permanent: HTTP 404');
        expect(await page.evaluate("sessionStorage.getItem('heraldToken')")).to.equal(TOKEN);

        answer = 200;
        await dead.locator('button', { hasText: 'Replay' }).click();
        await attemptsSeen(t, 2);
        await page.locator('#log tr[data-status="delivered"]').waitFor();
        await page.locator('#dead td.empty').waitFor();
        expect(await page.locator('#msg').innerText()).to.include(`Replayed ${letter?.id}`);
        expect(sink.received.map((r) => r.headers['webhook-id'])).to.deep.equal([event?.id, event?.id]);
        await t.herald.idle();
        await t.herald.flushDeliveryMinutes();
        await page.evaluate('refresh()');
        await page.locator(`tr[data-endpoint="${endpoint.id}"]`, { hasText: '50 %' }).waitFor();
        expect(await row.innerText()).to.include('healthy');
        expect(await page.locator('#login').isVisible()).to.equal(false);

        shots = mkdtempSync(join(tmpdir(), 'herald-dashboard-'));
        const shot = join(shots, 'dashboard.png');
        await page.screenshot({ path: shot, fullPage: true });
        expect(statSync(shot).size).to.be.greaterThan(10_000);
        if (process.env.HERALD_KEEP_SCREENSHOT) copyFileSync(shot, process.env.HERALD_KEEP_SCREENSHOT);
      } finally {
        await page.close();
      }
    });
  });

  context('when deliveries have been made and counted', () => {
    it('draws the charts with uPlot from the series it fetched: every endpoint or one, 1 h or 24 h', async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      const { t } = f;
      const okSink = await startServer(() => ({ status: 200 }));
      const failing = await startServer(() => ({ status: 503 }));
      const gone = await startServer(() => ({ status: 404 }));
      const extra = [failing, gone];
      sink = okSink;
      try {
        const ok = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${okSink.url}/hooks`, description: 'billing' })).endpoint;
        const retrying = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${failing.url}/hooks` })).endpoint;
        const dead = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${gone.url}/hooks` })).endpoint;
        await t.herald.publish(Array.from({ length: 6 }, (_, n) => ({ tenantId: 'acme', type: 'invoice.paid', endpointId: ok.id, payload: { n } })));
        await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', endpointId: retrying.id, payload: { n: 7 } });
        await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', endpointId: dead.id, payload: { n: 8 } });
        await attemptsSeen(t, 8);
        await t.herald.idle();
        await t.herald.flushDeliveryMinutes();

        const page = await browser!.newPage();
        try {
          await page.goto(`${f.base}/`);
          await page.fill('#token', TOKEN);
          await page.click('#login button');
          await page.waitForFunction("typeof deliveryCharts.lastSeries === 'object' && deliveryCharts.lastSeries !== null && document.querySelectorAll('#chart-latency canvas').length === 1");
          const fetched = (await page.evaluate(`({ endpointId: deliveryCharts.lastSeries.endpointId, window: deliveryCharts.lastSeries.window, points: deliveryCharts.lastSeries.points.length,
            last: deliveryCharts.lastSeries.points.at(-1),
            // uPlot's constructor answers a plain object: an instance is one with its root element, drawn from 60 points.
            uplot: typeof uPlot === 'function' && ['outcomes', 'ratio', 'latency'].every((name) => typeof deliveryCharts.charts[name].setData === 'function'
              && document.getElementById('chart-' + name).contains(deliveryCharts.charts[name].root) && deliveryCharts.charts[name].data[1].length === 60) })`)) as {
            endpointId: string; window: string; points: number; last: Record<string, number>; uplot: boolean;
          };
          expect(fetched).to.deep.include({ endpointId: 'all', window: '1h', points: 60, uplot: true });
          expect(fetched.last).to.include({ attempts: 8, delivered: 6, retriesScheduled: 1, deadLettered: 1, firstAttemptSuccessRatio: 0.75 });

          // The delivered line (#0a7d2c) is on the outcomes canvas, and the latency points on the latency canvas.
          expect(await canvasPixels(page, '#chart-outcomes canvas', CHART_COLOURS.delivered), 'delivered line pixels').to.be.greaterThan(50);
          // One minute has attempts: its p50 and p95 are a point each (drawn filled, 7 px; p95 over p50 when they are equal).
          expect((await canvasPixels(page, '#chart-latency canvas', CHART_COLOURS.latencyP50)) + (await canvasPixels(page, '#chart-latency canvas', CHART_COLOURS.latencyP95)), 'latency point pixels').to.be.greaterThan(15);
          expect(await page.locator('#chart-outcomes .u-legend').innerText()).to.include('delivered').and.include('retries scheduled').and.include('dead-lettered');

          await page.click('[data-window="24h"]');
          await page.waitForFunction("deliveryCharts.lastSeries.window === '24h'");
          expect(await page.evaluate('[deliveryCharts.lastSeries.points.length, deliveryCharts.lastSeries.stepMs, deliveryCharts.lastSeries.points.at(-1).delivered]')).to.deep.equal([144, 600_000, 6]);
          expect(await page.locator('#chart-outcomes-title').innerText()).to.include('per 10 minutes');

          await page.selectOption('#chart-endpoint', retrying.id);
          await page.waitForFunction(`deliveryCharts.lastSeries.endpointId === ${JSON.stringify(retrying.id)}`);
          expect(await page.evaluate('deliveryCharts.lastSeries.points.at(-1)')).to.include({ attempts: 1, delivered: 0, retriesScheduled: 1, firstAttemptSuccessRatio: 0 });
          await page.selectOption('#chart-endpoint', 'all');
          await page.click('[data-window="1h"]');
          await page.waitForFunction("deliveryCharts.lastSeries.window === '1h' && deliveryCharts.lastSeries.endpointId === 'all'");

          shots = mkdtempSync(join(tmpdir(), 'herald-dashboard-'));
          const shot = join(shots, 'charts.png');
          await page.locator('#charts-section').screenshot({ path: shot });
          expect(statSync(shot).size).to.be.greaterThan(10_000);
          if (process.env.HERALD_KEEP_CHART_SCREENSHOT) copyFileSync(shot, process.env.HERALD_KEEP_CHART_SCREENSHOT);
        } finally {
          await page.close();
        }
      } finally {
        for (const server of extra) await server.close();
      }
    });
  });

  context('when an endpoint fails the same way many times', () => {
    it('shows one group with its count, kind and sample; pressing its Replay replays the whole group', async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      const { t } = f;
      let answer = 404;
      sink = await startServer(() => ({ status: answer, body: 'no such hook' }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/hooks` });
      await t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'acme', type: 'invoice.paid', payload: { n } })));
      await attemptsSeen(t, 3);
      await t.herald.idle();

      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const group = page.locator(`tr[data-group="${endpoint.id} http-404"]`);
        await group.waitFor();
        expect(await page.locator('#groups tr[data-group]').count()).to.equal(1);
        const text = await group.innerText();
        expect(text).to.include('http-404').and.include('3').and.include('HTTP 404').and.include('no such hook');

        answer = 200;
        await group.locator('button', { hasText: 'Replay' }).click();
        await page.locator('#msg', { hasText: `Replayed http-404 on ${endpoint.id}: 3 dead letter(s) replayed` }).waitFor();
        await attemptsSeen(t, 6);
        await t.herald.idle();
        await page.evaluate('refresh()');
        await page.locator('#groups td.empty').waitFor();
        expect(sink.received).to.have.length(6);
      } finally {
        await page.close();
      }
    });
  });

  context('when an endpoint has custom headers and auth', () => {
    it('shows the header names with plain values, secret ones as ***, and the kind of auth', async () => {
      f = await startStatus();
      const { endpoint } = await f.t.herald.createEndpoint({
        tenantId: 'acme', url: 'https://example.com/h',
        headers: { 'X-Team': 'payments', 'X-Api-Key': { value: 'dash-secret-1', secret: true } }, auth: { type: 'bearer', token: 'dash-secret-2' },
      });
      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const endpointRow = page.locator(`tr[data-endpoint="${endpoint.id}"]`);
        await endpointRow.waitFor();
        const text = await endpointRow.innerText();
        expect(text).to.include('X-Team: payments · X-Api-Key: *** · auth: bearer');
        expect(await page.content()).to.not.include('dash-secret-1').and.not.include('dash-secret-2');
      } finally {
        await page.close();
      }
    });
  });

  context('when an endpoint has a payload filter', () => {
    it('shows it under the URL, escaped, and nothing for an endpoint without one', async () => {
      f = await startStatus();
      const filter = { 'payload.amount': { $gte: 100 }, 'payload.note': '<b>x</b>' };
      const filtered = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/a', filter })).endpoint;
      const plain = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/b' })).endpoint;
      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const row = page.locator(`tr[data-endpoint="${filtered.id}"]`);
        await row.waitFor();
        expect(await row.locator('[data-filter]').innerText()).to.equal(JSON.stringify(filter));
        expect(await page.locator(`tr[data-endpoint="${plain.id}"] [data-filter]`).count()).to.equal(0);
      } finally {
        await page.close();
      }
    });
  });

  context('when an endpoint has a rate limit', () => {
    it("shows each endpoint's limits: its concurrency, its rate limit when it has one, FIFO when it is", async () => {
      f = await startStatus();
      const limited = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/a', rateLimit: { perSecond: 2.5, burst: 7 } })).endpoint;
      const plain = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/b', concurrency: 2 })).endpoint;
      const fifo = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/c', concurrency: 3, ordering: 'fifo' })).endpoint;
      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const limitedRow = page.locator(`tr[data-endpoint="${limited.id}"]`);
        await limitedRow.waitFor();
        expect(await limitedRow.innerText()).to.include('4 at once · 2.5/s, burst 7');
        const plainRow = await page.locator(`tr[data-endpoint="${plain.id}"]`).innerText();
        expect(plainRow).to.include('2 at once').and.not.include('/s').and.not.include('FIFO');
        expect(await page.locator(`tr[data-endpoint="${fifo.id}"]`).innerText()).to.include('3 at once · FIFO, one per key');
      } finally {
        await page.close();
      }
    });
  });

  context('when endpoints sign with different schemes', () => {
    it("shows each endpoint's signing keys: the scheme, an ed25519 key's public key, a previous key's expiry; never a secret", async () => {
      f = await startStatus();
      const ed = await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/a', signatureScheme: 'ed25519' });
      const hmac = await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/b' });
      const rotated = await f.t.herald.rotateSecret(hmac.endpoint.id, { signatureScheme: 'ed25519' });
      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const edRow = page.locator(`tr[data-endpoint="${ed.endpoint.id}"]`);
        await edRow.waitFor();
        expect(await edRow.innerText()).to.include(`ed25519 ${ed.secret}`);
        const rotatedRow = await page.locator(`tr[data-endpoint="${hmac.endpoint.id}"]`).innerText();
        expect(rotatedRow).to.include(`ed25519 ${rotated.secret}`).and.match(/hmac-sha256 until \d{4}-/).and.not.include('whsec_');
        expect(await page.locator('#endpoints').innerText()).to.not.include('whsk_');
      } finally {
        await page.close();
      }
    });
  });

  context('when deliveries leave through a proxy and an endpoint has a client certificate', () => {
    it('shows the proxy (without its password) by the node, and the certificate\'s subject and expiry under the endpoint\'s URL', async () => {
      f = await startStatus({ delivery: { proxy: 'http://egress:s3cret@127.0.0.1:3128' } });
      const clientTls = { cert: tlsFixture('client.pem'), key: tlsFixture('client.key') };
      const withCert = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/m', clientTls })).endpoint;
      const plain = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/p' })).endpoint;
      const status = await f.api('GET', '/v1/status');
      expect(status.json.egress).to.deep.equal({ proxy: 'http://egress:***@127.0.0.1:3128' });
      expect(status.text).to.not.include('s3cret');
      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const certRow = page.locator(`tr[data-endpoint="${withCert.id}"]`);
        await certRow.waitFor();
        expect(await certRow.innerText()).to.include('mTLS CN=herald-client · expires 21');
        expect(await page.locator(`tr[data-endpoint="${plain.id}"]`).innerText()).to.not.include('mTLS');
        expect(await page.locator('#node').innerText()).to.include('egress via proxy http://egress:***@127.0.0.1:3128');
      } finally {
        await page.close();
      }
    });
  });

  context('when there are more dead letters and deliveries than a page holds', () => {
    it('shows a page of 50 of each; Older shows the next ones through the cursor, Newer goes back, a refresh keeps the page', async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      const { t } = f;
      sink = await startServer(() => ({ status: 404 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/hooks` });
      await t.herald.publish(Array.from({ length: 62 }, (_, n) => ({ tenantId: 'acme', type: 'invoice.paid', payload: { n } })));
      await attemptsSeen(t, 62);
      await t.herald.idle();
      const letters = (await t.herald.listDeadLetters({ limit: 1_000 })).map((d) => d.id);
      const deliveries = (await t.herald.listDeliveries({ limit: 1_000 })).map((d) => d.id);
      expect(letters).to.have.length(62);

      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const shown = (list: string, attr: string) => page.locator(`#${list} tr[${attr}]`).evaluateAll((rows, a) => rows.map((r) => r.getAttribute(a)), attr);
        await page.locator('#dead tr[data-dead-letter]').first().waitFor();
        await page.locator('#log tr[data-delivery]').first().waitFor();

        expect(await shown('dead', 'data-dead-letter'), 'the newest 50 dead letters').to.deep.equal(letters.slice(0, 50));
        expect(await page.locator('#dead-newer').isVisible()).to.equal(false);
        await page.click('#dead-older');
        await page.locator('#dead-at', { hasText: 'page 2' }).waitFor();
        expect(await shown('dead', 'data-dead-letter'), 'the 12 older ones, and only them').to.deep.equal(letters.slice(50));
        expect(await page.locator('#dead-older').isVisible(), 'no page after the last').to.equal(false);
        await page.evaluate('refresh()');
        expect(await shown('dead', 'data-dead-letter'), 'a refresh stays on the page').to.deep.equal(letters.slice(50));
        await page.click('#dead-newer');
        await page.locator('#dead-at', { hasText: 'page 1' }).waitFor();
        expect(await shown('dead', 'data-dead-letter')).to.deep.equal(letters.slice(0, 50));

        expect(await shown('log', 'data-delivery'), 'the newest 50 deliveries').to.deep.equal(deliveries.slice(0, 50));
        await page.click('#log-older');
        await page.locator('#log-at', { hasText: 'page 2' }).waitFor();
        expect(await shown('log', 'data-delivery')).to.deep.equal(deliveries.slice(50));
        await page.click('#search button');
        await page.locator('#log-at', { hasText: 'page 1' }).waitFor();
        expect(await shown('log', 'data-delivery'), 'a new search starts from the newest').to.deep.equal(deliveries.slice(0, 50));
      } finally {
        await page.close();
      }
    });
  });

  context('when dead letters wait for review', () => {
    it('shows each one\'s age and state and the overdue count; Acknowledge and Discard record the note and who', async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 }, deadLetters: { reviewWithinMs: 60_000 } });
      const { t } = f;
      sink = await startServer(() => ({ status: 404 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/hooks` });
      await t.herald.publish([1, 2].map((n) => ({ tenantId: 'acme', type: 'invoice.paid', payload: { n } })));
      await attemptsSeen(t, 2);
      await t.herald.idle();
      const [first, second] = await t.herald.listDeadLetters({});
      // Two hours later: both are past the 1 min review limit.
      t.clock.advance(2 * 3_600_000 + 5 * 60_000);

      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const rowOf = (id: string | undefined) => page.locator(`tr[data-dead-letter="${id}"]`);
        await rowOf(first?.id).waitFor();
        expect(await rowOf(first?.id).innerText()).to.include('2 h 5 min').and.include('new');
        expect(await page.locator('#unreviewed').innerText()).to.include('2').and.include('oldest 2 h 5 min').and.include('limit 1 min');
        expect(await page.locator('#unreviewed b').getAttribute('class')).to.equal('bad');

        await rowOf(first?.id).locator('button', { hasText: 'Acknowledge' }).click();
        await page.locator('#msg.bad', { hasText: 'Write a note and your name' }).waitFor();
        await page.fill('#triage-note', 'consumer deploys a fix tonight');
        await page.fill('#triage-by', 'alice');
        await rowOf(first?.id).locator('button', { hasText: 'Acknowledge' }).click();
        await page.locator(`tr[data-dead-letter="${first?.id}"][data-state="acknowledged"]`).waitFor();
        expect(await rowOf(first?.id).innerText()).to.include('by alice').and.include('consumer deploys a fix tonight');
        expect((await t.herald.getDeadLetter(first?.id ?? '')).triage).to.include({ state: 'acknowledged', by: 'alice' });

        expect(await rowOf(second?.id).locator('.pill').getAttribute('class'), 'new and past the limit: red').to.equal('pill bad');
        await page.fill('#triage-note', 'a test invoice, never to be sent');
        await rowOf(second?.id).locator('button', { hasText: 'Discard' }).click();
        await page.locator('#msg', { hasText: `Discarded ${second?.id}` }).waitFor();
        await rowOf(second?.id).waitFor({ state: 'detached' });
        await page.locator('#unreviewed', { hasText: '0' }).waitFor();
        await page.selectOption('#dead-state', 'discarded');
        await page.locator(`tr[data-dead-letter="${second?.id}"][data-state="discarded"]`).waitFor();
        expect(await rowOf(second?.id).innerText()).to.include('by alice').and.include('a test invoice');
        expect(await rowOf(second?.id).locator('button').count(), 'a closed dead letter has no actions').to.equal(0);
        expect((await t.herald.getDeadLetter(second?.id ?? '')).triage).to.include({ state: 'discarded', note: 'a test invoice, never to be sent' });
      } finally {
        await page.close();
      }
    });
  });
});
