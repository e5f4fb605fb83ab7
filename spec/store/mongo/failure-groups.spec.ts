import { expect } from 'chai';
import { failureGroups, replayFailureGroup } from '../../../lib/store/mongo/failure-groups.ts';
import { failureCountPipeline, openFailuresFilter, resumeFailureGroupFilter, retryingFailuresFilter } from '../../../lib/store/mongo/dead-letter-queries.ts';
import { resumeDeliveriesUpdate } from '../../../lib/store/mongo/queries.ts';
import { fakeDb } from './fake-db.ts';

const NOW = 1_000_000;

describe('MongoDB failure groups', () => {
  context('when both sides have failures', () => {
    it('counts each side with one aggregation, merges them, and samples each group from the side of its latest failure', async () => {
      const fake = fakeDb();
      fake.c.deliveries.on('aggregate', () => [{ _id: { endpointId: 'ep_1', kind: 'timeout' }, tenantId: 'acme', count: 1_200, firstSeen: 10, lastSeen: 90 }]);
      fake.c.deadLetters.on('aggregate', () => [
        { _id: { endpointId: 'ep_1', kind: 'timeout' }, tenantId: 'acme', count: 3, firstSeen: 5, lastSeen: 50 },
        { _id: { endpointId: 'ep_2', kind: 'http-503' }, tenantId: 'acme', count: 2, firstSeen: 60, lastSeen: 70 },
      ]);
      fake.c.deliveries.on('findOne', () => ({ _id: 'dlv_9', round: 2 }));
      fake.c.attempts.on('findOne', () => ({ outcome: { kind: 'timeout', timeoutMs: 10_000 } }));
      fake.c.deadLetters.on('findOne', () => ({ lastOutcome: { kind: 'response', status: 503, location: null, retryAfter: null, body: 'busy' } }));

      const groups = await failureGroups(fake.db, { tenantId: 'acme' });
      expect(groups).to.deep.equal([
        {
          endpointId: 'ep_1',
          tenantId: 'acme',
          kind: 'timeout',
          count: { retrying: 1_200, dead: 3, total: 1_203 },
          firstSeen: 5,
          lastSeen: 90,
          sample: { summary: 'timeout after 10 s', status: null, body: null },
        },
        {
          endpointId: 'ep_2',
          tenantId: 'acme',
          kind: 'http-503',
          count: { retrying: 0, dead: 2, total: 2 },
          firstSeen: 60,
          lastSeen: 70,
          sample: { summary: 'HTTP 503', status: 503, body: 'busy' },
        },
      ]);
      expect(fake.callsTo('deliveries', 'aggregate')[0]!.args[0]).to.deep.equal(
        failureCountPipeline(retryingFailuresFilter({ tenantId: 'acme' }), 'lastFailureKind', 'lastFailureAt'),
      );
      expect(fake.callsTo('deadLetters', 'aggregate')[0]!.args[0]).to.deep.equal(
        failureCountPipeline(openFailuresFilter({ tenantId: 'acme' }), 'failureKind', 'createdAt'),
      );
      const [latestDelivery] = fake.callsTo('deliveries', 'findOne');
      expect(latestDelivery!.args).to.deep.equal([
        retryingFailuresFilter({ endpointId: 'ep_1', kind: 'timeout' }),
        { sort: { lastFailureAt: -1 }, projection: { _id: 1, round: 1 } },
      ]);
      expect(fake.callsTo('attempts', 'findOne')[0]!.args).to.deep.equal([{ deliveryId: 'dlv_9', round: 2 }, { sort: { number: -1 }, projection: { outcome: 1 } }]);
      expect(fake.callsTo('deadLetters', 'findOne')[0]!.args[0]).to.deep.equal(openFailuresFilter({ endpointId: 'ep_2', kind: 'http-503' }));
    });
  });

  context('when a group is replayed', () => {
    it('makes its retrying deliveries due now in one update, then replays its open dead letters of that kind', async () => {
      const fake = fakeDb();
      fake.c.deliveries.on('updateMany', () => ({ matchedCount: 4, modifiedCount: 4 }));
      const key = { endpointId: 'ep_1', kind: 'http-503' };
      expect(await replayFailureGroup(fake.db, key, NOW)).to.deep.equal({ deadLetters: 0, retrying: 4 });
      expect(fake.callsTo('deliveries', 'updateMany')[0]!.args.slice(0, 2)).to.deep.equal([resumeFailureGroupFilter(key, NOW), resumeDeliveriesUpdate(NOW)]);
      const [page] = fake.callsTo('deadLetters', 'find');
      expect((page!.args[0] as { $and: unknown[] }).$and[0]).to.deep.include({ endpointId: 'ep_1', failureKind: 'http-503' });
    });
  });
});
