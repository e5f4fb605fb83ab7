/**
 * Publish and fan-out: events appended to the outbox and listed until fanned out (oldest first,
 * other tenants' when some are excepted); fan-out to deliveries, numbered per endpoint, some
 * claimed as they are created, nothing written twice when it runs again.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import { ErrorCode } from '../../../lib/errors.ts';
import { planDeliveries } from '../../../lib/engine/fanout.ts';
import { deliveryIdFor, slotOf } from '../../../lib/ids.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SLOTS, SECOND, MINUTE, OK, endpointIdInSlot, makeEvent, attempt, rejection, type ConformanceSuite } from './fixtures.ts';

export function describePublishAndFanOut(suite: ConformanceSuite): void {
  const { addEndpoint, seed, plan, lease, claim, claimedDelivery } = suite;
  describe('outbox and fan-out', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when events are appended', () => {
      it('reads them back and lists unfanned ones oldest first, up to the limit', async () => {
        const first = makeEvent('evt_a', 'acme', clock.now(), { endpointId: 'ep_1' });
        clock.advance(SECOND);
        const second = makeEvent('evt_b', 'acme', clock.now());
        clock.advance(SECOND);
        const third = makeEvent('evt_c', 'globex', clock.now());
        await store.appendEvents([third]);
        await store.appendEvents([first, second]);
        expect(await store.getEvent('evt_a')).to.deep.equal(first);
        expect(await store.getEvent('evt_b')).to.deep.equal(second);
        expect(await store.getEvent('evt_missing')).to.equal(undefined);
        expect(await store.unfannedEvents(10)).to.deep.equal([first, second, third]);
        expect(await store.unfannedEvents(2)).to.deep.equal([first, second]);
      });

      it('lists only other tenants\' unfanned events when tenants are excepted, oldest first', async () => {
        const events = ['evt_1', 'evt_2', 'evt_3', 'evt_4', 'evt_5'].map((id, i) => {
          clock.advance(SECOND);
          return makeEvent(id, i === 2 ? 'globex' : i === 4 ? 'initech' : 'acme', clock.now());
        });
        await store.appendEvents(events);
        expect((await store.unfannedEvents(10, ['acme'])).map((e) => e.id)).to.deep.equal(['evt_3', 'evt_5']);
        expect((await store.unfannedEvents(1, ['acme'])).map((e) => e.id)).to.deep.equal(['evt_3']);
        expect((await store.unfannedEvents(10, ['acme', 'globex'])).map((e) => e.id)).to.deep.equal(['evt_5']);
        expect(await store.unfannedEvents(10, [])).to.have.length(5);
      });

      it('lists other tenants\' oldest first, across tenants, up to the limit, when one tenant has several waiting', async () => {
        const tenants = ['acme', 'globex', 'acme', 'initech', 'globex', 'globex', 'acme'];
        const events = tenants.map((tenant, i) => {
          clock.advance(SECOND);
          return makeEvent(`evt_${i}`, tenant, clock.now());
        });
        await store.appendEvents(events);
        expect((await store.unfannedEvents(10, ['acme'])).map((e) => e.id)).to.deep.equal(['evt_1', 'evt_3', 'evt_4', 'evt_5']);
        expect((await store.unfannedEvents(3, ['acme'])).map((e) => e.id)).to.deep.equal(['evt_1', 'evt_3', 'evt_4']);
        expect((await store.unfannedEvents(2, ['initech'])).map((e) => e.id)).to.deep.equal(['evt_0', 'evt_1']);
      });

      it('counts those waiting to be fanned out, up to the cap, and no longer once fanned out', async () => {
        await addEndpoint('ep_1');
        const events = ['evt_a', 'evt_b', 'evt_c'].map((id) => makeEvent(id, 'acme', clock.now()));
        await store.appendEvents(events);
        expect(await store.countUnfannedEvents(100)).to.equal(3);
        expect(await store.countUnfannedEvents(2)).to.equal(2);
        expect(await store.countUnfannedEvents(0)).to.equal(0);
        await store.recordFanOuts([{ eventId: 'evt_a', deliveries: plan(events[0]!, ['ep_1'], clock.now()) }], clock.now());
        expect(await store.countUnfannedEvents(100)).to.equal(2);
      });
    });

    context('when an event is fanned out', () => {
      it('creates pending deliveries at attempt 0, round 0 and epoch 0, and the event is no longer unfanned', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const { event, deliveryIds } = await seed(['ep_1', 'ep_2']);
        expect(await store.unfannedEvents(10)).to.deep.equal([]);
        const delivery = await store.getDelivery(deliveryIds[0]!);
        expect(delivery).to.deep.equal({
          id: deliveryIdFor(event.id, 'ep_1', event.createdAt),
          eventId: event.id,
          endpointId: 'ep_1',
          tenantId: 'acme',
          eventType: 'invoice.paid',
          slot: slotOf('ep_1', SLOTS),
          status: 'pending',
          attempts: 0,
          round: 0,
          nextAttemptAt: clock.now(),
          leaseEpoch: 0,
          lastError: null,
          createdAt: clock.now(),
          updatedAt: clock.now(),
          deliveredAt: null,
          sequence: 1,
          orderingKey: null,
        });
        expect(await store.listDeliveries({ eventId: event.id })).to.have.length(2);
      });

      it('gives a filtered endpoint only the events its filter matches, read back from the store, numbered without gaps', async () => {
        await addEndpoint('ep_big', 'acme', { filter: { 'payload.amount': { $gte: 100 }, $or: [{ 'payload.country': { $in: ['BR', 'PT'] } }, { type: 'user.created' }] } });
        await addEndpoint('ep_all', 'acme');
        const events = [
          makeEvent('evt_small', 'acme', clock.now(), { payload: JSON.stringify({ amount: 99, country: 'BR' }) }),
          makeEvent('evt_br', 'acme', clock.now(), { payload: JSON.stringify({ amount: 100, country: 'BR' }) }),
          makeEvent('evt_us', 'acme', clock.now(), { payload: JSON.stringify({ amount: 500, country: 'US' }) }),
          makeEvent('evt_user', 'acme', clock.now(), { type: 'user.created', payload: JSON.stringify({ amount: 101 }) }),
          makeEvent('evt_pt', 'acme', clock.now(), { payload: JSON.stringify({ amount: 1e6, country: 'PT' }) }),
        ];
        await store.appendEvents(events);
        const endpoints = await store.listEndpoints({ tenantId: 'acme' });
        await store.recordFanOuts(events.map((event) => ({ eventId: event.id, deliveries: planDeliveries(event, endpoints, SLOTS, clock.now()) })), clock.now());
        expect(await store.unfannedEvents(10)).to.deep.equal([]);
        const numbered = async (endpointId: string) =>
          (await store.listDeliveries({ endpointId, limit: 100 })).map((d) => [d.eventId, d.sequence]).sort((a, b) => Number(a[1]) - Number(b[1]));
        expect(await numbered('ep_big')).to.deep.equal([['evt_br', 1], ['evt_user', 2], ['evt_pt', 3]]);
        expect(await numbered('ep_all')).to.have.length(5);
      });

      it('marks an event with no subscribers fanned out too', async () => {
        const event = makeEvent('evt_lonely', 'acme', clock.now());
        await store.appendEvents([event]);
        await store.recordFanOuts([{ eventId: event.id, deliveries: [] }], clock.now());
        expect(await store.unfannedEvents(10)).to.deep.equal([]);
      });
    });

    context('when several events are fanned out in one call', () => {
      it('records every one of them', async () => {
        await addEndpoint('ep_1');
        const events = [makeEvent('evt_a', 'acme', clock.now()), makeEvent('evt_b', 'acme', clock.now()), makeEvent('evt_c', 'acme', clock.now())];
        await store.appendEvents(events);
        await store.recordFanOuts([
          { eventId: 'evt_a', deliveries: plan(events[0]!, ['ep_1'], clock.now()) },
          { eventId: 'evt_b', deliveries: [] },
          { eventId: 'evt_c', deliveries: plan(events[2]!, ['ep_1'], clock.now()) },
        ], clock.now());
        expect(await store.unfannedEvents(10)).to.deep.equal([]);
        expect((await store.listDeliveries({ endpointId: 'ep_1' })).map((d) => d.eventId).sort()).to.deep.equal(['evt_a', 'evt_c']);
      });

      it('writes nothing when one of the events is not stored, and names it', async () => {
        await addEndpoint('ep_1');
        const stored = makeEvent('evt_here', 'acme', clock.now());
        await store.appendEvents([stored]);
        const error = await rejection(
          store.recordFanOuts([
            { eventId: 'evt_here', deliveries: plan(stored, ['ep_1'], clock.now()) },
            { eventId: 'evt_gone', deliveries: [] },
          ], clock.now()),
        );
        expect(error.code).to.equal(ErrorCode.NOT_FOUND);
        expect(error.message).to.include('evt_gone');
        expect(await store.listDeliveries({ endpointId: 'ep_1' })).to.deep.equal([]);
        expect((await store.unfannedEvents(10)).map((e) => e.id)).to.deep.equal(['evt_here']);
      });
    });

    context('when fan-out claims some deliveries as it creates them', () => {
      it('inserts those in slots the owner holds in flight at the slot\'s epoch and returns them; the rest pending', async () => {
        const mine = endpointIdInSlot(1);
        const theirs = endpointIdInSlot(2);
        const unasked = endpointIdInSlot(3, 'quiet');
        for (const id of [mine, theirs, unasked]) await addEndpoint(id);
        const [held] = await lease('node-a', [1, 3]);
        const event = makeEvent('evt_claimed', 'acme', clock.now());
        await store.appendEvents([event]);
        const deliveries = plan(event, [mine, theirs, unasked], clock.now());
        const [toMine, toTheirs, toUnasked] = deliveries.map((d) => d.id);
        clock.advance(SECOND);
        const claimed = await store.recordFanOuts([{ eventId: event.id, deliveries }], clock.now(), {
          owner: 'node-a',
          deliveryIds: new Set([toMine!, toTheirs!]),
        });
        expect(claimed).to.have.length(1);
        expect(claimed[0]).to.include({ id: toMine, status: 'in_flight', leaseEpoch: held!.epoch, attempts: 0, updatedAt: clock.now() });
        expect(await store.getDelivery(toMine!)).to.deep.equal(claimed[0]);
        expect(await store.getDelivery(toTheirs!)).to.include({ status: 'pending', leaseEpoch: 0 });
        expect(await store.getDelivery(toUnasked!)).to.include({ status: 'pending', leaseEpoch: 0 });
        // Claimed like claimDue claims: not claimed again, settled at that epoch.
        expect((await claim()).map((j) => j.delivery.id)).to.deep.equal([toUnasked]);
        const settled = await store.settle(
          [{ kind: 'delivered', deliveryId: toMine!, epoch: held!.epoch, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        expect(settled.applied).to.deep.equal([toMine]);
      });

      it('returns nothing for a delivery that already existed (a rerun), and leaves it as it was', async () => {
        await addEndpoint('ep_1');
        const { event, deliveryIds } = await seed(['ep_1']);
        await lease();
        const before = await store.getDelivery(deliveryIds[0]!);
        const claimed = await store.recordFanOuts([{ eventId: event.id, deliveries: plan(event, ['ep_1'], clock.now()) }], clock.now(), {
          owner: 'node-a',
          deliveryIds: new Set(deliveryIds),
        });
        expect(claimed).to.deep.equal([]);
        expect(await store.getDelivery(deliveryIds[0]!)).to.deep.equal(before);
      });
    });

    context('when deliveries are numbered per endpoint', () => {
      const sequences = async (endpointId: string) =>
        (await store.listDeliveries({ endpointId, limit: 1000 })).map((d) => [d.eventId, d.sequence]).sort((a, b) => Number(a[1]) - Number(b[1]));

      it('numbers each endpoint 1, 2, 3, … in the order given, within a batch and across batches', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const events = ['evt_a', 'evt_b', 'evt_c', 'evt_d'].map((id) => makeEvent(id, 'acme', clock.now()));
        await store.appendEvents(events);
        await store.recordFanOuts([
          { eventId: 'evt_a', deliveries: plan(events[0]!, ['ep_1', 'ep_2'], clock.now()) },
          { eventId: 'evt_b', deliveries: plan(events[1]!, ['ep_2'], clock.now()) },
          { eventId: 'evt_c', deliveries: plan(events[2]!, ['ep_1', 'ep_2'], clock.now()) },
        ], clock.now());
        await store.recordFanOuts([{ eventId: 'evt_d', deliveries: plan(events[3]!, ['ep_2', 'ep_1'], clock.now()) }], clock.now());
        expect(await sequences('ep_1')).to.deep.equal([['evt_a', 1], ['evt_c', 2], ['evt_d', 3]]);
        expect(await sequences('ep_2')).to.deep.equal([['evt_a', 1], ['evt_b', 2], ['evt_c', 3], ['evt_d', 4]]);
      });

      it('gives a re-planned event\'s existing deliveries no new number, so none is burnt', async () => {
        await addEndpoint('ep_1');
        const { event } = await seed(['ep_1']);
        const next = makeEvent('evt_next', 'acme', clock.now());
        await store.appendEvents([next]);
        // The first event again (a rerun after a crash), beside a new one, in one call.
        await store.recordFanOuts([
          { eventId: event.id, deliveries: plan(event, ['ep_1'], clock.now()) },
          { eventId: next.id, deliveries: plan(next, ['ep_1'], clock.now()) },
        ], clock.now());
        await store.recordFanOuts([{ eventId: event.id, deliveries: plan(event, ['ep_1'], clock.now()) }], clock.now());
        await seed(['ep_1'], { eventId: 'evt_last' });
        expect(await sequences('ep_1')).to.deep.equal([[event.id, 1], ['evt_next', 2], ['evt_last', 3]]);
      });

      it('takes no number in a fan-out that writes nothing (an event not stored)', async () => {
        await addEndpoint('ep_1');
        const stored = makeEvent('evt_here', 'acme', clock.now());
        await store.appendEvents([stored]);
        await rejection(store.recordFanOuts([
          { eventId: 'evt_here', deliveries: plan(stored, ['ep_1'], clock.now()) },
          { eventId: 'evt_gone', deliveries: [] },
        ], clock.now()));
        await store.recordFanOuts([{ eventId: 'evt_here', deliveries: plan(stored, ['ep_1'], clock.now()) }], clock.now());
        expect(await sequences('ep_1')).to.deep.equal([['evt_here', 1]]);
      });

      it('numbers the deliveries it claims as it creates them too', async () => {
        const id = endpointIdInSlot(1);
        await addEndpoint(id);
        await seed([id]);
        await lease('node-a', [1]);
        const event = makeEvent('evt_claimed', 'acme', clock.now());
        await store.appendEvents([event]);
        const deliveries = plan(event, [id], clock.now());
        const claimed = await store.recordFanOuts([{ eventId: event.id, deliveries }], clock.now(), {
          owner: 'node-a',
          deliveryIds: new Set(deliveries.map((d) => d.id)),
        });
        expect(claimed.map((d) => d.sequence)).to.deep.equal([2]);
      });
    });

    context('when an endpoint\'s deliveries are listed after a sequence number', () => {
      it('lists those numbered after it, in sequence order, up to the limit, of that endpoint only', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        for (let i = 1; i <= 5; i++) await seed(['ep_1', 'ep_2'], { eventId: `evt_n${i}` });
        const page = await store.listDeliveriesAfterSequence('ep_1', 1, 3);
        expect(page.map((d) => [d.sequence, d.eventId, d.endpointId])).to.deep.equal([
          [2, 'evt_n2', 'ep_1'], [3, 'evt_n3', 'ep_1'], [4, 'evt_n4', 'ep_1'],
        ]);
        expect((await store.listDeliveriesAfterSequence('ep_1', 4, 10)).map((d) => d.sequence)).to.deep.equal([5]);
        expect(await store.listDeliveriesAfterSequence('ep_1', 5, 10)).to.deep.equal([]);
        expect((await store.listDeliveriesAfterSequence('ep_1', 0, 1000)).map((d) => d.sequence)).to.deep.equal([1, 2, 3, 4, 5]);
        expect(await store.listDeliveriesAfterSequence('ep_missing', 0, 10)).to.deep.equal([]);
        expect((await store.listDeliveriesAfterSequence('ep_1', 0, 1))[0]).to.deep.equal(await store.getDelivery(deliveryIdFor('evt_n1', 'ep_1', clock.now())));
      });

      it('keeps a delivery\'s number through its death, its replay and a resume', async () => {
        await addEndpoint('ep_1');
        await seed(['ep_1']);
        const { delivery } = await claimedDelivery('ep_1');
        expect(delivery.sequence).to.equal(2);
        await store.settle([{ kind: 'dead', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), { kind: 'timeout', timeoutMs: 10 }, 'timeout'), deadLetterId: 'dl_seq', reason: 'exhausted' }], clock.now());
        expect(await store.replayDeadLetters({ ids: ['dl_seq'] }, clock.now())).to.deep.equal(['dl_seq']);
        expect(await store.getDelivery(delivery.id)).to.include({ status: 'pending', sequence: 2 });
        // Re-enabling an endpoint makes its waiting deliveries due, numbers unchanged.
        await store.resumeDeliveries('ep_1', clock.now());
        expect((await store.listDeliveriesAfterSequence('ep_1', 1, 10)).map((d) => [d.id, d.sequence, d.status])).to.deep.equal([[delivery.id, 2, 'pending']]);
      });
    });

    context('when an event has an ordering key', () => {
      it('keeps it on the event and copies it onto every delivery; an event without one has null', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const keyed = makeEvent('evt_keyed', 'acme', clock.now(), { orderingKey: 'customer/42 – ünïcode' });
        const plain = makeEvent('evt_plain', 'acme', clock.now());
        await store.appendEvents([keyed, plain]);
        expect(await store.getEvent('evt_keyed')).to.deep.equal(keyed);
        expect((await store.unfannedEvents(10)).map((e) => e.orderingKey)).to.deep.equal(['customer/42 – ünïcode', null]);
        await store.recordFanOuts([
          { eventId: keyed.id, deliveries: plan(keyed, ['ep_1', 'ep_2'], clock.now()) },
          { eventId: plain.id, deliveries: plan(plain, ['ep_1'], clock.now()) },
        ], clock.now());
        const keyedDeliveries = await store.listDeliveries({ eventId: keyed.id });
        expect(keyedDeliveries.map((d) => d.orderingKey)).to.deep.equal(['customer/42 – ünïcode', 'customer/42 – ünïcode']);
        expect((await store.listDeliveries({ eventId: plain.id })).map((d) => d.orderingKey)).to.deep.equal([null]);
        await lease();
        const jobs = await claim({ endpointId: 'ep_1' });
        const job = jobs.find((j) => j.event.id === keyed.id);
        expect(job?.event.orderingKey).to.equal('customer/42 – ünïcode');
        expect(job?.delivery.orderingKey).to.equal('customer/42 – ünïcode');
      });
    });

    context('when an event has a trace context', () => {
      it('keeps it (traceparent, and tracestate when given) through the outbox, fan-out and claim; an event without one has null', async () => {
        await addEndpoint('ep_1');
        const traced = makeEvent('evt_traced', 'acme', clock.now(), {
          traceContext: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'vendor=a1,other=b2' },
        });
        const parentOnly = makeEvent('evt_parent_only', 'acme', clock.now(), {
          traceContext: { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00' },
        });
        const plain = makeEvent('evt_untraced', 'acme', clock.now());
        await store.appendEvents([traced, parentOnly, plain]);
        expect(await store.getEvent('evt_traced')).to.deep.equal(traced);
        expect(await store.getEvent('evt_parent_only')).to.deep.equal(parentOnly);
        expect(await store.getEvent('evt_untraced')).to.deep.equal(plain);
        expect((await store.unfannedEvents(10)).map((e) => e.traceContext)).to.deep.equal([traced.traceContext, parentOnly.traceContext, null]);
        expect((await store.unfannedEvents(10, ['globex'])).map((e) => e.traceContext)).to.deep.equal([traced.traceContext, parentOnly.traceContext, null]);
        await store.recordFanOuts([traced, parentOnly, plain].map((e) => ({ eventId: e.id, deliveries: plan(e, ['ep_1'], clock.now()) })), clock.now());
        await lease();
        const jobs = await claim({ endpointId: 'ep_1' });
        expect(Object.fromEntries(jobs.map((j) => [j.event.id, j.event.traceContext]))).to.deep.equal({
          evt_traced: traced.traceContext,
          evt_parent_only: parentOnly.traceContext,
          evt_untraced: null,
        });
      });
    });

    context('when fan-out runs twice for one event (a crash in between)', () => {
      it('creates nothing twice and leaves the first deliveries untouched', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const { event, deliveryIds } = await seed(['ep_1', 'ep_2']);
        const before = await store.getDelivery(deliveryIds[0]!);
        clock.advance(MINUTE);
        await store.recordFanOuts([{ eventId: event.id, deliveries: plan(event, ['ep_1', 'ep_2'], clock.now()) }], clock.now());
        expect(await store.listDeliveries({ eventId: event.id })).to.have.length(2);
        expect(await store.getDelivery(deliveryIds[0]!)).to.deep.equal(before);
        expect((await store.countDeliveries()).pending).to.equal(2);
        expect(await store.unfannedEvents(10)).to.deep.equal([]);
      });
    });
  });
}
