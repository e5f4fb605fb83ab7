import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { RETRY_PRESETS } from '../../lib/policy/retry-schedule.ts';
import type { AttemptEvent } from '../../lib/engine/engine-events.ts';
import { attemptsSeen, closedPort, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

describe('Delivery (engine, end to end on SQLite)', () => {
  let t: TestHerald;
  let server: TestServer | undefined;

  afterEach(async () => {
    await server?.close();
    server = undefined;
    await t?.close();
  });

  context('when the endpoint answers 200', () => {
    it('delivers the payload once with Standard Webhooks headers that an independent implementation verifies', async () => {
      t = await startHerald();
      server = await startServer(() => ({ status: 200 }));
      const { endpoint, secret } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${server.url}/hooks` });
      const [event] = await t.herald.publish({ tenantId: 'acme', type: 'lead.stage_changed', payload: { leadId: 7, stage: 'won' } });

      const [request] = await server.requests(1);
      expect(request?.path).to.equal('/hooks');
      expect(request?.headers['webhook-id']).to.equal(event?.id);
      expect(request?.headers['content-type']).to.match(/^application\/json/);
      expect(JSON.parse(request?.body ?? '')).to.deep.equal({ leadId: 7, stage: 'won' });
      const verified = new Webhook(secret).verify(request?.body ?? '', request?.headers as Record<string, string>);
      expect(verified).to.deep.equal({ leadId: 7, stage: 'won' });

      const [attempt] = await attemptsSeen(t, 1);
      expect(attempt?.settlement.kind).to.equal('delivered');
      const [delivery] = await t.herald.listDeliveries({ endpointId: endpoint.id });
      expect(delivery?.status).to.equal('delivered');
      expect(delivery?.attempts).to.equal(1);
      const attempts = await t.herald.listAttempts(delivery?.id ?? '');
      expect(attempts.map((a) => a.outcome.kind === 'response' && a.outcome.status)).to.deep.equal([200]);
    });
  });

  context('when the secret is being rotated', () => {
    it('signs with both secrets so that either verifies, and drops the old one after the overlap', async () => {
      t = await startHerald({ signing: { rotationOverlapMs: 60_000 } });
      server = await startServer(() => ({ status: 200 }));
      const { endpoint, secret: oldSecret } = await t.herald.createEndpoint({ tenantId: 'acme', url: server.url });
      const { secret: newSecret } = await t.herald.rotateSecret(endpoint.id);
      expect(newSecret).to.not.equal(oldSecret);

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
      const [during] = await server.requests(1);
      const headers = during?.headers as Record<string, string>;
      expect(headers['webhook-signature']?.split(' ')).to.have.length(2);
      expect(() => new Webhook(oldSecret).verify(during?.body ?? '', headers)).to.not.throw();
      expect(() => new Webhook(newSecret).verify(during?.body ?? '', headers)).to.not.throw();
      await attemptsSeen(t, 1);

      t.clock.advance(60_001);
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 2 } });
      const after = (await server.requests(2))[1];
      const afterHeaders = after?.headers as Record<string, string>;
      expect(afterHeaders['webhook-signature']?.split(' ')).to.have.length(1);
      expect(() => new Webhook(newSecret).verify(after?.body ?? '', afterHeaders)).to.not.throw();
      expect(() => new Webhook(oldSecret).verify(after?.body ?? '', afterHeaders)).to.throw();
    });
  });

  describe('classification of each outcome', () => {
    const cases: ReadonlyArray<{ name: string; answer: { status: number; headers?: Record<string, string> }; expected: 'pending' | 'dead' }> = [
      { name: '500', answer: { status: 500 }, expected: 'pending' },
      { name: '502', answer: { status: 502 }, expected: 'pending' },
      { name: '503', answer: { status: 503 }, expected: 'pending' },
      { name: '408', answer: { status: 408 }, expected: 'pending' },
      { name: '429', answer: { status: 429 }, expected: 'pending' },
      { name: '301 (not followed)', answer: { status: 301, headers: { location: 'http://127.0.0.1:1/elsewhere' } }, expected: 'dead' },
      { name: '400', answer: { status: 400 }, expected: 'dead' },
      { name: '410', answer: { status: 410 }, expected: 'dead' },
      { name: '422', answer: { status: 422 }, expected: 'dead' },
    ];
    for (const c of cases) {
      it(`${c.name} leaves the delivery ${c.expected === 'pending' ? 'pending a retry' : 'dead-lettered'}`, async () => {
        t = await startHerald();
        server = await startServer(() => c.answer);
        await t.herald.createEndpoint({ tenantId: 'acme', url: server.url });
        await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
        const [attempt] = await attemptsSeen(t, 1);
        expect(attempt?.settlement.kind).to.equal(c.expected === 'pending' ? 'retry' : 'dead');
        const [delivery] = await t.herald.listDeliveries({});
        expect(delivery?.status).to.equal(c.expected);
        expect(server.received).to.have.length(1);
        if (c.expected === 'pending') expect(delivery?.nextAttemptAt).to.be.greaterThan(t.clock.now());
        if (c.answer.status === 301) {
          const [letter] = await t.herald.listDeadLetters({});
          expect(letter?.lastOutcome).to.include({ kind: 'response', status: 301, location: 'http://127.0.0.1:1/elsewhere' });
        }
      });
    }

    it('connection refused is retried', async () => {
      t = await startHerald();
      await t.herald.createEndpoint({ tenantId: 'acme', url: `http://127.0.0.1:${await closedPort()}` });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      const [attempt] = await attemptsSeen(t, 1);
      expect(attempt?.outcome).to.include({ kind: 'network', code: 'ECONNREFUSED' });
      expect(attempt?.settlement.kind).to.equal('retry');
    });

    it('a timeout is retried, and a 200 that arrives after it is retried with the same webhook-id', async () => {
      t = await startHerald();
      server = await startServer((_, index) => (index === 0 ? 'hold' : { status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: server.url, timeoutMs: 2_000 });
      const [event] = await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await server.requests(1);
      t.clock.advance(2_000);
      const [first] = await attemptsSeen(t, 1);
      expect(first?.outcome).to.deep.equal({ kind: 'timeout', timeoutMs: 2_000 });
      expect(first?.settlement.kind).to.equal('retry');
      server.held[0]?.respond(200); // too late: the client has given up

      const retryAt = first?.settlement.kind === 'retry' ? first.settlement.nextAttemptAt : 0;
      t.clock.advanceTo(retryAt);
      const requests = await server.requests(2);
      expect(requests.map((r) => r.headers['webhook-id'])).to.deep.equal([event?.id, event?.id]);
      const [, second] = await attemptsSeen(t, 2);
      expect(second?.settlement.kind).to.equal('delivered');
    });
  });

  context('when the endpoint always fails', () => {
    it('makes 9 attempts at the default schedule (±20 % jitter) in fake time, then dead-letters all 9', async () => {
      t = await startHerald({ breaker: { volumeThreshold: 1_000 } });
      server = await startServer(() => ({ status: 503 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: server.url });
      const start = t.clock.now();
      const [event] = await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: { amount: 42 } });

      const times: number[] = [];
      for (let n = 1; n <= 9; n++) {
        const attempt = (await attemptsSeen(t, n))[n - 1];
        times.push(attempt?.startedAt ?? NaN);
        if (attempt?.settlement.kind === 'retry') t.clock.advanceTo(attempt.settlement.nextAttemptAt);
        else expect(n).to.equal(9);
      }
      const schedule = RETRY_PRESETS.default;
      expect(times[0]).to.equal(start);
      for (let i = 1; i < 9; i++) {
        const gap = (times[i] ?? 0) - (times[i - 1] ?? 0);
        const planned = schedule[i - 1] ?? 0;
        expect(gap, `gap before attempt ${i + 1}`).to.be.within(planned * 0.8, planned * 1.2);
      }
      expect(t.attempts.at(-1)?.settlement.kind).to.equal('dead');
      expect(server.received).to.have.length(9);

      const [letter] = await t.herald.listDeadLetters({ endpointId: endpoint.id });
      expect(letter?.eventId).to.equal(event?.id);
      expect(JSON.parse(letter?.payload ?? '')).to.deep.equal({ amount: 42 });
      expect(letter?.reason).to.match(/^exhausted after 9 attempts/);
      expect(letter?.attempts.map((a) => a.number)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9]);
      expect(letter?.attempts.map((a) => a.startedAt)).to.deep.equal(times);
      expect(letter?.attempts.every((a) => a.error === 'HTTP 503')).to.equal(true);
      expect(letter?.lastOutcome).to.include({ kind: 'response', status: 503 });
    });
  });

  context('when the endpoint always fails and its retry policy is a formula bounded by a window', () => {
    it('retries on the formula with its jitter, schedules nothing beyond the window, and counts a replay from its own first attempt', async () => {
      t = await startHerald({ breaker: { volumeThreshold: 1_000 } });
      server = await startServer(() => ({ status: 503 }));
      const MINUTE = 60_000;
      const WINDOW = 3 * 60 * MINUTE;
      // Waits of 10, 20, 40, 80, then 120 min (max) before jitter; equal jitter keeps half of each.
      const retry = { initial: 'PT10M', multiplier: 2, max: 'PT2H', window: 'PT3H', jitter: 'equal' } as const;
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: server.url, retry });
      expect((await t.herald.getEndpoint(endpoint.id)).retry, 'stored whole').to.deep.equal(retry);
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });

      /** Steps the clock from retry to retry until the delivery dies; returns the attempts of that round. */
      const runRound = async (from: number): Promise<AttemptEvent[]> => {
        for (let n = from + 1; ; n++) {
          const attempt = (await attemptsSeen(t, n))[n - 1];
          if (attempt?.settlement.kind !== 'retry') return t.attempts.slice(from, n);
          t.clock.advanceTo(attempt.settlement.nextAttemptAt);
        }
      };
      const expectRound = (attempts: readonly AttemptEvent[]): void => {
        const first = attempts[0]?.startedAt ?? NaN;
        attempts.slice(1).forEach((attempt, i) => {
          const gap = attempt.startedAt - (attempts[i]?.startedAt ?? NaN);
          const nominal = Math.min(120, 10 * 2 ** i) * MINUTE;
          expect(gap, `wait after attempt ${i + 1}`).to.be.within(nominal / 2, nominal);
          expect(attempt.startedAt - first, `attempt ${i + 2} within the window`).to.be.at.most(WINDOW);
        });
        // 5 attempts at the least (5 + 10 + 20 + 40 + 60 min of waits would leave no room for the 6th),
        // 6 at the most (10 + 20 + 40 + 80 min, then 60 min at the least); without the window, 50.
        expect(attempts.length).to.be.within(5, 6);
        const last = attempts.at(-1)?.settlement;
        if (last?.kind !== 'dead') expect.fail(`expected the round to end dead, got ${last?.kind}`);
        expect(last.reason).to.equal(`exhausted after ${attempts.length} attempts (the next would fall beyond the retry window): HTTP 503`);
      };

      const firstRound = await runRound(0);
      expectRound(firstRound);

      // A replay starts a new round: its window counts from the replay's own first attempt, long after the first round's.
      const [letter] = await t.herald.listDeadLetters({ endpointId: endpoint.id });
      await t.herald.replayDeadLetter(letter?.id ?? '');
      const secondRound = await runRound(firstRound.length);
      expectRound(secondRound);
      expect(server.received).to.have.length(firstRound.length + secondRound.length);
    });
  });

  context('when the endpoint answers 429', () => {
    it('pauses the whole mailbox until Retry-After, then sends again', async () => {
      // A lease longer than the test, so advancing the clock in one step never lapses it: a renewal
      // still in flight at a 60 s step would otherwise close the paused actor, and its deliveries
      // would wait for a sweep the test never advances the clock to.
      t = await startHerald({ engine: { leaseMs: 600_000 } });
      let throttled = true;
      server = await startServer(() => (throttled ? { status: 429, headers: { 'retry-after': '120' } } : { status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: server.url, concurrency: 1 });
      await t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await attemptsSeen(t, 1);
      await t.herald.idle();
      const [first] = t.attempts;
      const retryAt = first?.settlement.kind === 'retry' ? first.settlement.nextAttemptAt : 0;
      expect(retryAt - t.clock.now()).to.be.at.least(120_000);

      t.clock.advance(60_000);
      await t.herald.idle();
      expect(server.received, 'nothing is sent while paused').to.have.length(1);

      throttled = false;
      t.clock.advanceTo(retryAt);
      await attemptsSeen(t, 4);
      const deliveries = await t.herald.listDeliveries({});
      expect(deliveries.map((d) => d.status)).to.deep.equal(['delivered', 'delivered', 'delivered']);
    });
  });
});
