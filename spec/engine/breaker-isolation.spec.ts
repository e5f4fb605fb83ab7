import { expect } from 'chai';
import type { BreakerState } from '../../lib/engine/breaker.ts';
import { attemptsSeen, nextEvent, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

describe('Circuit breaker and isolation (engine)', () => {
  let t: TestHerald;
  const servers: TestServer[] = [];

  afterEach(async () => {
    for (const server of servers.splice(0)) {
      for (const held of server.held) held.respond(200);
      await server.close();
    }
    await t?.close();
  });

  context('when an endpoint keeps failing', () => {
    it('opens, spends no attempt while open, sends one probe after the cooldown and closes on its success', async () => {
      t = await startHerald({ breaker: { volumeThreshold: 3, errorThresholdPercentage: 50, cooldownMs: 60_000, windowMs: 60_000 } });
      let healthy = false;
      const failing = await startServer(() => (healthy ? { status: 200 } : { status: 500 }));
      const other = await startServer(() => ({ status: 200 }));
      servers.push(failing, other);
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'a', url: failing.url, concurrency: 1 });
      const b = await t.herald.createEndpoint({ tenantId: 'b', url: other.url });
      const states: BreakerState[] = [];
      t.herald.events.on('breaker', (e) => {
        if (e.endpointId === endpoint.id) states.push(e.state);
      });

      const opened = nextEvent(t.herald.events, 'breaker', (e) => e.state === 'open');
      await t.herald.publish(Array.from({ length: 10 }, (_, n) => ({ tenantId: 'a', type: 'a.b', payload: { n } })));
      const open = await opened;
      await attemptsSeen(t, 3); // the third failure opened it; let it settle before time moves
      expect(failing.received).to.have.length(3);
      expect(open.probeAt).to.equal(t.clock.now() + 60_000);

      // The first retries fall due while the breaker is open: nothing goes out, no attempt is spent.
      t.clock.advance(45_000);
      await t.herald.idle();
      expect(failing.received).to.have.length(3);
      const pending = await t.herald.listDeliveries({ endpointId: endpoint.id });
      expect(pending.reduce((sum, d) => sum + d.attempts, 0)).to.equal(3);

      // Another endpoint is not affected.
      await t.herald.publish({ tenantId: 'b', type: 'a.b', payload: {} });
      await other.requests(1);
      await attemptsSeen(t, 1, (a) => a.endpointId === b.endpoint.id); // settled before time moves on

      healthy = true;
      const closed = nextEvent(t.herald.events, 'breaker', (e) => e.endpointId === endpoint.id && e.state === 'closed');
      t.clock.advanceTo(open.probeAt ?? 0);
      await closed;
      await attemptsSeen(t, 4);
      expect(failing.received, 'exactly one probe while half-open').to.have.length(4);
      expect(states).to.deep.equal(['open', 'half-open', 'closed']);

      // Everything waiting is due by now and goes out once closed.
      await attemptsSeen(t, 13, (a) => a.endpointId === endpoint.id);
      const deliveries = await t.herald.listDeliveries({ endpointId: endpoint.id });
      expect(deliveries.filter((d) => d.status === 'delivered')).to.have.length(10);
    });

    it('re-opens for another cooldown when the probe fails', async () => {
      t = await startHerald({ breaker: { volumeThreshold: 2, errorThresholdPercentage: 50, cooldownMs: 10_000 } });
      const failing = await startServer(() => ({ status: 503 }));
      servers.push(failing);
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'a', url: failing.url, concurrency: 1 });
      const opened = nextEvent(t.herald.events, 'breaker', (e) => e.state === 'open');
      await t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'a', type: 'a.b', payload: { n } })));
      const first = await opened;
      await attemptsSeen(t, 2);
      expect(failing.received).to.have.length(2);

      const reopened = nextEvent(t.herald.events, 'breaker', (e) => e.endpointId === endpoint.id && e.state === 'open');
      t.clock.advanceTo(first.probeAt ?? 0);
      const second = await reopened;
      await attemptsSeen(t, 3);
      expect(failing.received).to.have.length(3);
      expect(second.probeAt).to.equal(t.clock.now() + 10_000);
    });
  });

  context('when one endpoint answers only after 8 s', () => {
    it('does not delay the first attempts of 20 other endpoints', async () => {
      t = await startHerald({ delivery: { maxInFlight: 8 } });
      const slow = await startServer(() => 'hold');
      const fast = await startServer(() => ({ status: 200 }));
      servers.push(slow, fast);
      const { endpoint: slowEndpoint } = await t.herald.createEndpoint({ tenantId: 'slow', url: slow.url, concurrency: 4 });
      for (let i = 0; i < 20; i++) await t.herald.createEndpoint({ tenantId: 'fast', url: `${fast.url}/ep${i}` });

      await t.herald.publish(Array.from({ length: 50 }, (_, n) => ({ tenantId: 'slow', type: 'a.b', payload: { n } })));
      await slow.requests(4);
      await t.herald.publish({ tenantId: 'fast', type: 'a.b', payload: {} });

      const requests = await fast.requests(20);
      expect(new Set(requests.map((r) => r.path)).size).to.equal(20);
      expect(slow.held, 'the slow endpoint is still holding its first requests').to.have.length(4);
      const delivered = await attemptsSeen(t, 20, (a) => a.settlement.kind === 'delivered');
      expect(delivered.every((a) => a.endpointId !== slowEndpoint.id)).to.equal(true);

      // Eight seconds later the slow endpoint answers, within its 10 s timeout.
      t.clock.advance(8_000);
      for (const held of slow.held.splice(0)) held.respond(200);
      await attemptsSeen(t, 24);
      expect(t.attempts.slice(20).every((a) => a.settlement.kind === 'delivered')).to.equal(true);
    });
  });
});
