import { expect } from 'chai';
import type { OperationalEvent } from '../../lib/engine/engine-events.ts';
import { EndpointHealth } from '../../lib/engine/endpoint-health.ts';
import { attemptsSeen, nextEvent, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('EndpointHealth', () => {
  const options = { disableAfterMs: 5 * 24 * HOUR, failingThreshold: 10, failingWindowMs: HOUR };

  context('when more than the threshold of failures fall within the window', () => {
    it('reports failing once, and again only after a recovery', () => {
      const health = new EndpointHealth(options, null);
      const seen = Array.from({ length: 30 }, (_, i) => health.recordFailure(i * 60_000)).flat();
      expect(seen).to.deep.equal(['failing']);
      expect(health.recordSuccess()).to.deep.equal(['recovered']);
      expect(health.failingSince).to.equal(null);
      const again = Array.from({ length: 11 }, (_, i) => health.recordFailure(HOUR + i)).flat();
      expect(again).to.deep.equal(['failing']);
    });

    it('does not report failing when the failures are spread wider than the window', () => {
      const health = new EndpointHealth(options, null);
      const seen = Array.from({ length: 30 }, (_, i) => health.recordFailure(i * 10 * 60_000)).flat();
      expect(seen).to.deep.equal([]);
    });
  });

  context('when failures have lasted the disable span', () => {
    it('asks to disable, counting from the failingSince it was loaded with', () => {
      const health = new EndpointHealth(options, 1_000);
      expect(health.recordFailure(1_000 + 5 * 24 * HOUR - 1)).to.deep.equal([]);
      expect(health.recordFailure(1_000 + 5 * 24 * HOUR)).to.deep.equal(['disable']);
    });
  });
});

describe('Endpoint health (engine)', () => {
  let t: TestHerald;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
  });

  context('when an endpoint fails continuously for the configured span', () => {
    it('emits endpoint.failing once, disables it with endpoint.disabled, holds its deliveries, and resumes them when re-enabled', async () => {
      t = await startHerald({
        health: { disableAfterMs: 2.5 * HOUR, failingThreshold: 2, failingWindowMs: 24 * HOUR },
        breaker: { volumeThreshold: 1_000 },
      });
      let healthy = false;
      sink = await startServer(() => (healthy ? { status: 200 } : { status: 500 }));
      const { endpoint } = await t.herald.createEndpoint({
        tenantId: 'acme',
        url: sink.url,
        retry: { schedule: ['PT1H', 'PT1H', 'PT1H', 'PT1H', 'PT1H', 'PT1H'] },
      });
      const operational: OperationalEvent[] = [];
      t.herald.events.on('operational', (e) => operational.push(e));
      const disabled = nextEvent(t.herald.events, 'operational', (e) => e.type === 'endpoint.disabled');

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
      const firstAt = t.clock.now();
      // Hourly retries (±20 %): the attempt that comes 2.5 h or more after the first failure disables it.
      let made = 0;
      for (;;) {
        const attempt = (await attemptsSeen(t, ++made))[made - 1];
        if ((attempt?.startedAt ?? 0) - firstAt >= 2.5 * HOUR) break;
        expect((await t.herald.getEndpoint(endpoint.id)).status, `still enabled after attempt ${made}`).to.equal('enabled');
        if (attempt?.settlement.kind === 'retry') t.clock.advanceTo(attempt.settlement.nextAttemptAt);
      }
      await disabled;
      expect((await attemptsSeen(t, 1))[0]?.summary).to.match(/^retry in ((4[789]|5\d) min( \d+ s)?|1 h( \d+ min)?): HTTP 500$/);
      expect(operational.map((e) => e.type)).to.deep.equal(['endpoint.failing', 'endpoint.disabled']);
      // People read the durations in human units; machines read windowMs.
      expect(operational[0]).to.include({ windowMs: 24 * HOUR, detail: 'more than 2 failures within 1 d; last: HTTP 500' });
      expect(operational[1]?.detail).to.match(/^failing without a success since \d{4}-\d\d-\d\dT[\d:.]+Z \([23] h( \d+ min)?\); last: HTTP 500$/);
      expect((await t.herald.getEndpoint(endpoint.id)).status).to.equal('disabled');

      // Deliveries wait while it is disabled, new ones included.
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 2 } });
      t.clock.advance(2 * HOUR);
      await t.herald.idle();
      expect(sink.received).to.have.length(made);

      healthy = true;
      const enabled = await t.herald.enableEndpoint(endpoint.id);
      expect(enabled.status).to.equal('enabled');
      expect(enabled.failingSince).to.equal(null);
      await sink.requests(made + 2);
      await attemptsSeen(t, made + 2);
      const statuses = (await t.herald.listDeliveries({ endpointId: endpoint.id })).map((d) => d.status);
      expect(statuses).to.deep.equal(['delivered', 'delivered']);
      expect(operational.map((e) => e.type)).to.deep.equal(['endpoint.failing', 'endpoint.disabled']);
    });
  });

  context('when an endpoint answers 410 Gone', () => {
    /**
     * An endpoint with one request at a time, and three events for it: the first is answered 410.
     * `givenBack()` resolves once `count` deliveries have been given back to the store unsent.
     */
    async function goneEndpoint(): Promise<{
      endpointId: string;
      operational: OperationalEvent[];
      answer: { status: number };
      givenBack(count: number): Promise<void>;
    }> {
      const answer = { status: 410 };
      sink = await startServer(() => ({ status: answer.status }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 1 });
      const operational: OperationalEvent[] = [];
      t.herald.events.on('operational', (e) => operational.push(e));
      const released: string[] = [];
      t.herald.events.on('released', (e) => released.push(e.deliveryId));
      const givenBack = async (count: number): Promise<void> => {
        while (released.length < count) await nextEvent(t.herald.events, 'released');
      };
      await t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await attemptsSeen(t, 1);
      await t.herald.idle();
      return { endpointId: endpoint.id, operational, answer, givenBack };
    }

    it('disables it at once with endpoint.disabled naming the reason, sends it nothing more, and its deliveries wait', async () => {
      t = await startHerald();
      const { endpointId, operational, answer, givenBack } = await goneEndpoint();
      const [first] = t.attempts;
      // The two queued behind the 410 are given back to the store without being sent.
      await givenBack(2);

      const endpoint = await t.herald.getEndpoint(endpointId);
      expect(endpoint.status).to.equal('disabled');
      expect(endpoint.disabledReason).to.equal(`gone: HTTP 410 Gone for delivery ${first?.deliveryId}`);
      expect(operational.map((e) => e.type)).to.deep.equal(['delivery.exhausted', 'endpoint.disabled']);
      const disabled = operational[1];
      if (disabled?.type !== 'endpoint.disabled') expect.fail('expected endpoint.disabled');
      expect(disabled).to.include({ reason: 'gone', endpointId, tenantId: 'acme', deliveryId: first?.deliveryId });
      // The delivery that got the 410 is dead-lettered, as any other 4xx.
      const [letter] = await t.herald.listDeadLetters({ endpointId });
      expect(letter?.reason).to.equal('permanent: HTTP 410');

      // Two days on, with new events too: nothing more is sent; the other deliveries wait, spending no attempt.
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 4 } });
      t.clock.advance(2 * DAY);
      await t.herald.idle();
      expect(sink?.received).to.have.length(1);
      expect(t.attempts).to.have.length(1);
      const waiting = (await t.herald.listDeliveries({ endpointId })).filter((d) => d.status === 'pending');
      expect(waiting.map((d) => d.attempts)).to.deep.equal([0, 0, 0]);

      // Re-enabled (the consumer is back): the waiting deliveries go out.
      answer.status = 200;
      await t.herald.enableEndpoint(endpointId);
      await attemptsSeen(t, 4);
      await t.herald.idle();
      const statuses = (await t.herald.listDeliveries({ endpointId })).map((d) => d.status).sort();
      expect(statuses).to.deep.equal(['dead', 'delivered', 'delivered', 'delivered']);
    });

    it('with delivery.disableOnGone off, dead-letters each delivery as any other 4xx and keeps the endpoint enabled', async () => {
      t = await startHerald({ delivery: { disableOnGone: false } });
      const { endpointId, operational } = await goneEndpoint();
      await attemptsSeen(t, 3);
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 4 } });
      await attemptsSeen(t, 4);
      await t.herald.idle();

      expect(sink?.received).to.have.length(4);
      expect(await t.herald.getEndpoint(endpointId)).to.include({ status: 'enabled', disabledReason: null });
      expect(operational.map((e) => e.type)).to.deep.equal(Array.from({ length: 4 }, () => 'delivery.exhausted'));
      const letters = await t.herald.listDeadLetters({ endpointId });
      expect(letters.map((l) => l.reason)).to.deep.equal(Array.from({ length: 4 }, () => 'permanent: HTTP 410'));
    });
  });
});
