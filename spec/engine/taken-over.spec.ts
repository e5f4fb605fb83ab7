import { expect } from 'chai';
import { TAKEN_OVER } from '../../lib/engine/actor.ts';
import { planDeliveries } from '../../lib/engine/fanout.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

/**
 * A node claimed deliveries and died (or was cut off) before settling them; this node takes the
 * slots over at the next epoch and finds them in flight under the old one. Each may have reached
 * its consumer already: an at-least-once endpoint gets it again (a duplicate, which `webhook-id`
 * lets the consumer drop), an at-most-once endpoint must not.
 */
describe('Deliveries taken over mid-attempt', () => {
  let t: TestHerald;
  let sink: TestServer;

  afterEach(async () => {
    await t?.close();
    await sink?.close();
  });

  it('dead-letters an at-most-once one unsent (TAKEN_OVER) and sends an at-least-once one again', async () => {
    sink = await startServer(() => ({ status: 200 }));
    t = await startHerald({ engine: { storeThread: false } }, { start: false });
    const { store } = t.herald;
    const once = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/once`, mode: 'at-most-once' })).endpoint;
    const least = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/least` })).endpoint;
    const [event] = await t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: { n: 1 } });

    // Another node fans the event out, claims both deliveries, and is gone before it settles them.
    const { slotCount } = await store.init({ slotCount: 256 });
    const endpoints = await store.listEndpoints({ tenantId: 'acme' });
    await store.recordFanOuts([{ eventId: event!.id, deliveries: planDeliveries(event!, endpoints, slotCount, t.clock.now()) }], t.clock.now());
    const slots = Array.from({ length: slotCount }, (_, slot) => slot);
    await store.acquireLeases({ owner: 'node-gone', slots, now: t.clock.now(), leaseMs: 1_000 });
    const claimed = await store.claimDue({ owner: 'node-gone', now: t.clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
    expect(claimed).to.have.length(2);
    t.clock.advance(1_001);

    await t.herald.start();
    const [onceAttempt] = await attemptsSeen(t, 1, (e) => e.endpointId === once.id);
    expect(onceAttempt?.settlement.kind).to.equal('dead');
    expect(onceAttempt?.outcome).to.deep.include({ kind: 'network', code: TAKEN_OVER });
    const [letter] = await t.herald.listDeadLetters({ endpointId: once.id });
    expect(letter?.reason).to.match(/^at-most-once: /);

    const [leastAttempt] = await attemptsSeen(t, 1, (e) => e.endpointId === least.id);
    expect(leastAttempt?.settlement.kind).to.equal('delivered');
    expect(sink.received.map((r) => r.path)).to.deep.equal(['/least']);
  });
});
