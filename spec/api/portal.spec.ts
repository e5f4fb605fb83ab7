import { expect } from 'chai';
import { createHash, createPublicKey, verify as cryptoVerify } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { launchChromiumOrSkip, type Chromium } from '../support/chromium.ts';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { CHART_COLOURS, canvasPixels } from './canvas-pixels.ts';
import { expectOk, startStatus, type StatusFixture } from './status-fixture.ts';

describe('Portal (in Chromium, with a tenant token)', function () {
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

  /** Saves a full-page screenshot (kept in HERALD_KEEP_SCREENSHOTS, a folder, when set). */
  async function screenshot(page: Page, name: string): Promise<void> {
    shots ??= mkdtempSync(join(tmpdir(), 'herald-portal-'));
    const path = join(shots, `${name}.png`);
    await page.screenshot({ path, fullPage: true });
    expect(statSync(path).size).to.be.greaterThan(10_000);
    const keep = process.env.HERALD_KEEP_SCREENSHOTS;
    if (keep !== undefined) {
      mkdirSync(keep, { recursive: true });
      copyFileSync(path, join(keep, `${name}.png`));
    }
  }

  it("signs in with a tenant token, sees its endpoint, replays a dead letter, sends a test event, and is refused another tenant's endpoint", async () => {
    f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
    const { t } = f;
    let answer = 404;
    sink = await startServer(() => ({ status: answer, body: answer === 200 ? '{"received":true}' : 'no such hook' }));
    const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/acme`, description: 'billing' });
    const other = (await t.herald.createEndpoint({ tenantId: 'globex', url: `${sink.url}/globex` })).endpoint;
    const [event] = await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: { amount: 42 } });
    await attemptsSeen(t, 1);
    await t.herald.idle();
    // The failure rate is the cluster's, from the stored delivery minutes: write this node's.
    await t.herald.flushDeliveryMinutes();
    const [letter] = await t.herald.listDeadLetters({ tenantId: 'acme' });
    const { token } = await t.herald.tenantTokens.issue('acme', { name: 'acme developers' });

    const page = await browser!.newPage();
    page.on('dialog', (dialog) => void dialog.accept());
    try {
      await page.goto(`${f.base}/portal`);
      await page.fill('#token', token);
      await page.click('#login button');

      // Its endpoint, with its health; the other tenant's is nowhere.
      const row = page.locator(`tr[data-endpoint="${endpoint.id}"]`);
      await row.waitFor();
      expect(await row.innerText()).to.include('billing').and.include('failing since').and.include('100 %');
      expect(await page.locator('#who').innerText()).to.equal('tenant acme');
      expect(await page.locator('#msg').innerText(), 'the sign-in prompt is gone').to.equal('');
      expect(await page.content()).to.not.include(other.id);
      expect(await page.evaluate("sessionStorage.getItem('heraldPortalToken')")).to.equal(token);

      // The dead letter: Replay sends it again, with the same webhook-id.
      const dead = page.locator(`tr[data-dead-letter="${letter?.id}"]`);
      await dead.waitFor();
      expect(await dead.innerText()).to.include('invoice.paid').and.include('permanent: HTTP 404');
      await screenshot(page, '1-signed-in');
      answer = 200;
      await dead.locator('button', { hasText: 'Replay' }).click();
      await attemptsSeen(t, 2);
      await page.locator('#msg', { hasText: `Replayed ${letter?.id}` }).waitFor();
      expect(sink.received.map((r) => r.headers['webhook-id'])).to.deep.equal([event?.id, event?.id]);

      // A test event: its outcome shows as it happens, with the response body.
      await row.locator('button', { hasText: 'Send test event' }).click();
      await attemptsSeen(t, 3);
      await t.herald.idle();
      await page.evaluate('showTest()').catch(() => undefined);
      await page.locator('#test-status', { hasText: 'delivered' }).waitFor();
      expect(await page.locator('#test-result').innerText()).to.include('HTTP 200').and.include('{"received":true}');
      const test = sink.received.at(-1);
      expect(JSON.parse(test?.body ?? '{}')).to.include({ test: true, endpointId: endpoint.id });

      // The delivery log: a delivery's payload and its attempts.
      await page.evaluate('refresh()');
      const delivered = page.locator(`#log tr[data-status="delivered"]`, { hasText: 'invoice.paid' });
      await delivered.locator('button').click();
      await page.locator('#payload').waitFor();
      expect(JSON.parse(await page.locator('#payload').innerText())).to.deep.equal({ amount: 42 });
      expect(await page.locator('#detail tr[data-attempt]').count()).to.equal(2);
      expect(await page.locator('#detail').innerText()).to.include('HTTP 404').and.include('no such hook').and.include('HTTP 200');

      // Rotate secret: the new secret, shown once, is in the snippet, and it verifies what Herald sends next.
      await row.locator('button', { hasText: 'Rotate secret' }).click();
      const secret = await page.locator('#secret').innerText();
      expect(secret).to.match(/^whsec_/);
      expect(await page.locator('#snippet').innerText()).to.include(`new Webhook('${secret}')`);
      await row.locator('button', { hasText: 'Send test event' }).click();
      await attemptsSeen(t, 4);
      const signed = sink.received.at(-1)!;
      const verified = new Webhook(secret).verify(signed.body, signed.headers as Record<string, string>) as { test: boolean };
      expect(verified.test).to.equal(true);
      expect(sink.received.at(-1)?.headers['webhook-id']).to.match(/^evt_/);
      await screenshot(page, '2-after-test-and-rotate');

      // Another tenant's endpoint: refused as unknown.
      await page.fill('#search input[name="endpointId"]', other.id);
      await page.click('#search button');
      await page.locator('#msg', { hasText: `endpointId: unknown endpoint '${other.id}'` }).waitFor();
      expect(await page.locator('#log tr[data-delivery]').count()).to.equal(0);
      await screenshot(page, '3-refused-other-tenant');
      expect(t.attempts.filter((a) => a.endpointId === other.id)).to.deep.equal([]);
    } finally {
      await page.close();
    }
  });

  it("shows an endpoint's payload filter, tries another on a sample event, saves it and removes it", async () => {
    f = await startStatus();
    const filter = { 'payload.amount': { $gte: 100 } };
    const { endpoint } = await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/hook', eventTypes: ['order.*'], filter });
    const { token } = await f.t.herald.tenantTokens.issue('acme', { name: 'acme developers' });
    const page = await browser!.newPage();
    try {
      await page.goto(`${f.base}/portal`);
      await page.fill('#token', token);
      await page.click('#login button');
      const row = page.locator(`tr[data-endpoint="${endpoint.id}"]`);
      await row.waitFor();
      expect(await row.locator('[data-filter]').innerText()).to.equal(JSON.stringify(filter));

      await row.locator(`button[data-filter-edit="${endpoint.id}"]`).click();
      const form = page.locator('#filter-form');
      await form.waitFor();
      expect(JSON.parse(await form.locator('textarea[name=filter]').inputValue())).to.deep.equal(filter);
      const replacement = { 'payload.country': { $in: ['BR', 'PT'] } };
      await form.locator('textarea[name=filter]').fill(JSON.stringify(replacement));
      await form.locator('input[name=type]').fill('order.paid');
      await form.locator('textarea[name=payload]').fill('{"country": "US"}');
      await page.click('#filter-try');
      await page.locator('#filter-result.bad').waitFor();
      expect(await page.locator('#filter-result').innerText()).to.equal('Does not match: payload.country.$in failed.');
      expect((await f.t.herald.getEndpoint(endpoint.id)).filter, 'trying saves nothing').to.deep.equal(filter);
      await form.locator('textarea[name=payload]').fill('{"country": "PT"}');
      await page.click('#filter-try');
      await page.locator('#filter-result.ok').waitFor();

      await page.click('#filter-save');
      await page.locator('#msg', { hasText: 'Saved the filter' }).waitFor();
      expect((await f.t.herald.getEndpoint(endpoint.id)).filter).to.deep.equal(replacement);
      await form.locator('textarea[name=filter]').fill('{"payload.amount": {"$gte": true}}');
      await page.click('#filter-save');
      await page.locator('#msg.bad', { hasText: 'filter.payload.amount.$gte' }).waitFor();
      await page.click('#filter-remove');
      await page.locator('#msg', { hasText: 'Removed the filter' }).waitFor();
      expect((await f.t.herald.getEndpoint(endpoint.id)).filter).to.equal(null);
      await screenshot(page, 'portal-filter');
    } finally {
      await page.close();
    }
  });

  it('shows its dead letters and delivery log a page of 50 at a time; Older and Newer page through the cursor', async () => {
    f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
    const { t } = f;
    sink = await startServer(() => ({ status: 404 }));
    await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/acme` });
    await t.herald.createEndpoint({ tenantId: 'globex', url: `${sink.url}/globex` });
    await t.herald.publish(Array.from({ length: 53 }, (_, n) => ({ tenantId: 'acme', type: 'invoice.paid', payload: { n } })));
    await t.herald.publish({ tenantId: 'globex', type: 'invoice.paid', payload: {} });
    await attemptsSeen(t, 54);
    await t.herald.idle();
    const letters = (await t.herald.listDeadLetters({ tenantId: 'acme', limit: 1_000 })).map((d) => d.id);
    const deliveries = (await t.herald.listDeliveries({ tenantId: 'acme', limit: 1_000 })).map((d) => d.id);
    const { token } = await t.herald.tenantTokens.issue('acme', { name: 'acme developers' });

    const page = await browser!.newPage();
    try {
      await page.goto(`${f.base}/portal#token=${token}`);
      const shown = (list: string, attr: string) => page.locator(`#${list} tr[${attr}]`).evaluateAll((rows, a) => rows.map((r) => r.getAttribute(a)), attr);
      await page.locator('#dead tr[data-dead-letter]').first().waitFor();
      await page.locator('#log tr[data-delivery]').first().waitFor();
      expect(await shown('dead', 'data-dead-letter')).to.deep.equal(letters.slice(0, 50));
      expect(await shown('log', 'data-delivery')).to.deep.equal(deliveries.slice(0, 50));

      await page.click('#dead-older');
      await page.locator('#dead-at', { hasText: 'page 2' }).waitFor();
      expect(await shown('dead', 'data-dead-letter'), "the 3 older ones, none of another tenant's").to.deep.equal(letters.slice(50));
      await page.click('#log-older');
      await page.locator('#log-at', { hasText: 'page 2' }).waitFor();
      expect(await shown('log', 'data-delivery')).to.deep.equal(deliveries.slice(50));
      await page.click('#dead-newer');
      await page.locator('#dead-at', { hasText: 'page 1' }).waitFor();
      expect(await shown('dead', 'data-dead-letter')).to.deep.equal(letters.slice(0, 50));
    } finally {
      await page.close();
    }
  });

  it('lists an endpoint\'s events after sequence N in order, with their status, and pages on', async () => {
    f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
    const { t } = f;
    let answer = 404;
    sink = await startServer(() => ({ status: answer }));
    const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/acme` });
    await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: { n: 1 } });
    await attemptsSeen(t, 1);
    answer = 200;
    await t.herald.publish(Array.from({ length: 25 }, (_, i) => ({ tenantId: 'acme', type: 'invoice.paid', payload: { n: i + 2 } })));
    await attemptsSeen(t, 26);
    await t.herald.idle();
    const { token } = await t.herald.tenantTokens.issue('acme', { name: 'acme developers' });

    const page = await browser!.newPage();
    try {
      await page.goto(`${f.base}/portal#token=${token}`);
      await page.locator(`tr[data-endpoint="${endpoint.id}"] button`, { hasText: 'Events by sequence' }).click();
      await page.locator('#seq tr[data-sequence="1"]').waitFor();
      const sequences = async () => page.locator('#seq tr[data-sequence]').evaluateAll((rows) => rows.map((r) => Number(r.getAttribute('data-sequence'))));
      expect(await sequences()).to.deep.equal(Array.from({ length: 25 }, (_, i) => i + 1));
      expect(await page.locator('#seq tr[data-sequence="1"]').innerText()).to.include('dead');
      expect(await page.locator('#seq tr[data-sequence="2"]').innerText()).to.include('delivered');
      await page.click('#seq-more');
      await page.locator('#seq tr[data-sequence="26"]').waitFor();
      expect(await page.locator('#seq-more').isHidden()).to.equal(true);

      await page.fill('#seq-form input[name="after"]', '24');
      await page.click('#seq-form button');
      await page.locator('#seq tr[data-sequence="1"]').waitFor({ state: 'detached' });
      expect(await sequences()).to.deep.equal([25, 26]);
      await screenshot(page, '4-events-after-sequence');
    } finally {
      await page.close();
    }
  });

  it("draws the tenant's delivery charts from its own endpoints only: all of them or one picked, 1 h or 24 h", async () => {
    f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
    const { t } = f;
    sink = await startServer(() => ({ status: 200 }));
    const busy = await startServer(() => ({ status: 503 }));
    const gone = await startServer(() => ({ status: 404 }));
    try {
      // acme: 4 delivered, 1 retry scheduled (503), 1 dead-lettered (404). globex, in the same store: 3 delivered, 2 dead-lettered.
      const create = async (tenantId: string, url: string) => (await t.herald.createEndpoint({ tenantId, url: `${url}/${tenantId}` })).endpoint.id;
      const acme = { ok: await create('acme', sink.url), busy: await create('acme', busy.url), gone: await create('acme', gone.url) };
      const globex = { ok: await create('globex', sink.url), gone: await create('globex', gone.url) };
      const send = (tenantId: string, endpointId: string, count: number) =>
        t.herald.publish(Array.from({ length: count }, (_, n) => ({ tenantId, type: 'invoice.paid', endpointId, payload: { n } })));
      await send('acme', acme.ok, 4);
      await send('acme', acme.busy, 1);
      await send('acme', acme.gone, 1);
      await send('globex', globex.ok, 3);
      await send('globex', globex.gone, 2);
      await attemptsSeen(t, 11);
      await t.herald.idle();
      await t.herald.flushDeliveryMinutes();
      const total = (series: { points: Array<Record<string, number>> }, field: string) => series.points.reduce((n, p) => n + (p[field] ?? 0), 0);
      const everyone = await f.api('GET', '/v1/stats/series?endpointId=all');
      expectOk(everyone);
      expect(['attempts', 'delivered', 'deadLettered'].map((k) => total(everyone.json, k)), "the admin's series: both tenants").to.deep.equal([11, 7, 3]);
      const { token } = await t.herald.tenantTokens.issue('acme', {});

      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/portal`);
        await page.fill('#token', token);
        await page.click('#login button');
        await page.waitForFunction("deliveryCharts.lastSeries !== null && document.querySelectorAll('#chart-latency canvas').length === 1");
        const drawn = (await page.evaluate(`({ series: deliveryCharts.lastSeries, uplot: ['outcomes', 'ratio', 'latency'].every((name) =>
          document.getElementById('chart-' + name).contains(deliveryCharts.charts[name].root) && deliveryCharts.charts[name].data[1].length === 60) })`)) as {
          series: { endpointId: string; window: string; points: Array<Record<string, number>> }; uplot: boolean;
        };
        expect(drawn).to.deep.include({ uplot: true });
        expect(drawn.series).to.include({ endpointId: 'all', window: '1h' });
        expect(drawn.series.points).to.have.length(60);
        // acme's three endpoints and nothing of globex's.
        expect(['attempts', 'delivered', 'retriesScheduled', 'deadLettered', 'firstAttempts'].map((k) => total(drawn.series, k))).to.deep.equal([6, 4, 1, 1, 6]);
        expect(drawn.series.points.at(-1)?.firstAttemptSuccessRatio).to.be.closeTo(4 / 6, 1e-9);
        expect(await canvasPixels(page, '#chart-outcomes canvas', CHART_COLOURS.delivered), 'delivered line pixels').to.be.greaterThan(50);
        expect(await page.locator('#chart-outcomes .u-legend').innerText()).to.include('delivered').and.include('retries scheduled').and.include('dead-lettered');
        expect(await page.locator('#chart-note').innerText()).to.equal('all your endpoints, last hour, a point every minute');

        // The picker lists its own endpoints only.
        const options = (await page.evaluate("[...document.querySelectorAll('#chart-endpoint option')].map((o) => o.value)")) as string[];
        expect(options[0]).to.equal('all');
        expect(options.slice(1).sort()).to.deep.equal([acme.ok, acme.busy, acme.gone].sort());

        await page.selectOption('#chart-endpoint', acme.busy);
        await page.waitForFunction(`deliveryCharts.lastSeries.endpointId === ${JSON.stringify(acme.busy)}`);
        expect(await page.evaluate('deliveryCharts.lastSeries.points.at(-1)')).to.include({ attempts: 1, delivered: 0, retriesScheduled: 1, firstAttemptSuccessRatio: 0 });
        await page.selectOption('#chart-endpoint', 'all');
        await page.click('[data-window="24h"]');
        await page.waitForFunction("deliveryCharts.lastSeries.window === '24h' && deliveryCharts.lastSeries.endpointId === 'all'");
        const day = (await page.evaluate('deliveryCharts.lastSeries')) as { stepMs: number; points: Array<Record<string, number>> };
        expect([day.points.length, day.stepMs, total(day, 'delivered'), total(day, 'attempts')]).to.deep.equal([144, 600_000, 4, 6]);
        await page.click('[data-window="1h"]');
        await page.waitForFunction("deliveryCharts.lastSeries.window === '1h'");
        await screenshot(page, '4-charts');
      } finally {
        await page.close();
      }
    } finally {
      await busy.close();
      await gone.close();
    }
  });

  it("shows an ed25519 endpoint's scheme and public key; Rotate secret shows the new whpk_ and a node:crypto snippet that verifies", async () => {
    f = await startStatus();
    const { t } = f;
    sink = await startServer(() => ({ status: 200 }));
    const { endpoint, secret: first } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/acme`, signatureScheme: 'ed25519' });
    const { token } = await t.herald.tenantTokens.issue('acme', {});
    const page = await browser!.newPage();
    page.on('dialog', (dialog) => void dialog.accept());
    try {
      await page.goto(`${f.base}/portal#token=${token}`);
      const row = page.locator(`tr[data-endpoint="${endpoint.id}"]`);
      await row.waitFor();
      expect(await row.innerText()).to.include(`ed25519 ${first}`);
      await row.locator('button', { hasText: 'Rotate secret' }).click();
      const whpk = await page.locator('#secret').innerText();
      expect(whpk).to.match(/^whpk_/).and.not.equal(first);
      expect(await page.locator('#secret-line').innerText()).to.include('Public key (ed25519)').and.not.include('shown once');
      const snippet = await page.locator('#snippet').innerText();
      expect(snippet).to.include(whpk.slice(5)).and.include("startsWith('v1a,')").and.not.include('whsk_');
      await page.evaluate('refresh()');
      await row.locator('.public-key', { hasText: whpk }).waitFor();

      // The snippet's check, run as written, on what Herald sends next.
      await row.locator('button', { hasText: 'Send test event' }).click();
      await attemptsSeen(t, 1);
      const signed = sink.received.at(-1)!;
      const key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(whpk.slice(5), 'base64').toString('base64url') }, format: 'jwk' });
      const data = Buffer.concat([Buffer.from(`${String(signed.headers['webhook-id'])}.${String(signed.headers['webhook-timestamp'])}.`), Buffer.from(signed.body)]);
      const ok = String(signed.headers['webhook-signature']).split(' ').filter((x) => x.startsWith('v1a,'))
        .some((x) => cryptoVerify(null, data, key, Buffer.from(x.slice(4), 'base64')));
      expect(ok).to.equal(true);
    } finally {
      await page.close();
    }
  });

  it('takes the token from a #token= fragment, keeps it for the tab and clears it from the address bar', async () => {
    f = await startStatus();
    const { endpoint } = await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/hooks' });
    const { token } = await f.t.herald.tenantTokens.issue('acme', {});
    const page = await browser!.newPage();
    try {
      await page.goto(`${f.base}/portal#token=${token}`);
      await page.locator(`tr[data-endpoint="${endpoint.id}"]`).waitFor();
      expect(page.url()).to.equal(`${f.base}/portal`);
      expect(await page.locator('#login').isVisible()).to.equal(false);
    } finally {
      await page.close();
    }
  });

  it('serves the page itself without a token, with no data in it and nothing from another origin', async () => {
    f = await startStatus();
    await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/hooks' });
    const reply = await f.api('GET', '/portal', undefined, null);
    expect(reply.status).to.equal(200);
    expect(String(reply.headers['content-type'])).to.include('text/html');
    expect(reply.text).to.not.include('acme');
    // What it loads: uPlot and Herald's chart script and styles, from Herald's own /assets/, without a token.
    const loaded = [...reply.text.matchAll(/<(?:script|link)[^>]+(?:src|href)="([^"]*)"/g)].map((m) => m[1] ?? '');
    expect(loaded.map((url) => url.replace(/\?v=[\w-]+$/, '?v=…'))).to.deep.equal(['/assets/uplot.min.css', '/assets/uplot.iife.min.js', '/assets/herald-charts.js?v=…']);
    for (const url of loaded) expect((await f.api('GET', url, undefined, null)).status, url).to.equal(200);
    // The chart script's ?v= is a digest of the text served, so a changed script has a new URL (no stale cached copy).
    const script = await f.api('GET', '/assets/herald-charts.js', undefined, null);
    expect(loaded[2]).to.equal(`/assets/herald-charts.js?v=${createHash('sha256').update(script.text).digest('base64url').slice(0, 12)}`);
  });
});
