/**
 * The catalog on the dashboard (every type, its version, whether it is checked, deprecated ones) and
 * on the tenants' portal (the types a tenant can subscribe to, with descriptions, deprecated marked).
 */
import { expect } from 'chai';
import type { BrowserContext } from 'playwright-core';
import { launchChromiumOrSkip, type Chromium } from '../support/chromium.ts';
import { startStatus, TOKEN, type StatusFixture } from '../api/status-fixture.ts';

describe('The event-type catalog on the dashboard and the portal (in Chromium)', function () {
  let browser: BrowserContext | undefined;
  let chromium: Chromium | undefined;
  let f: StatusFixture | undefined;

  before(async function () {
    chromium = await launchChromiumOrSkip(this);
    browser = chromium.browser;
  });

  after(async () => {
    await chromium?.close();
  });

  beforeEach(async () => {
    f = await startStatus({}, { start: false });
    await f.t.herald.eventTypes.create({ name: 'invoice.paid', description: 'An invoice was paid <b>', schema: { type: 'object' } });
    await f.t.herald.eventTypes.update('invoice.paid', { schema: { type: 'object', required: ['amount'] } });
    await f.t.herald.eventTypes.create({ name: 'lead.created', description: 'A lead', deprecated: true, deprecationNote: 'use lead.opened' });
  });

  afterEach(async () => {
    await f?.close();
    f = undefined;
  });

  it('lists every type on the dashboard with its version, whether it is checked, and since when it is deprecated', async () => {
    const page = await browser!.newPage();
    try {
      await page.goto(`${f!.base}/`);
      await page.fill('#token', TOKEN);
      await page.click('#login button');
      const paid = page.locator('tr[data-event-type="invoice.paid"]');
      await paid.waitFor();
      expect((await paid.innerText()).split('\t').map((cell) => cell.trim())).to.deep.equal(['invoice.paid', '2', 'checked', '', 'An invoice was paid <b>']);
      const lead = await page.locator('tr[data-event-type="lead.created"]').innerText();
      expect(lead).to.include('none').and.match(/since \d{4}-\d{2}-\d{2} /);
    } finally {
      await page.close();
    }
  });

  it('lists the types a tenant can subscribe to on the portal, with descriptions, deprecated ones marked', async () => {
    await f!.t.herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/hook' });
    const { token } = await f!.t.herald.tenantTokens.issue('acme', {});
    const page = await browser!.newPage();
    try {
      await page.goto(`${f!.base}/portal`);
      await page.fill('#token', token);
      await page.click('#login button');
      const lead = page.locator('tr[data-event-type="lead.created"]');
      await lead.waitFor();
      expect(await lead.innerText()).to.include('A lead').and.include('deprecated').and.include('use lead.opened');
      expect(await page.locator('tr[data-event-type="invoice.paid"]').innerText()).to.include('An invoice was paid <b>').and.include('version 2').and.not.include('deprecated');
    } finally {
      await page.close();
    }
  });
});
