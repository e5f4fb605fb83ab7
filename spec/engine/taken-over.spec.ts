import { expect } from 'chai';
import type { ManualClock } from '../../lib/clock.ts';
import { TAKEN_OVER } from '../../lib/engine/actor.ts';
import { BreakerFamily } from '../../lib/engine/breaker.ts';
import { planDeliveries } from '../../lib/engine/fanout.ts';
import { SendPermits } from '../../lib/engine/send-permits.ts';
import { Supervisor } from '../../lib/engine/supervisor.ts';
import { slotOf } from '../../lib/ids.ts';
import type { Store } from '../../lib/store/port.ts';
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

  context('when this node claims it in a slot it is draining', () => {
    /** Another node's engine on the same store, with deps that record what it sends. */
    function nodeB(store: Store, clock: ManualClock, slotCount: number): { supervisor: Supervisor; sent: string[]; close(): Promise<void> } {
      const config = t.herald.config;
      const breakers = new BreakerFamily(clock, config.breaker);
      const sent: string[] = [];
      const supervisor = new Supervisor(
        { slotCount, sweepIntervalMs: 1_000, claimBatchSize: 100, claimPerEndpoint: 8, actorIdleMs: 60_000, mailboxBudget: 1_000, endpointSyncIntervalMs: 250 },
        {
          store,
          clock,
          emit: () => {},
          owner: 'node-b',
          actor: {
            clock,
            random: () => 0.5,
            permits: new SendPermits({ maxInFlight: 16, originDepth: 8 }),
            breakers,
            createTimers: () => ({ schedule: () => {}, size: 0, close: () => {} }),
            health: config.health,
            disableOnGone: false,
            emit: () => {},
            sign: async () => ({}),
            send: async (request) => {
              sent.push(request.url);
              return { outcome: { kind: 'response', status: 200, location: null, retryAfter: null, body: '' }, durationMs: 1 };
            },
            listAttempts: async () => [],
            disable: async () => {},
          },
          onFenced: () => {},
        },
      );
      return {
        supervisor,
        sent,
        async close() {
          await supervisor.close();
          breakers.close();
        },
      };
    }

    it('leaves an at-most-once one in flight, so the slot\'s next owner takes it over unsent (TAKEN_OVER)', async () => {
      sink = await startServer(() => ({ status: 200 }));
      t = await startHerald({ engine: { storeThread: false } }, { start: false });
      const { store } = t.herald;
      const once = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/once`, mode: 'at-most-once' })).endpoint;
      const [event] = await t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: { n: 1 } });

      // Node A fans the event out, claims the delivery, and is gone before it settles it.
      const { slotCount } = await store.init({ slotCount: 256 });
      const endpoints = await store.listEndpoints({ tenantId: 'acme' });
      await store.recordFanOuts([{ eventId: event!.id, deliveries: planDeliveries(event!, endpoints, slotCount, t.clock.now()) }], t.clock.now());
      const slots = Array.from({ length: slotCount }, (_, slot) => slot);
      await store.acquireLeases({ owner: 'node-gone', slots, now: t.clock.now(), leaseMs: 1_000 });
      const [gone] = await store.claimDue({ owner: 'node-gone', now: t.clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
      expect(gone?.delivery.endpointId).to.equal(once.id);
      t.clock.advance(1_001);

      // Node B takes the slots over, but is already handing the endpoint's slot on when its
      // discovery claims the orphan: the claim is given up, not sent.
      await store.acquireLeases({ owner: 'node-b', slots, now: t.clock.now(), leaseMs: 10_000 });
      const b = nodeB(store, t.clock, slotCount);
      await b.supervisor.drainSlots([slotOf(once.id, slotCount)]);
      b.supervisor.start();
      await b.supervisor.settled();
      expect(b.supervisor.actors.size, 'no actor for a draining slot').to.equal(0);
      const held = await store.getDelivery(gone!.delivery.id);
      expect(held, 'claimed by node B, and left in flight').to.include({ status: 'in_flight' });
      expect(held!.leaseEpoch).to.be.greaterThan(gone!.delivery.leaseEpoch);
      await b.close();
      await store.releaseLeases('node-b', slots);
      expect(b.sent).to.deep.equal([]);

      // The next owner must see it as taken over, as node B did.
      await t.herald.start();
      const [attempt] = await attemptsSeen(t, 1, (e) => e.endpointId === once.id);
      expect(attempt?.settlement.kind).to.equal('dead');
      expect(attempt?.outcome).to.deep.include({ kind: 'network', code: TAKEN_OVER });
      expect(sink.received).to.deep.equal([]);
    });
  });
});
