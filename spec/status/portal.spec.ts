import { expect } from 'chai';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { TEST_EVENT_TYPE } from '../../lib/herald.ts';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { startStatus, type StatusFixture } from './status-fixture.ts';

const CHROMIUM = '/usr/bin/chromium';

describe('Portal (in Chromium, with a tenant token)', function () {
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
    expect(reply.text).to.not.match(/<script[^>]+src=|<link[^>]+href=/);
  });
});
