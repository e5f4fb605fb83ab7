import { expect } from 'chai';
import { existsSync, mkdtempSync, rmSync, statSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { startStatus, TOKEN, type StatusFixture } from './status-fixture.ts';

const CHROMIUM = '/usr/bin/chromium';

describe('Dashboard (in Chromium)', function () {
  let browser: BrowserContext | undefined;
  let profile: string | undefined;
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;
  let shots: string | undefined;

  // One browser for the whole file; the test skips, saying why, when Chromium is missing or cannot start.
  before(async function () {
    if (!existsSync(CHROMIUM)) {
      console.log(`      (skipped: ${CHROMIUM} is missing; .ci/run installs it with apt-get install chromium)`);
      this.skip();
    }
    profile = mkdtempSync(join(tmpdir(), 'herald-chromium-'));
    try {
      browser = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
        viewport: { width: 1400, height: 1000 },
      });
    } catch (error) {
      console.log(`      (skipped: Chromium did not launch: ${String((error as Error).message).split('\n')[0]})`);
      this.skip();
    }
  });

  after(async () => {
    await browser?.close();
    if (profile !== undefined) rmSync(profile, { recursive: true, force: true });
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
});
