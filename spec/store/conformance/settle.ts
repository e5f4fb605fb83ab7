/**
 * Settle: an attempt's outcome written back (delivered, retry, dead, released) with its attempt
 * record, and fenced by the claim's epoch, so a node that lost its slot writes nothing.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import type { Outcome } from '../../../lib/model.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SECOND, MINUTE, HOUR, DAY, LEASE_MS, OK, BUSY, TIMEOUT, attempt, type ConformanceSuite } from './fixtures.ts';

export function describeSettle(suite: ConformanceSuite): void {
  const { addEndpoint, seed, lease, claim, claimedDelivery } = suite;
  describe('settle', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    context('when an attempt succeeds', () => {
      it('marks the delivery delivered, records the attempt and clears failingSince', async () => {
        await addEndpoint('ep_1', 'acme', { failingSince: clock.now() - DAY });
        const { delivery } = await claimedDelivery('ep_1');
        const startedAt = clock.now();
        clock.advance(SECOND);
        const result = await store.settle(
          [{ kind: 'delivered', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(startedAt, OK, null) }],
          clock.now(),
        );
        expect(result).to.deep.equal({ applied: [delivery.id], fenced: [] });
        const stored = await store.getDelivery(delivery.id);
        expect(stored).to.include({ status: 'delivered', attempts: 1, deliveredAt: clock.now(), updatedAt: clock.now() });
        expect(await store.listAttempts(delivery.id)).to.deep.equal([
          { deliveryId: delivery.id, number: 1, round: 0, startedAt, durationMs: 120, outcome: OK, error: null },
        ]);
        expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(null);
      });
    });

    context('when an attempt fails and will be retried', () => {
      it('puts the delivery back to pending at the next time, records the attempt and the failure start', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        const firstFailure = clock.now();
        const next = clock.now() + 30 * SECOND;
        await store.settle(
          [{ kind: 'retry', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(firstFailure, BUSY, 'HTTP 503'), nextAttemptAt: next }],
          clock.now(),
        );
        expect(await store.getDelivery(delivery.id)).to.include({
          status: 'pending',
          attempts: 1,
          nextAttemptAt: next,
          lastError: 'HTTP 503',
          deliveredAt: null,
        });
        expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(firstFailure);

        // A second failure keeps the start of the run of failures.
        clock.advanceTo(next);
        await lease();
        const [job] = await claim();
        await store.settle(
          [{ kind: 'retry', deliveryId: delivery.id, epoch: job!.delivery.leaseEpoch, attempt: attempt(clock.now(), TIMEOUT, 'timeout after 10 s', 2), nextAttemptAt: clock.now() + MINUTE }],
          clock.now(),
        );
        expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(firstFailure);
        const attempts = await store.listAttempts(delivery.id);
        expect(attempts.map((a) => [a.number, a.round, a.error])).to.deep.equal([
          [1, 0, 'HTTP 503'],
          [2, 0, 'timeout after 10 s'],
        ]);
        expect(attempts[1]!.outcome).to.deep.equal(TIMEOUT);

        // Success ends the run.
        clock.advance(MINUTE);
        await lease();
        const [again] = await claim();
        await store.settle(
          [{ kind: 'delivered', deliveryId: delivery.id, epoch: again!.delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null, 3) }],
          clock.now(),
        );
        expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(null);
        expect(await store.getDelivery(delivery.id)).to.include({ status: 'delivered', attempts: 3 });
      });
    });

    context('when the egress proxy failed the attempt', () => {
      it('records the attempt and its proxy failure kind, and leaves the endpoint\'s failingSince alone', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        const proxied: Outcome = { kind: 'proxy', status: 502, message: '502 from proxy http://proxy:3128: Bad Gateway (CONNECT 203.0.113.9:443)' };
        const next = clock.now() + MINUTE;
        await store.settle(
          [{ kind: 'retry', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), proxied, 'proxy: 502 from proxy'), nextAttemptAt: next }],
          clock.now(),
        );
        expect(await store.getDelivery(delivery.id)).to.include({ status: 'pending', attempts: 1, lastError: 'proxy: 502 from proxy' });
        expect((await store.listAttempts(delivery.id)).map((a) => a.outcome)).to.deep.equal([proxied]);
        expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(null);

        // The endpoint's own failure after it starts the run, as always.
        clock.advanceTo(next);
        await lease();
        const [job] = await claim();
        const failedAt = clock.now();
        await store.settle(
          [{ kind: 'retry', deliveryId: delivery.id, epoch: job!.delivery.leaseEpoch, attempt: attempt(failedAt, BUSY, 'HTTP 503', 2), nextAttemptAt: failedAt + MINUTE }],
          clock.now(),
        );
        expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(failedAt);
      });
    });

    context('when an attempt fails for good', () => {
      it('marks the delivery dead and writes a dead letter with payload, attempts, last outcome and reason', async () => {
        await addEndpoint('ep_1');
        const { delivery, event } = await claimedDelivery('ep_1');
        const first = clock.now();
        await store.settle(
          [{ kind: 'retry', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(first, BUSY, 'HTTP 503'), nextAttemptAt: first + MINUTE }],
          clock.now(),
        );
        clock.advance(MINUTE);
        await lease();
        const [job] = await claim();
        const gone: Outcome = { kind: 'response', status: 410, location: null, retryAfter: null, body: 'gone' };
        const second = clock.now();
        clock.advance(SECOND);
        const result = await store.settle(
          [{ kind: 'dead', deliveryId: delivery.id, epoch: job!.delivery.leaseEpoch, attempt: attempt(second, gone, 'HTTP 410', 2), deadLetterId: 'dl_1', reason: 'permanent: HTTP 410' }],
          clock.now(),
        );
        expect(result.applied).to.deep.equal([delivery.id]);
        expect(await store.getDelivery(delivery.id)).to.include({ status: 'dead', attempts: 2, lastError: 'HTTP 410' });
        expect(await store.getDeadLetter('dl_1')).to.deep.equal({
          id: 'dl_1',
          deliveryId: delivery.id,
          eventId: event.id,
          endpointId: 'ep_1',
          tenantId: 'acme',
          eventType: 'invoice.paid',
          payload: event.payload,
          reason: 'permanent: HTTP 410',
          lastOutcome: gone,
          attempts: [
            { deliveryId: delivery.id, number: 1, round: 0, startedAt: first, durationMs: 120, outcome: BUSY, error: 'HTTP 503' },
            { deliveryId: delivery.id, number: 2, round: 0, startedAt: second, durationMs: 120, outcome: gone, error: 'HTTP 410' },
          ],
          createdAt: clock.now(),
          replayedAt: null,
          triage: { state: 'new', note: null, by: null, at: clock.now() },
        });
        expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(first);
        expect(await store.getDeadLetter('dl_missing')).to.equal(undefined);
      });
    });

    context('when a claim is released', () => {
      it('puts the delivery back to pending without spending an attempt', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        const later = clock.now() + MINUTE;
        const result = await store.settle(
          [{ kind: 'release', deliveryId: delivery.id, epoch: delivery.leaseEpoch, nextAttemptAt: later }],
          clock.now(),
        );
        expect(result.applied).to.deep.equal([delivery.id]);
        expect(await store.getDelivery(delivery.id)).to.include({ status: 'pending', attempts: 0, nextAttemptAt: later });
        expect(await store.listAttempts(delivery.id)).to.deep.equal([]);
        expect(await claim()).to.deep.equal([]);
        clock.advance(MINUTE);
        await lease();
        expect(await claim()).to.have.length(1);
      });
    });

    context('when a batch mixes current and stale claims', () => {
      it('applies the current ones and reports the others as fenced', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const { delivery: claimed } = await claimedDelivery('ep_1');
        const { deliveryIds: [pendingId] } = await seed(['ep_2'], { dueAt: clock.now() + HOUR });
        const result = await store.settle(
          [
            { kind: 'delivered', deliveryId: claimed.id, epoch: claimed.leaseEpoch, attempt: attempt(clock.now(), OK, null) },
            { kind: 'delivered', deliveryId: pendingId!, epoch: 1, attempt: attempt(clock.now(), OK, null) },
            { kind: 'delivered', deliveryId: claimed.id, epoch: claimed.leaseEpoch, attempt: attempt(clock.now(), OK, null) },
          ],
          clock.now(),
        );
        expect(result).to.deep.equal({ applied: [claimed.id], fenced: [pendingId, claimed.id] });
        expect(await store.listAttempts(claimed.id)).to.have.length(1);
        expect(await store.listAttempts(pendingId!)).to.deep.equal([]);
        expect((await store.getDelivery(pendingId!))?.status).to.equal('pending');
      });
    });

    context('when the owner renewed its lease in time', () => {
      it('still applies its settlements', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        clock.advance(LEASE_MS / 2);
        await lease();
        const result = await store.settle(
          [{ kind: 'delivered', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        expect(result.applied).to.deep.equal([delivery.id]);
      });
    });

    context('when the claimer\'s lease lapsed and nobody took the slot', () => {
      it('still applies its settlement: the claim\'s epoch is still the slot\'s', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        clock.advance(LEASE_MS + SECOND);
        const result = await store.settle(
          [{ kind: 'delivered', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        expect(result).to.deep.equal({ applied: [delivery.id], fenced: [] });
      });
    });

    context('when the claimer released the slot and took it again', () => {
      it('fences the claim of the earlier epoch, which a claim at the new epoch takes again', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        await store.releaseLeases('node-a', [delivery.slot]);
        expect((await lease('node-a', [delivery.slot]))[0]?.epoch).to.equal(delivery.leaseEpoch + 1);
        const stale = await store.settle(
          [{ kind: 'delivered', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        expect(stale).to.deep.equal({ applied: [], fenced: [delivery.id] });
        expect(await store.listAttempts(delivery.id)).to.deep.equal([]);
        const jobs = await claim();
        expect(jobs.map((j) => [j.delivery.id, j.delivery.leaseEpoch])).to.deep.equal([[delivery.id, delivery.leaseEpoch + 1]]);
      });
    });

    context('when another owner took the slot after the lease expired', () => {
      it('fences the old claimer\'s settlement and writes nothing', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        clock.advance(LEASE_MS + SECOND);
        await lease('node-b');
        const before = await store.getDelivery(delivery.id);
        const result = await store.settle(
          [
            { kind: 'dead', deliveryId: delivery.id, epoch: delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId: 'dl_x', reason: 'exhausted' },
          ],
          clock.now(),
        );
        expect(result).to.deep.equal({ applied: [], fenced: [delivery.id] });
        expect(await store.getDelivery(delivery.id)).to.deep.equal(before);
        expect(await store.listAttempts(delivery.id)).to.deep.equal([]);
        expect(await store.getDeadLetter('dl_x')).to.equal(undefined);
        expect((await store.getEndpoint('ep_1'))?.failingSince).to.equal(null);
      });
    });

    context('when a claimer crashes with deliveries in flight', () => {
      it('lets the next owner of the slot claim them again at the new epoch, and fences the old claim', async () => {
        await addEndpoint('ep_1');
        const { delivery } = await claimedDelivery('ep_1');
        expect(delivery.leaseEpoch).to.equal(1);
        clock.advance(LEASE_MS + SECOND);
        const leases = await lease('node-b');
        expect(leases.find((l) => l.slot === delivery.slot)?.epoch).to.equal(2);
        const jobs = await claim({ owner: 'node-b' });
        expect(jobs.map((j) => j.delivery.id)).to.deep.equal([delivery.id]);
        expect(jobs[0]!.delivery).to.include({ status: 'in_flight', leaseEpoch: 2, attempts: 0 });

        const stale = await store.settle(
          [{ kind: 'delivered', deliveryId: delivery.id, epoch: 1, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        expect(stale.fenced).to.deep.equal([delivery.id]);
        const fresh = await store.settle(
          [{ kind: 'delivered', deliveryId: delivery.id, epoch: 2, attempt: attempt(clock.now(), OK, null) }],
          clock.now(),
        );
        expect(fresh.applied).to.deep.equal([delivery.id]);
        expect(await store.listAttempts(delivery.id)).to.have.length(1);
      });
    });
  });
}
