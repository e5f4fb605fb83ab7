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

  context('when an endpoint has a rate limit', () => {
    it("shows each endpoint's limits: its concurrency, and its rate limit when it has one", async () => {
      f = await startStatus();
      const limited = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/a', rateLimit: { perSecond: 2.5, burst: 7 } })).endpoint;
      const plain = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: 'https://example.com/b', concurrency: 2 })).endpoint;
      const page = await browser!.newPage();
      try {
        await page.goto(`${f.base}/`);
        await page.fill('#token', TOKEN);
        await page.click('#login button');
        const limitedRow = page.locator(`tr[data-endpoint="${limited.id}"]`);
        await limitedRow.waitFor();
        expect(await limitedRow.innerText()).to.include('4 at once · 2.5/s, burst 7');
        const plainRow = await page.locator(`tr[data-endpoint="${plain.id}"]`).innerText();
        expect(plainRow).to.include('2 at once').and.not.include('/s');
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
