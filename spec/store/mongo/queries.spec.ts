import { expect } from 'chai';
import { ObjectId } from 'mongodb';
import {
  afterKeyFilter,
  DEAD_LETTER_LIST_SORT,
  DEAD_LETTER_REPLAY_SORT,
  deadLetterListFilter,
  deadLetterReplayFilter,
  failureCountPipeline,
  markReplayedUpdate,
  openFailuresFilter,
  REPLAY_FENCE_UPDATE,
  replayDeliveryFilter,
  replayDeliveryUpdate,
  replayFenceFilter,
  resumeFailureGroupFilter,
  retryingFailuresFilter,
  triageFilter,
  triageUpdate,
  UNREVIEWED_FILTER,
} from '../../../lib/store/mongo/dead-letter-queries.ts';
import {
  applyUpdate,
  busyEndpointsPipeline,
  cancelChunkFilter,
  cancelDeliveriesFilter,
  cancelDeliveriesUpdate,
  CANDIDATE_PROJECTION,
  claimableFilter,
  claimOneFilter,
  claimUpdate,
  countsByStatus,
  credentialsFilter,
  DELIVERY_LIST_SORT,
  deliveryListFilter,
  DUE_ORDER,
  dueCountFilter,
  endpointChosen,
  endpointClaimableFilter,
  endpointDueFilter,
  endpointPatchUpdate,
  endpointsWorthClaiming,
  isCurrentClaim,
  liveLeasesFilter,
  movedSlots,
  orphansFilter,
  pickClaims,
  renewLeasesFilter,
  resumeDeliveriesFilter,
  resumeDeliveriesUpdate,
  settleFilter,
  settleUpdate,
  slotsToTake,
  statusCountFilter,
  takeLeaseFilter,
  takeLeaseUpdate,
  unfinishedDeliveriesFilter,
} from '../../../lib/store/mongo/queries.ts';
import { clampLimit } from '../../../lib/store/list-limit.ts';
import type { ClaimCandidate } from '../../../lib/store/mongo/queries.ts';
import { indexSpecs, RETIRED_INDEXES } from '../../../lib/store/mongo/schema.ts';
import type { ClaimRequest, Settlement } from '../../../lib/store/port.ts';

const NOW = 1_000_000;
const OK = { kind: 'response', status: 200, location: null, retryAfter: null, body: 'ok' } as const;
const BUSY = { kind: 'response', status: 503, location: null, retryAfter: null, body: 'busy' } as const;
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

    it('write each kind\'s new state, counting an attempt except on release, and drop the claim\'s id', () => {
      const unset = { claimId: '' };
      const kinds: Array<[Settlement, object]> = [
        [
          { kind: 'delivered', ...base, attempt: { ...attempt, error: null } },
          {
            $set: { status: 'delivered', lastError: null, deliveredAt: NOW, updatedAt: NOW, lastFailureKind: null, lastFailureAt: null },
            $inc: { attempts: 1 },
            $unset: unset,
          },
        ],
        [
          { kind: 'retry', ...base, attempt: { ...attempt, outcome: BUSY }, nextAttemptAt: NOW + 30 },
          {
            $set: { status: 'pending', nextAttemptAt: NOW + 30, lastError: 'HTTP 503', updatedAt: NOW, lastFailureKind: 'http-503', lastFailureAt: NOW },
            $inc: { attempts: 1 },
            $unset: unset,
          },
        ],
        [
          { kind: 'dead', ...base, attempt: { ...attempt, outcome: { kind: 'timeout', timeoutMs: 10_000 } }, deadLetterId: 'dl_1', reason: 'exhausted' },
          {
            $set: { status: 'dead', lastError: 'HTTP 503', updatedAt: NOW, lastFailureKind: 'timeout', lastFailureAt: NOW },
            $inc: { attempts: 1 },
            $unset: unset,
          },
        ],
        [{ kind: 'release', ...base, nextAttemptAt: NOW + 60 }, { $set: { status: 'pending', nextAttemptAt: NOW + 60, updatedAt: NOW }, $unset: unset }],
      ];
      for (const [settlement, update] of kinds) expect(settleUpdate(settlement, NOW), settlement.kind).to.deep.equal(update);
    });

    it('are worked out in memory exactly as the server applies them (claim id gone, attempt counted)', () => {
      const doc = { _id: 'dlv_1', status: 'in_flight', attempts: 2, claimId: new ObjectId(), lastError: 'x', nextAttemptAt: 5 };
      expect(applyUpdate(doc, settleUpdate({ kind: 'retry', ...base, attempt: { ...attempt, outcome: BUSY }, nextAttemptAt: NOW + 30 }, NOW) as never)).to.deep.equal({
        _id: 'dlv_1', status: 'pending', attempts: 3, lastError: 'HTTP 503', nextAttemptAt: NOW + 30, updatedAt: NOW,
        lastFailureKind: 'http-503', lastFailureAt: NOW,
      });
      expect(applyUpdate({ n: 1 }, { $inc: { m: 2 } } as never)).to.deep.equal({ n: 1, m: 2 });
    });
  });

  describe('endpoints and wake-ups', () => {
    it('patches only the given fields, null included, and sets updatedAt', () => {
      expect(endpointPatchUpdate({ url: 'https://x.example', disabledReason: null, failingSince: undefined }, NOW)).to.deep.equal({
        $set: { updatedAt: NOW, url: 'https://x.example', disabledReason: null },
      });
    });

    it('sets a rate limit, and sets it to null to lift it', () => {
      expect(endpointPatchUpdate({ rateLimit: { perSecond: 2, burst: 5 } }, NOW)).to.deep.equal({
        $set: { updatedAt: NOW, rateLimit: { perSecond: 2, burst: 5 } },
      });
      expect(endpointPatchUpdate({ rateLimit: null }, NOW)).to.deep.equal({ $set: { updatedAt: NOW, rateLimit: null } });
      expect(endpointPatchUpdate({ rateLimit: undefined, concurrency: 3 }, NOW)).to.deep.equal({ $set: { updatedAt: NOW, concurrency: 3 } });
    });

    it('sets a client certificate, and sets it to null to remove it', () => {
      const clientTls = { cert: 'PEM', key: 'enc:v1:aaaaaaaa:k', passphrase: 'enc:v1:aaaaaaaa:p', subject: 'CN=c', issuer: 'CN=ca', fingerprint: 'AB', notAfter: NOW };
      expect(endpointPatchUpdate({ clientTls }, NOW)).to.deep.equal({ $set: { updatedAt: NOW, clientTls } });
      expect(endpointPatchUpdate({ clientTls: null }, NOW)).to.deep.equal({ $set: { updatedAt: NOW, clientTls: null } });
    });

    it('sets adaptive concurrency, and sets it to null to make the concurrency fixed', () => {
      expect(endpointPatchUpdate({ adaptiveConcurrency: { initial: 3, targetLatencyMs: 900 } }, NOW)).to.deep.equal({
        $set: { updatedAt: NOW, adaptiveConcurrency: { initial: 3, targetLatencyMs: 900 } },
      });
      expect(endpointPatchUpdate({ adaptiveConcurrency: null }, NOW)).to.deep.equal({ $set: { updatedAt: NOW, adaptiveConcurrency: null } });
    });

    it("writes an ed25519 key's public key beside its secret, and none for an HMAC secret", () => {
      const secrets = [
        { secret: 'enc:v1:0badc0de:a:b', createdAt: NOW, expiresAt: null, publicKey: 'whpk_cHVi' },
        { secret: 'whsec_b2xk', createdAt: NOW - 1, expiresAt: NOW + 1 },
      ];
      expect(endpointPatchUpdate({ secrets }, NOW)).to.deep.equal({ $set: { updatedAt: NOW, secrets } });
    });

    it('sets headers and auth as documents of one shape, null to remove them, and matches them whole as a precondition', () => {
      const headers = [{ name: 'X-Key', value: 'enc:v1:x', secret: true }];
      const none = { token: null, username: null, password: null, tokenUrl: null, clientId: null, clientSecret: null, scope: null, audience: null };
      const bearerDoc = { type: 'bearer', ...none, token: 'enc:v1:t' };
      expect(endpointPatchUpdate({ headers, auth: { type: 'bearer', token: 'enc:v1:t' } }, NOW)).to.deep.equal({ $set: { updatedAt: NOW, headers, auth: bearerDoc } });
      expect(endpointPatchUpdate({ headers: null, auth: null }, NOW)).to.deep.equal({ $set: { updatedAt: NOW, headers: null, auth: null } });
      expect(credentialsFilter({ headers, auth: { type: 'bearer', token: 'enc:v1:t' } })).to.deep.equal({ headers, auth: bearerDoc });
      expect(credentialsFilter({ headers: null, auth: null })).to.deep.equal({ headers: null, auth: null });
      // The precondition is a match of whole documents: its keys are in the order endpointToDoc writes them.
      expect(Object.keys(credentialsFilter({ headers: null, auth: { type: 'bearer', token: 't' } }).auth as object)).to.deep.equal(Object.keys(bearerDoc));
    });

    it('marks replays and resumes with wokeAt so the change feed can pick them out', () => {
      expect(resumeDeliveriesFilter('ep_1', NOW)).to.deep.equal({ endpointId: 'ep_1', status: 'pending', nextAttemptAt: { $gt: NOW } });
      expect(resumeDeliveriesUpdate(NOW)).to.deep.equal({ $set: { nextAttemptAt: NOW, updatedAt: NOW, wokeAt: NOW } });
      expect(replayDeliveryFilter('dlv_1')).to.deep.equal({ _id: 'dlv_1', status: 'dead' });
      expect(replayDeliveryUpdate(NOW)).to.deep.equal({
        $set: {
          status: 'pending',
          attempts: 0,
          nextAttemptAt: NOW,
          lastError: null,
          deliveredAt: null,
          updatedAt: NOW,
          wokeAt: NOW,
          lastFailureKind: null,
          lastFailureAt: null,
        },
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

    it('filters dead letters by triage state: open ones unless asked, every one with includeReplayed, or the one named', () => {
      expect(deadLetterListFilter({})).to.deep.equal({ 'triage.state': { $in: ['new', 'acknowledged'] } });
      expect(deadLetterListFilter({ endpointId: 'e', tenantId: 't', since: 1, includeReplayed: true })).to.deep.equal({
        endpointId: 'e',
        tenantId: 't',
        createdAt: { $gte: 1 },
      });
      expect(deadLetterListFilter({ state: 'discarded', includeReplayed: false })).to.deep.equal({ 'triage.state': 'discarded' });
      expect(afterKeyFilter(undefined)).to.deep.equal({});
      const ord = new ObjectId();
      expect(afterKeyFilter({ createdAt: 5, ord })).to.deep.equal({
        $or: [{ createdAt: { $gt: 5 } }, { createdAt: 5, ord: { $gt: ord } }],
      });
    });

    it('replays by filter only open dead letters, the state named narrowing them; marks a replay in the triage', () => {
      expect(deadLetterReplayFilter({ endpointId: 'e', includeReplayed: true })).to.deep.equal({ endpointId: 'e', 'triage.state': { $in: ['new', 'acknowledged'] } });
      expect(deadLetterReplayFilter({ state: 'acknowledged' })).to.deep.equal({ 'triage.state': 'acknowledged' });
      expect(deadLetterReplayFilter({ state: 'discarded' })).to.equal(undefined);
      expect(markReplayedUpdate(NOW)).to.deep.equal({ $set: { replayedAt: NOW, 'triage.state': 'replayed', 'triage.at': NOW } });
    });

    it('filters dead letters by failure kind, and a replay by filter with it', () => {
      expect(deadLetterListFilter({ endpointId: 'e', failureKind: 'http-503' })).to.deep.equal({
        endpointId: 'e',
        failureKind: 'http-503',
        'triage.state': { $in: ['new', 'acknowledged'] },
      });
      expect(deadLetterReplayFilter({ failureKind: 'timeout' })).to.deep.equal({ failureKind: 'timeout', 'triage.state': { $in: ['new', 'acknowledged'] } });
    });

    it('sets an operator\'s triage only on open dead letters, each id once', () => {
      expect(triageFilter(['dl_1', 'dl_2', 'dl_1'])).to.deep.equal({ _id: { $in: ['dl_1', 'dl_2'] }, 'triage.state': { $in: ['new', 'acknowledged'] } });
      expect(triageUpdate({ ids: ['dl_1'], state: 'discarded', note: 'noise', by: 'bob' }, NOW)).to.deep.equal({
        $set: { triage: { state: 'discarded', note: 'noise', by: 'bob', at: NOW } },
      });
      expect(UNREVIEWED_FILTER).to.deep.equal({ 'triage.state': 'new' });
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

/**
 * Whether an index serves a query in order: its key begins with the query's equality fields (in
 * any order), followed by the sort's fields in the sort's order, all in the sort's directions or
 * all reversed (a backward scan). Then the server reads the index in order and a limit stops it.
 */
function servesInOrder(index: Readonly<Record<string, unknown>>, equality: readonly string[], sort: Readonly<Record<string, number>>): boolean {
  const key = Object.entries(index);
  const prefix = key.slice(0, equality.length).map(([field]) => field);
  if (prefix.length !== equality.length || !prefix.every((field) => equality.includes(field))) return false;
  const wanted = Object.entries(sort);
  const rest = key.slice(equality.length, equality.length + wanted.length);
  if (rest.length !== wanted.length || rest.some(([field], i) => field !== wanted[i]![0])) return false;
  const same = rest.every(([, dir], i) => dir === wanted[i]![1]);
  const reversed = rest.every(([, dir], i) => dir === -wanted[i]![1]);
  return same || reversed;
}

/** The equality fields of a flat filter (plain values, not operators). */
function equalityFields(filter: object): string[] {
  return Object.entries(filter)
    .filter(([field, value]) => !field.startsWith('$') && (typeof value !== 'object' || value === null))
    .map(([field]) => field);
}

describe('MongoDB store queries and the indexes that serve them', () => {
  const specs = indexSpecs(null);
  const index = (collection: keyof typeof specs, name: string) => {
    const found = specs[collection].find((i) => i.name === name);
    if (found === undefined) throw new Error(`no index ${name} on ${collection}`);
    return found.key as Record<string, number>;
  };
  const NOW = 1_000_000;

  context('when a claim reads an endpoint\'s first due deliveries (refill, claim by endpoint)', () => {
    it('has an index whose key is the filter\'s equalities then (nextAttemptAt, _id), covering the projection', () => {
      const filter = endpointDueFilter('ep_1', { slot: 3, epoch: 2 }, NOW);
      expect(equalityFields(filter).sort()).to.deep.equal(['endpointId', 'slot', 'status']);
      const walk = index('deliveries', 'deliveries_claim_walk');
      expect(servesInOrder(walk, equalityFields(filter), DUE_ORDER)).to.equal(true);
      for (const field of Object.keys(CANDIDATE_PROJECTION)) expect(walk, `${field} covered`).to.have.property(field);
      // The index the review found: no _id, so the server sorted the endpoint's whole due backlog.
      expect(servesInOrder({ endpointId: 1, status: 1, nextAttemptAt: 1 }, equalityFields(filter), DUE_ORDER)).to.equal(false);
    });
  });

  context('when a claim walks a slot\'s busy endpoints', () => {
    it('matches on the index\'s leading equalities, sorts on its key and groups by the next field with $first only', () => {
      const [match, sort, group] = busyEndpointsPipeline(4) as [{ $match: object }, { $sort: Record<string, number> }, { $group: Record<string, unknown> }];
      expect(match.$match).to.deep.equal({ status: 'pending', slot: 4 });
      const walk = index('deliveries', 'deliveries_claim_walk');
      expect(Object.entries(sort.$sort)).to.deep.equal(Object.entries(walk).slice(0, 4));
      expect(servesInOrder(walk, equalityFields(match.$match), { endpointId: 1, nextAttemptAt: 1 })).to.equal(true);
      expect(group.$group).to.deep.equal({ _id: '$endpointId', first: { $first: '$nextAttemptAt' } });
    });

    it('decides between scan and walk by a count over the due index, and finds orphans on the in-flight index', () => {
      expect(dueCountFilter(NOW)).to.deep.equal({ status: 'pending', nextAttemptAt: { $lte: NOW } });
      expect(Object.keys(index('deliveries', 'deliveries_next'))).to.deep.equal(['status', 'nextAttemptAt']);
      expect(orphansFilter([{ slot: 1, epoch: 3 }])).to.deep.equal({ status: 'in_flight', slot: { $in: [1] }, leaseEpoch: { $lt: 3 } });
      expect(orphansFilter([{ slot: 1, epoch: 3 }, { slot: 2, epoch: 4 }])).to.deep.equal({
        $or: [
          { status: 'in_flight', slot: { $in: [1] }, leaseEpoch: { $lt: 3 } },
          { status: 'in_flight', slot: { $in: [2] }, leaseEpoch: { $lt: 4 } },
        ],
      });
      expect(Object.keys(index('deliveries', 'deliveries_in_flight'))).to.deep.equal(['status', 'slot', 'leaseEpoch']);
      expect([endpointChosen({ skipEndpointIds: ['a'] }, 'a'), endpointChosen({ skipEndpointIds: [], endpointId: 'b' }, 'a'), endpointChosen({ skipEndpointIds: [] }, 'a')]).to.deep.equal([false, false, true]);
    });

    it('finds the slots a claim used whose lease moved on: another owner, another epoch, released or gone', () => {
      const owned = [1, 2, 3, 4, 5].map((slot) => ({ slot, epoch: 7 }));
      const current = [
        { _id: 1, owner: 'a', epoch: 7 },
        { _id: 2, owner: 'b', epoch: 8 },
        { _id: 3, owner: 'a', epoch: 8 },
        { _id: 4, owner: null, epoch: 7 },
      ];
      expect(movedSlots(owned, current, 'a')).to.deep.equal([2, 3, 4, 5]);
    });
  });

  context('when the delivery log is filtered', () => {
    it('has, for each filter alone, an index in the log\'s order (newest first, ties by id)', () => {
      const byFilter: Array<[object, string]> = [
        [{ endpointId: 'ep_1' }, 'deliveries_endpoint_log'],
        [{ tenantId: 'acme' }, 'deliveries_tenant_log'],
        [{ eventType: 'lead.created' }, 'deliveries_type_log'],
        [{ status: 'dead' }, 'deliveries_status_log'],
        [{}, 'deliveries_created'],
      ];
      for (const [filter, name] of byFilter) {
        const query = deliveryListFilter({ ...filter, since: 1, until: 2, after: { createdAt: 2, id: 'dlv_9' } });
        expect(servesInOrder(index('deliveries', name), equalityFields(query), DELIVERY_LIST_SORT), name).to.equal(true);
      }
    });

    it('counts each status on an index that leads with status, reading keys only', () => {
      expect(statusCountFilter('delivered')).to.deep.equal({ status: 'delivered' });
      expect(Object.keys(index('deliveries', 'deliveries_next'))[0]).to.equal('status');
    });
  });

  context('when dead letters are listed by endpoint or tenant', () => {
    it('has an index in the listing\'s order', () => {
      for (const [filter, name] of [[{ endpointId: 'ep_1' }, 'dead_letters_endpoint_log'], [{ tenantId: 'acme' }, 'dead_letters_tenant_log']] as const) {
        const query = deadLetterListFilter({ ...filter, includeReplayed: true });
        expect(servesInOrder(index('dead_letters', name), equalityFields(query), DEAD_LETTER_LIST_SORT), name).to.equal(true);
      }
    });
  });

  context('when failures are grouped', () => {
    it('counts retrying deliveries with the partial index deliveries_failing\'s own terms, filtered by endpoint and tenant', () => {
      const failing = specs.deliveries.find((i) => i.name === 'deliveries_failing');
      expect(failing?.partialFilterExpression).to.deep.equal({ status: 'pending', lastFailureKind: { $type: 'string' } });
      expect(Object.keys(index('deliveries', 'deliveries_failing'))).to.deep.equal(['endpointId', 'lastFailureKind', 'lastFailureAt']);
      expect(retryingFailuresFilter({})).to.deep.equal({ status: 'pending', lastFailureKind: { $type: 'string' } });
      expect(retryingFailuresFilter({ endpointId: 'ep_1', tenantId: 'acme', limit: 5 })).to.deep.equal({
        status: 'pending',
        lastFailureKind: { $type: 'string' },
        endpointId: 'ep_1',
        tenantId: 'acme',
      });
    });

    it('counts open dead letters that have a kind, on an index by endpoint and kind', () => {
      expect(openFailuresFilter({ tenantId: 'acme' })).to.deep.equal({
        'triage.state': { $in: ['new', 'acknowledged'] },
        failureKind: { $type: 'string' },
        tenantId: 'acme',
      });
      expect(Object.keys(index('dead_letters', 'dead_letters_failing'))).to.deep.equal(['endpointId', 'failureKind', 'createdAt']);
    });

    it('groups by endpoint and kind, with the tenant, a count and the earliest and latest times', () => {
      expect(failureCountPipeline({ status: 'pending' }, 'lastFailureKind', 'lastFailureAt')).to.deep.equal([
        { $match: { status: 'pending' } },
        {
          $group: {
            _id: { endpointId: '$endpointId', kind: '$lastFailureKind' },
            tenantId: { $max: '$tenantId' },
            count: { $sum: 1 },
            firstSeen: { $min: '$lastFailureAt' },
            lastSeen: { $max: '$lastFailureAt' },
          },
        },
      ]);
    });

    it('reads a group (its sample, its replay) by endpoint and kind: the index\'s leading keys, latest first', () => {
      const key = { endpointId: 'ep_1', kind: 'http-503' };
      expect(retryingFailuresFilter(key)).to.deep.equal({ status: 'pending', lastFailureKind: { $type: 'string', $eq: 'http-503' }, endpointId: 'ep_1' });
      expect(openFailuresFilter(key)).to.deep.equal({ 'triage.state': { $in: ['new', 'acknowledged'] }, failureKind: 'http-503', endpointId: 'ep_1' });
      expect(servesInOrder(index('dead_letters', 'dead_letters_failing'), ['endpointId', 'failureKind'], { createdAt: -1 })).to.equal(true);
      expect(resumeFailureGroupFilter(key, NOW)).to.deep.equal({
        status: 'pending',
        lastFailureKind: { $type: 'string', $eq: 'http-503' },
        endpointId: 'ep_1',
        nextAttemptAt: { $gt: NOW },
      });
    });
  });

  context('when dead letters are replayed by filter', () => {
    it('walks them oldest first in the listing\'s order reversed, so the listing\'s indexes serve it backwards', () => {
      expect(DEAD_LETTER_REPLAY_SORT).to.deep.equal({ createdAt: 1, ord: 1 });
      const cases: Array<[object, string]> = [
        [{}, 'dead_letters_created'],
        [{ endpointId: 'ep_1' }, 'dead_letters_endpoint_log'],
        [{ tenantId: 'acme' }, 'dead_letters_tenant_log'],
        [{ state: 'acknowledged' }, 'dead_letters_triage'],
      ];
      for (const [filter, name] of cases) {
        const base = deadLetterReplayFilter(filter);
        expect(base, name).to.not.equal(undefined);
        expect(servesInOrder(index('dead_letters', name), equalityFields(base!), DEAD_LETTER_REPLAY_SORT), name).to.equal(true);
      }
    });

    it('touches the endpoints of a chunk in its transaction, with a write that always changes them', () => {
      expect(replayFenceFilter(['ep_1', 'ep_2'])).to.deep.equal({ _id: { $in: ['ep_1', 'ep_2'] } });
      expect(REPLAY_FENCE_UPDATE).to.deep.equal({ $inc: { replayFence: 1 } });
    });
  });

  context('when an endpoint is deleted', () => {
    it('cancels its backlog a chunk of ids at a time, each still unfinished, dropping any claim id', () => {
      expect(cancelDeliveriesFilter('ep_1')).to.deep.equal({ endpointId: 'ep_1', status: { $in: ['pending', 'in_flight'] } });
      expect(cancelChunkFilter(['a', 'b'])).to.deep.equal({ _id: { $in: ['a', 'b'] }, status: { $in: ['pending', 'in_flight'] } });
      expect(cancelDeliveriesUpdate(NOW)).to.deep.equal({ $set: { status: 'cancelled', updatedAt: NOW }, $unset: { claimId: '' } });
    });
  });

  it('retires only indexes that a declared one serves as a prefix', () => {
    const retired: Record<string, Record<string, number>> = {
      deliveries_endpoint: { endpointId: 1, createdAt: -1 },
      dead_letters_endpoint: { endpointId: 1, createdAt: -1 },
    };
    expect(RETIRED_INDEXES.map((r) => r.name)).to.deep.equal(Object.keys(retired));
    for (const { collection, name } of RETIRED_INDEXES) {
      const list = specs[collection];
      expect(list.some((i) => i.name === name), `${name} no longer declared`).to.equal(false);
      const key = Object.entries(retired[name]!);
      expect(list.some((i) => key.every(([field, dir], n) => Object.entries(i.key as object)[n]?.[0] === field && Object.entries(i.key as object)[n]?.[1] === dir)), `${name} is served`).to.equal(true);
    }
  });
});
