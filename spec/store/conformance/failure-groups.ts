/**
 * Failure groups: retrying deliveries and open dead letters grouped by endpoint and failure kind,
 * listed, and replayed as a group.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import type { Outcome } from '../../../lib/model.ts';
import type { Store } from '../../../lib/store/port.ts';
import { MINUTE, HOUR, OK, BUSY, TIMEOUT, attempt, type ConformanceSuite } from './fixtures.ts';

export function describeFailureGroups(suite: ConformanceSuite): void {
  const { addEndpoint, seed, lease, claim } = suite;
  describe('failure groups', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    const REFUSED: Outcome = { kind: 'network', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 203.0.113.5:443' };

    /** Claims the deliveries named (seeded already) and returns their claim epochs. */
    async function claimAll(deliveryIds: readonly string[]): Promise<Map<string, number>> {
      await lease();
      const jobs = await claim();
      const epochs = new Map(jobs.map((job) => [job.delivery.id, job.delivery.leaseEpoch]));
      for (const id of deliveryIds) if (!epochs.has(id)) throw new Error(`${id} was not claimed`);
      return epochs;
    }

    /** Settles one claimed delivery as a failure at the clock's time: retried an hour later, or dead. */
    async function fail(deliveryId: string, epoch: number, outcome: Outcome, deadLetterId?: string): Promise<void> {
      const record = attempt(clock.now(), outcome, 'failed');
      const settlement =
        deadLetterId === undefined
          ? { kind: 'retry' as const, deliveryId, epoch, attempt: record, nextAttemptAt: clock.now() + HOUR }
          : { kind: 'dead' as const, deliveryId, epoch, attempt: record, deadLetterId, reason: 'exhausted' };
      const result = await store.settle([settlement], clock.now());
      expect(result.applied).to.deep.equal([deliveryId]);
    }

    /**
     * At t0: ep_1's delivery a fails with a 503 (retrying); t0+1min: its b times out (retrying);
     * t0+2min: its c dies of a 503; t0+3min: globex's ep_2's d dies of a refused connection.
     * Its e is delivered and its f released (no attempt): neither is a failure.
     */
    async function seedFailures() {
      await addEndpoint('ep_1', 'acme');
      await addEndpoint('ep_2', 'globex');
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push((await seed(['ep_1'])).deliveryIds[0]!);
      ids.push((await seed(['ep_2'], { tenantId: 'globex' })).deliveryIds[0]!);
      const [a, b, c, e, f, d] = ids as [string, string, string, string, string, string];
      const epochs = await claimAll(ids);
      const t0 = clock.now();
      await fail(a, epochs.get(a)!, BUSY);
      clock.advance(MINUTE);
      await fail(b, epochs.get(b)!, TIMEOUT);
      clock.advance(MINUTE);
      await fail(c, epochs.get(c)!, BUSY, 'dl_c');
      clock.advance(MINUTE);
      await fail(d, epochs.get(d)!, REFUSED, 'dl_d');
      await store.settle(
        [
          { kind: 'delivered', deliveryId: e, epoch: epochs.get(e)!, attempt: attempt(clock.now(), OK, null) },
          { kind: 'release', deliveryId: f, epoch: epochs.get(f)!, nextAttemptAt: clock.now() + 2 * HOUR },
        ],
        clock.now(),
      );
      return { t0, a, b, c, d, epochs };
    }

    context('when deliveries wait for a retry and dead letters are open', () => {
      it('groups them by endpoint and failure kind, the largest first, with counts, times and a sample', async () => {
        const { t0 } = await seedFailures();
        expect(await store.failureGroups({})).to.deep.equal([
          {
            endpointId: 'ep_1',
            tenantId: 'acme',
            kind: 'http-503',
            count: { retrying: 1, dead: 1, total: 2 },
            firstSeen: t0,
            lastSeen: t0 + 2 * MINUTE,
            sample: { summary: 'HTTP 503', status: 503, body: 'busy' },
          },
          {
            endpointId: 'ep_2',
            tenantId: 'globex',
            kind: 'refused',
            count: { retrying: 0, dead: 1, total: 1 },
            firstSeen: t0 + 3 * MINUTE,
            lastSeen: t0 + 3 * MINUTE,
            sample: { summary: 'ECONNREFUSED: connect ECONNREFUSED 203.0.113.5:443', status: null, body: null },
          },
          {
            endpointId: 'ep_1',
            tenantId: 'acme',
            kind: 'timeout',
            count: { retrying: 1, dead: 0, total: 1 },
            firstSeen: t0 + MINUTE,
            lastSeen: t0 + MINUTE,
            sample: { summary: 'timeout after 10 s', status: null, body: null },
          },
        ]);
      });

      it('filters by endpoint and tenant, and caps the groups returned', async () => {
        await seedFailures();
        const key = (g: { endpointId: string; kind: string }) => `${g.endpointId}/${g.kind}`;
        expect((await store.failureGroups({ endpointId: 'ep_1' })).map(key)).to.deep.equal(['ep_1/http-503', 'ep_1/timeout']);
        expect((await store.failureGroups({ tenantId: 'globex' })).map(key)).to.deep.equal(['ep_2/refused']);
        expect((await store.failureGroups({ limit: 1 })).map(key)).to.deep.equal(['ep_1/http-503']);
      });

      it('lists dead letters of one failure kind', async () => {
        await seedFailures();
        expect((await store.listDeadLetters({ failureKind: 'http-503' })).map((dl) => dl.id)).to.deep.equal(['dl_c']);
        expect((await store.listDeadLetters({ failureKind: 'timeout' })).map((dl) => dl.id)).to.deep.equal([]);
      });
    });

    context('when failures end', () => {
      it('leaves out a delivery once delivered, a replayed or discarded dead letter, but keeps an acknowledged one', async () => {
        const { a, b } = await seedFailures();
        clock.advance(HOUR);
        await lease();
        const jobs = await claim({ endpointId: 'ep_1' });
        const epochOf = (id: string) => jobs.find((job) => job.delivery.id === id)!.delivery.leaseEpoch;
        expect(jobs.map((job) => job.delivery.id).sort()).to.deep.equal([a, b].sort());
        // b (timed out) is claimed, then released untouched: waiting again, it keeps its failure.
        await store.settle(
          [
            { kind: 'delivered', deliveryId: a, epoch: epochOf(a), attempt: attempt(clock.now(), OK, null) },
            { kind: 'release', deliveryId: b, epoch: epochOf(b), nextAttemptAt: clock.now() + HOUR },
          ],
          clock.now(),
        );
        await store.replayDeadLetters({ ids: ['dl_c'] }, clock.now());
        await store.triageDeadLetters({ ids: ['dl_d'], state: 'acknowledged', note: 'their firewall', by: 'ops' }, clock.now());
        const key = (g: { endpointId: string; kind: string }) => `${g.endpointId}/${g.kind}`;
        expect((await store.failureGroups({})).map(key)).to.deep.equal(['ep_2/refused', 'ep_1/timeout']);
        await store.triageDeadLetters({ ids: ['dl_d'], state: 'discarded', note: 'gone for good', by: 'ops' }, clock.now());
        expect((await store.failureGroups({})).map(key)).to.deep.equal(['ep_1/timeout']);
      });
    });

    context('when a group is replayed', () => {
      it('makes its retrying deliveries due now and replays its open dead letters, leaving other groups alone', async () => {
        const { a, b, c } = await seedFailures();
        clock.advance(MINUTE);
        const now = clock.now();
        expect(await store.replayFailureGroup({ endpointId: 'ep_1', kind: 'http-503' }, now)).to.deep.equal({ deadLetters: 1, retrying: 1 });
        expect(await store.getDelivery(a)).to.include({ status: 'pending', nextAttemptAt: now, attempts: 1 });
        expect(await store.getDelivery(c)).to.include({ status: 'pending', nextAttemptAt: now, attempts: 0 });
        expect((await store.getDeadLetter('dl_c'))?.triage.state).to.equal('replayed');
        expect((await store.getDelivery(b))?.nextAttemptAt).to.be.greaterThan(now);
        // The same size now: the latest failure first (the replayed dead letter no longer counts).
        const groups = await store.failureGroups({ endpointId: 'ep_1' });
        expect(groups.map((g) => [g.kind, g.count, g.lastSeen])).to.deep.equal([
          ['timeout', { retrying: 1, dead: 0, total: 1 }, now - 3 * MINUTE],
          ['http-503', { retrying: 1, dead: 0, total: 1 }, now - 4 * MINUTE],
        ]);
        expect(await store.replayFailureGroup({ endpointId: 'ep_1', kind: 'dns' }, now)).to.deep.equal({ deadLetters: 0, retrying: 0 });
      });
    });
  });
}
