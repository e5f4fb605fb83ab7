/**
 * Where the trace context shows: the admin API (`POST /v1/events`, `GET /v1/deliveries/:id`), the
 * dashboard's attempts panel (in Chromium), and the documentation's table of span names.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import type { BrowserContext } from 'playwright-core';
import { resolveConfig } from '../../lib/config/config.ts';
import { ConfigError } from '../../lib/errors.ts';
import { SpanAttribute, SpanName } from '../../lib/tracing/span-names.ts';
import { launchChromiumOrSkip, type Chromium } from '../support/chromium.ts';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { startStatus, TOKEN, type StatusFixture } from '../api/status-fixture.ts';
import { registerSdk, type TestSdk } from './test-sdk.ts';

const OBSERVABILITY = readFileSync(new URL('../../docs/OBSERVABILITY.md', import.meta.url), 'utf8');

describe('Trace context in the admin API and the dashboard', function () {
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;
  let sdk: TestSdk | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await f?.close();
    f = undefined;
    await sdk?.close();
    sdk = undefined;
  });

  it('refuses a tracing.enabled that is not true or false, naming the key', () => {
    expect(() => resolveConfig({ tracing: { enabled: 'no' as never } })).to.throw(ConfigError, /tracing\.enabled/);
    expect(resolveConfig({}).tracing.enabled).to.equal(true);
  });

  it('documents every span name and attribute in docs/OBSERVABILITY.md', () => {
    for (const name of [...Object.values(SpanName), ...Object.values(SpanAttribute)]) expect(OBSERVABILITY, name).to.include(`\`${name}\``);
  });

  context('with an SDK registered', () => {
    it('answers POST /v1/events with each event\'s traceContext, and GET /v1/deliveries/:id with its event\'s', async () => {
      sdk = registerSdk();
      f = await startStatus();
      sink = await startServer(() => ({ status: 200 }));
      await f.t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const published = await f.api('POST', '/v1/events', { tenantId: 'acme', type: 'order.paid', payload: { n: 1 } });
      expect(published.status).to.equal(202);
      const [publish] = sdk.spans(SpanName.PUBLISH);
      const { traceId, spanId } = publish!.spanContext();
      expect(published.json.traceContext).to.deep.equal({ traceparent: `00-${traceId}-${spanId}-01` });
      const [attempt] = await attemptsSeen(f.t, 1);
      const delivery = await f.api('GET', `/v1/deliveries/${attempt!.deliveryId}`);
      expect(delivery.json.traceContext).to.deep.equal(published.json.traceContext);
    });
  });

  context('with no SDK registered', () => {
    it('answers traceContext null', async () => {
      f = await startStatus();
      sink = await startServer(() => ({ status: 200 }));
      await f.t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const published = await f.api('POST', '/v1/events', { tenantId: 'acme', type: 'order.paid', payload: {} });
      expect(published.json.traceContext).to.equal(null);
      const [attempt] = await attemptsSeen(f.t, 1);
      expect((await f.api('GET', `/v1/deliveries/${attempt!.deliveryId}`)).json.traceContext).to.equal(null);
    });
  });

  describe('the dashboard (in Chromium)', () => {
    let browser: BrowserContext | undefined;
    let chromium: Chromium | undefined;

    before(async function () {
      chromium = await launchChromiumOrSkip(this);
      browser = chromium.browser;
    });

    after(async () => {
      await chromium?.close();
    });

    it('shows the trace id of a delivery\'s event above its attempts', async () => {
      sdk = registerSdk();
      f = await startStatus();
      sink = await startServer(() => ({ status: 200 }));
      await f.t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const [event] = await f.t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: {} });
      const [attempt] = await attemptsSeen(f.t, 1);
      const traceId = event!.traceContext!.traceparent.split('-')[1]!;

      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const row = page.locator(`#log tr[data-delivery="${attempt!.deliveryId}"]`);
        await row.waitFor();
        await row.locator('button', { hasText: 'Attempts' }).click();
        await page.locator('#trace-id').waitFor();
        expect(await page.locator('#trace-id').innerText()).to.equal(traceId);
      } finally {
        await page.close();
      }
    });
  });
});
