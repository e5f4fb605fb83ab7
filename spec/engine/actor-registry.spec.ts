import { expect } from 'chai';
import type { ManualClock } from '../../lib/clock.ts';
import type { ActorDeps } from '../../lib/engine/actor.ts';
import { ActorRegistry } from '../../lib/engine/actor-registry.ts';
import { BreakerFamily } from '../../lib/engine/breaker.ts';
import { ClaimStage } from '../../lib/engine/claim-stage.ts';
import { planDeliveries } from '../../lib/engine/fanout.ts';
import { SendPermits } from '../../lib/engine/send-permits.ts';
import { slotOf } from '../../lib/ids.ts';
import type { DeliveryJob } from '../../lib/model.ts';
import type { Store } from '../../lib/store/port.ts';
import { startHerald, type TestHerald } from '../support/harness.ts';

/**
 * A node hands a slot to another one: it drains the slot, then releases its lease. A claim of this
 * node hands its jobs to the actors one at a time, each maybe awaiting a store call, so the slot can
 * be drained and released while a claim made under its lease is still being handed in. Sent then,
 * such a job is sent twice: its settle is fenced, and the next owner takes it over as an orphan
 * and sends it again (the duplicates of the cluster bench, with nothing crashing).
 */
describe('ActorRegistry', () => {
  let t: TestHerald;
  const closing: Array<() => Promise<void> | void> = [];

  afterEach(async () => {
    for (const close of closing.splice(0).reverse()) await close();
    await t?.close();
  });

  /** This node's registry and claim stage on the shared store, with a `send` that records. */
  function node(store: Store, clock: ManualClock, slotCount: number): { actors: ActorRegistry; claims: ClaimStage; sent: string[] } {
    const config = t.herald.config;
    const breakers = new BreakerFamily(clock, config.breaker);
    const sent: string[] = [];
    const deps: ActorDeps = {
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
      settle: async (settlement) => (await store.settle([settlement], clock.now())).fenced.length === 0,
      wake: () => {},
      listAttempts: async () => [],
      disable: async () => {},
    };
    const actors = new ActorRegistry({ slotCount, actorIdleMs: 60_000, mailboxBudget: 1_000 }, { store, clock, actor: deps });
    const claims = new ClaimStage({ claimBatchSize: 100, claimPerEndpoint: 8 }, { store, clock, owner: 'node-a', actors, pump: () => {} });
    closing.push(async () => {
      claims.close();
      await actors.close();
      breakers.close();
    });
    return { actors, claims, sent };
  }

  /** A store whose `claimDue` runs `meanwhile` between its claim and its answer. */
  function claimingThen(store: Store, meanwhile: () => Promise<void>): Store {
    return Object.assign(Object.create(store) as Store, {
      async claimDue(query: Parameters<Store['claimDue']>[0]): Promise<DeliveryJob[]> {
        const jobs = await store.claimDue(query);
        await meanwhile();
        return jobs;
      },
    });
  }

  /** One pending delivery, its slot, and every slot leased to node A. */
  async function oneDelivery(): Promise<{ store: Store; slotCount: number; slot: number; deliveryId: string }> {
    t = await startHerald({ engine: { storeThread: false } }, { start: false });
    const { store } = t.herald;
    const endpoint = (await t.herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/hook' })).endpoint;
    const [event] = await t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: { n: 1 } });
    const { slotCount } = await store.init({ slotCount: 256 });
    const planned = planDeliveries(event!, await store.listEndpoints({ tenantId: 'acme' }), slotCount, t.clock.now());
    await store.recordFanOuts([{ eventId: event!.id, deliveries: planned }], t.clock.now());
    const slots = Array.from({ length: slotCount }, (_, slot) => slot);
    await store.acquireLeases({ owner: 'node-a', slots, now: t.clock.now(), leaseMs: 10_000 });
    return { store, slotCount, slot: slotOf(endpoint.id, slotCount), deliveryId: planned[0]!.id };
  }

  /** Node B takes the slot over: the delivery is claimed as new (pending), not taken over (in flight under an older epoch). */
  async function nextOwnerClaims(store: Store, slot: number): Promise<DeliveryJob[]> {
    await store.acquireLeases({ owner: 'node-b', slots: [slot], now: t.clock.now(), leaseMs: 10_000 });
    return store.claimDue({ owner: 'node-b', now: t.clock.now(), limit: 10, perEndpointLimit: 10, skipEndpointIds: [] });
  }

  context('when a claim made before the slot began draining is handed in', () => {
    it('gives its job back, and the drain ends (the lease can be released) only once it has', async () => {
      const { store, slotCount, slot, deliveryId } = await oneDelivery();
      const order: string[] = [];
      let released: Promise<void> | undefined;
      const a = node(
        claimingThen(store, async () => {
          // The slot is handed on while the claim is answered: drained, then released.
          released = a.actors.drainSlots([slot]).then(async () => {
            order.push('drained');
            await store.releaseLeases('node-a', [slot]);
            a.actors.slotsReleased([slot]);
          });
          // A turn of the event loop: a drain that did not wait for the claim is over by now.
          await new Promise((resolve) => setImmediate(resolve));
          order.push('claim answered');
        }),
        t.clock,
        slotCount,
      );

      await a.claims.discover();
      await released;
      await a.actors.close();

      expect(a.sent, 'not sent by the node giving the slot up').to.deep.equal([]);
      expect(order).to.deep.equal(['claim answered', 'drained']);
      const [job] = await nextOwnerClaims(store, slot);
      expect(job?.delivery.id).to.equal(deliveryId);
      expect(job?.resumed, 'claimed as new by the next owner').to.equal(undefined);
    });
  });

  context('when a claim made while the slot was draining is handed in after its release', () => {
    it('gives its job back instead of sending it', async () => {
      const { store, slotCount, slot, deliveryId } = await oneDelivery();
      const a = node(
        claimingThen(store, async () => {
          // Claimed under the lease still held; the drain ends and the lease is released before the job is handed in.
          await store.releaseLeases('node-a', [slot]);
          a.actors.slotsReleased([slot]);
        }),
        t.clock,
        slotCount,
      );
      await a.actors.drainSlots([slot]);

      await a.claims.discover();
      await a.actors.close();

      expect(a.sent, 'not sent by the node that gave the slot up').to.deep.equal([]);
      const [job] = await nextOwnerClaims(store, slot);
      expect(job?.delivery.id).to.equal(deliveryId);
      expect(job?.resumed, 'given back before the next owner took the slot: claimed as new').to.equal(undefined);
    });
  });
});
