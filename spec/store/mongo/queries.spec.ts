import { expect } from 'chai';
import { ObjectId } from 'mongodb';
import {
  afterKeyFilter,
  claimableFilter,
  claimOneFilter,
  claimUpdate,
  clampLimit,
  countsByStatus,
  deadLetterListFilter,
  deliveryListFilter,
  endpointClaimableFilter,
  endpointPatchUpdate,
  endpointsWorthClaiming,
  isCurrentClaim,
  liveLeasesFilter,
  pickClaims,
  renewLeasesFilter,
  replayDeliveryFilter,
  replayDeliveryUpdate,
  resumeDeliveriesFilter,
  resumeDeliveriesUpdate,
  settleFilter,
  settleUpdate,
  slotsToTake,
  takeLeaseFilter,
  takeLeaseUpdate,
  unfinishedDeliveriesFilter,
} from '../../../lib/store/mongo/queries.ts';
import type { ClaimCandidate } from '../../../lib/store/mongo/queries.ts';
import type { ClaimRequest, Settlement } from '../../../lib/store/port.ts';

const NOW = 1_000_000;
const OK = { kind: 'response', status: 200, location: null, retryAfter: null, body: 'ok' } as const;
const attempt = { number: 1, startedAt: NOW - 100, durationMs: 100, outcome: OK, error: 'HTTP 503' };

function request(overrides: Partial<ClaimRequest> = {}): ClaimRequest {
  return { owner: 'node-a', now: NOW, limit: 10, perEndpointLimit: 2, skipEndpointIds: [], ...overrides };
}

describe('MongoDB store queries', () => {
  describe('leases', () => {
    it('reads the owner\'s live leases, optionally among some slots', () => {
      expect(liveLeasesFilter('a', NOW)).to.deep.equal({ owner: 'a', until: { $gt: NOW } });
      expect(liveLeasesFilter('a', NOW, [1, 2])).to.deep.equal({ owner: 'a', until: { $gt: NOW }, _id: { $in: [1, 2] } });
    });

    it('renews the owner\'s own leases whether live or lapsed (epoch untouched)', () => {
      expect(renewLeasesFilter('a', [1, 2])).to.deep.equal({ _id: { $in: [1, 2] }, owner: 'a' });
    });

    it('takes a free or expired slot of someone else with the next epoch (until = now counts as expired)', () => {
      expect(takeLeaseFilter('a', 3, NOW)).to.deep.equal({
        _id: 3,
        owner: { $ne: 'a' },
        $or: [{ owner: null }, { until: { $lte: NOW } }],
      });
      expect(takeLeaseUpdate('a', NOW + 10)).to.deep.equal({ $set: { owner: 'a', until: NOW + 10 }, $inc: { epoch: 1 } });
    });

    it('tries to take only slots never leased, released, or expired and someone else\'s', () => {
      const current = [
        { _id: 0, owner: 'a', until: NOW - 1 },
        { _id: 1, owner: 'b', until: NOW + 1 },
        { _id: 2, owner: 'b', until: NOW },
        { _id: 3, owner: null, until: 0 },
      ];
      expect(slotsToTake([0, 1, 2, 3, 4, 4], current, 'a', NOW)).to.deep.equal([2, 3, 4]);
    });
  });

  describe('claims', () => {
    const owned = [
      { slot: 1, epoch: 3 },
      { slot: 2, epoch: 3 },
      { slot: 5, epoch: 7 },
    ];

    it('finds due pending deliveries in owned slots and orphans under an older epoch, per epoch', () => {
      expect(claimableFilter(owned, request())).to.deep.equal({
        $or: [
          { status: 'pending', slot: { $in: [1, 2, 5] }, nextAttemptAt: { $lte: NOW } },
          { status: 'in_flight', slot: { $in: [1, 2] }, leaseEpoch: { $lt: 3 } },
          { status: 'in_flight', slot: { $in: [5] }, leaseEpoch: { $lt: 7 } },
        ],
      });
    });

    it('honours skipped endpoints and a chosen endpoint (nothing when the chosen one is skipped)', () => {
      expect(claimableFilter(owned, request({ skipEndpointIds: ['ep_1'] }))).to.include.keys('endpointId');
      expect(claimableFilter(owned, request({ skipEndpointIds: ['ep_1'] })).endpointId).to.deep.equal({ $nin: ['ep_1'] });
      expect(claimableFilter(owned, request({ endpointId: 'ep_2' })).endpointId).to.equal('ep_2');
      expect(claimableFilter(owned, request({ endpointId: 'ep_2', skipEndpointIds: ['ep_2'] })).endpointId).to.deep.equal({ $in: [] });
    });

    it('claims one candidate only while it is still claimable, stamping the claim', () => {
      const candidate: ClaimCandidate = { _id: 'dlv_1', endpointId: 'ep_1', slot: 5, nextAttemptAt: NOW };
      expect(claimOneFilter(candidate, { slot: 5, epoch: 7 }, NOW)).to.deep.equal({
        _id: 'dlv_1',
        ...endpointClaimableFilter('ep_1', { slot: 5, epoch: 7 }, NOW),
      });
      expect(endpointClaimableFilter('ep_1', { slot: 5, epoch: 7 }, NOW)).to.deep.equal({
        endpointId: 'ep_1',
        slot: 5,
        $or: [{ status: 'pending', nextAttemptAt: { $lte: NOW } }, { status: 'in_flight', leaseEpoch: { $lt: 7 } }],
      });
      const claimId = new ObjectId();
      expect(claimUpdate(7, NOW, claimId)).to.deep.equal({ $set: { status: 'in_flight', leaseEpoch: 7, updatedAt: NOW, claimId } });
    });

    it('picks at most perEndpoint per endpoint, then the earliest due up to the limit, ties by id', () => {
      const c = (id: string, endpointId: string, at: number): ClaimCandidate => ({ _id: id, endpointId, slot: 0, nextAttemptAt: at });
      const candidates = [c('a3', 'A', 3), c('a1', 'A', 1), c('a2', 'A', 2), c('b9', 'B', 9), c('c2', 'C', 2), c('c0', 'C', 2)];
      expect(pickClaims(candidates, 2, 10).map((x) => x._id)).to.deep.equal(['a1', 'a2', 'c0', 'c2', 'b9']);
      expect(pickClaims(candidates, 2, 3).map((x) => x._id)).to.deep.equal(['a1', 'a2', 'c0']);
      expect(pickClaims([...candidates, c('a1', 'A', 1)], 5, 10).filter((x) => x._id === 'a1')).to.have.length(1);
    });

    it('looks only at the endpoints whose earliest delivery is among the limit earliest', () => {
      const busy = [
        { endpointId: 'late', first: 30 },
        { endpointId: 'b', first: 10 },
        { endpointId: 'a', first: 10 },
        { endpointId: 'mid', first: 20 },
      ];
      expect(endpointsWorthClaiming(busy, 3).map((b) => b.endpointId)).to.deep.equal(['a', 'b', 'mid']);
    });
  });

  describe('settles', () => {
    const base = { deliveryId: 'dlv_1', epoch: 4 };

    it('are conditional on the delivery being in flight at the claim\'s epoch', () => {
      expect(settleFilter({ kind: 'release', ...base, nextAttemptAt: NOW })).to.deep.equal({ _id: 'dlv_1', status: 'in_flight', leaseEpoch: 4 });
    });

    it('apply only while the epoch is also the slot\'s current one', () => {
      const delivery = { status: 'in_flight', leaseEpoch: 4, slot: 2 };
      expect(isCurrentClaim(delivery, { _id: 2, epoch: 4 }, 4)).to.equal(true);
      expect(isCurrentClaim(delivery, { _id: 2, epoch: 5 }, 4), 'slot moved on').to.equal(false);
      expect(isCurrentClaim(delivery, { _id: 3, epoch: 4 }, 4), 'another slot').to.equal(false);
      expect(isCurrentClaim(delivery, undefined, 4), 'no lease').to.equal(false);
      expect(isCurrentClaim({ ...delivery, leaseEpoch: 3 }, { _id: 2, epoch: 4 }, 3), 'reclaimed').to.equal(false);
      expect(isCurrentClaim({ ...delivery, status: 'delivered' }, { _id: 2, epoch: 4 }, 4), 'settled').to.equal(false);
      expect(isCurrentClaim(undefined, { _id: 2, epoch: 4 }, 4), 'missing').to.equal(false);
    });

    it('write each kind\'s new state, counting an attempt except on release', () => {
      const kinds: Array<[Settlement, object]> = [
        [
          { kind: 'delivered', ...base, attempt: { ...attempt, error: null } },
          { $set: { status: 'delivered', lastError: null, deliveredAt: NOW, updatedAt: NOW }, $inc: { attempts: 1 } },
        ],
        [
          { kind: 'retry', ...base, attempt, nextAttemptAt: NOW + 30 },
          { $set: { status: 'pending', nextAttemptAt: NOW + 30, lastError: 'HTTP 503', updatedAt: NOW }, $inc: { attempts: 1 } },
        ],
        [
          { kind: 'dead', ...base, attempt, deadLetterId: 'dl_1', reason: 'exhausted' },
          { $set: { status: 'dead', lastError: 'HTTP 503', updatedAt: NOW }, $inc: { attempts: 1 } },
        ],
        [{ kind: 'release', ...base, nextAttemptAt: NOW + 60 }, { $set: { status: 'pending', nextAttemptAt: NOW + 60, updatedAt: NOW } }],
      ];
      for (const [settlement, update] of kinds) expect(settleUpdate(settlement, NOW), settlement.kind).to.deep.equal(update);
    });
  });

  describe('endpoints and wake-ups', () => {
    it('patches only the given fields, null included, and sets updatedAt', () => {
      expect(endpointPatchUpdate({ url: 'https://x.example', disabledReason: null, failingSince: undefined }, NOW)).to.deep.equal({
        $set: { updatedAt: NOW, url: 'https://x.example', disabledReason: null },
      });
    });

    it('marks replays and resumes with wokeAt so the change feed can pick them out', () => {
      expect(resumeDeliveriesFilter('ep_1', NOW)).to.deep.equal({ endpointId: 'ep_1', status: 'pending', nextAttemptAt: { $gt: NOW } });
      expect(resumeDeliveriesUpdate(NOW)).to.deep.equal({ $set: { nextAttemptAt: NOW, updatedAt: NOW, wokeAt: NOW } });
      expect(replayDeliveryFilter('dlv_1')).to.deep.equal({ _id: 'dlv_1', status: 'dead' });
      expect(replayDeliveryUpdate(NOW)).to.deep.equal({
        $set: { status: 'pending', attempts: 0, nextAttemptAt: NOW, lastError: null, deliveredAt: null, updatedAt: NOW, wokeAt: NOW },
        $inc: { round: 1 },
      });
    });
  });

  describe('listings', () => {
    it('filters deliveries by each field set, a time range and the after cursor', () => {
      expect(deliveryListFilter({})).to.deep.equal({});
      expect(
        deliveryListFilter({ endpointId: 'e', tenantId: 't', eventId: 'v', status: 'dead', eventType: 'x.y', since: 1, until: 9, after: { createdAt: 5, id: 'dlv_5' } }),
      ).to.deep.equal({
        endpointId: 'e',
        tenantId: 't',
        eventId: 'v',
        status: 'dead',
        eventType: 'x.y',
        createdAt: { $gte: 1, $lt: 9 },
        $or: [{ createdAt: { $lt: 5 } }, { createdAt: 5, _id: { $lt: 'dlv_5' } }],
      });
      expect(deliveryListFilter({ until: 9 })).to.deep.equal({ createdAt: { $lt: 9 } });
    });

    it('filters dead letters, hiding replayed ones unless asked', () => {
      expect(deadLetterListFilter({})).to.deep.equal({ replayedAt: null });
      expect(deadLetterListFilter({ endpointId: 'e', tenantId: 't', since: 1, includeReplayed: true })).to.deep.equal({
        endpointId: 'e',
        tenantId: 't',
        createdAt: { $gte: 1 },
      });
      expect(afterKeyFilter(undefined)).to.deep.equal({});
      expect(afterKeyFilter({ createdAt: 5, id: 'dl_5' })).to.deep.equal({
        $or: [{ createdAt: { $gt: 5 } }, { createdAt: 5, _id: { $gt: 'dl_5' } }],
      });
    });

    it('keeps events whose deliveries are unfinished or finished at or after the horizon', () => {
      expect(unfinishedDeliveriesFilter(['evt_1'], NOW)).to.deep.equal({
        eventId: { $in: ['evt_1'] },
        $or: [{ status: { $nin: ['delivered', 'dead', 'cancelled'] } }, { updatedAt: { $gte: NOW } }],
      });
    });

    it('clamps limits and counts every status', () => {
      expect([clampLimit(-1, 10), clampLimit(2.7, 10), clampLimit(50, 10), clampLimit(Number.NaN, 10)]).to.deep.equal([0, 2, 10, 10]);
      expect(countsByStatus(['pending', 'dead'], [{ _id: 'dead', n: 3 }, { _id: 'weird', n: 1 }])).to.deep.equal({ pending: 0, dead: 3 });
    });
  });
});
