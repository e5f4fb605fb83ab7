/**
 * Dead letters and replays: replay jobs (leased to one node, ended once, purged); dead letters
 * replayed by id or by filter, listed and paged, triaged (acknowledged, discarded) and counted
 * while unreviewed.
 */
import { expect } from 'chai';
import type { ManualClock } from '../../../lib/clock.ts';
import { ErrorCode } from '../../../lib/errors.ts';
import type { ReplayJobRecord } from '../../../lib/model.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SECOND, MINUTE, HOUR, DAY, LEASE_MS, OK, BUSY, attempt, rejection, type ConformanceSuite } from './fixtures.ts';

export function describeReplayJobs(suite: ConformanceSuite): void {
  describe('replay jobs', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    function job(id: string, overrides: Partial<ReplayJobRecord> = {}): ReplayJobRecord {
      return {
        id,
        filter: { endpointId: 'ep_1', until: clock.now() + 1 },
        state: 'running',
        total: 10,
        replayed: 0,
        waiting: 0,
        cursor: null,
        chunkSize: 100,
        createdAt: clock.now(),
        finishedAt: null,
        error: null,
        owner: 'node-a',
        leaseUntil: clock.now() + LEASE_MS,
        ...overrides,
      };
    }

    it('keeps a job as written and lists the newest first; a second with the same id is a conflict', async () => {
      const first = job('rpl_1');
      await store.createReplayJob(first);
      clock.advance(SECOND);
      await store.createReplayJob(job('rpl_2', { filter: { tenantId: 'acme', since: 5 }, owner: null, leaseUntil: 0 }));
      expect(await store.getReplayJob('rpl_1')).to.deep.equal(first);
      expect(await store.getReplayJob('rpl_missing')).to.equal(undefined);
      expect((await store.listReplayJobs(10)).map((j) => j.id)).to.deep.equal(['rpl_2', 'rpl_1']);
      expect((await store.listReplayJobs(1)).map((j) => j.id)).to.deep.equal(['rpl_2']);
      expect((await store.getReplayJob('rpl_2'))?.filter).to.deep.equal({ tenantId: 'acme', since: 5 });
      expect((await rejection(store.createReplayJob(first))).code).to.equal(ErrorCode.CONFLICT);
    });

    it('leases running jobs to one node at a time: its own renewed, free or lapsed ones taken, finished ones never', async () => {
      await store.createReplayJob(job('rpl_a', { owner: 'node-a' }));
      await store.createReplayJob(job('rpl_free', { owner: null, leaseUntil: 0 }));
      await store.createReplayJob(job('rpl_done', { owner: null, leaseUntil: 0, state: 'done', finishedAt: clock.now() }));
      const now = clock.now();
      expect((await store.leaseReplayJobs('node-b', now, now + LEASE_MS)).map((j) => j.id), 'b takes the free one only').to.deep.equal(['rpl_free']);
      const renewed = await store.leaseReplayJobs('node-a', now, now + 2 * LEASE_MS);
      expect(renewed.map((j) => [j.id, j.owner, j.leaseUntil])).to.deep.equal([['rpl_a', 'node-a', now + 2 * LEASE_MS]]);
      // node-a stops renewing (it crashed): once its lease ends, node-b takes its job.
      clock.advance(2 * LEASE_MS);
      const later = clock.now();
      expect((await store.leaseReplayJobs('node-b', later, later + LEASE_MS)).map((j) => j.id)).to.deep.equal(['rpl_a', 'rpl_free']);
      expect(await store.leaseReplayJobs('node-a', later, later + LEASE_MS)).to.deep.equal([]);
      expect(await store.saveReplayJobProgress('rpl_a', 'node-a', { cursor: 'dl_9', replayed: 9, waiting: 1 }), 'a lost it').to.equal(false);
      expect(await store.saveReplayJobProgress('rpl_a', 'node-b', { cursor: 'dl_3', replayed: 3, waiting: 2 })).to.equal(true);
      expect(await store.getReplayJob('rpl_a')).to.include({ cursor: 'dl_3', replayed: 3, waiting: 2, owner: 'node-b' });

      // A node closing gives its jobs back: any node takes them at once.
      await store.releaseReplayJobs('node-b');
      expect(await store.getReplayJob('rpl_a')).to.include({ owner: null, leaseUntil: 0, state: 'running' });
      expect((await store.leaseReplayJobs('node-a', later, later + LEASE_MS)).map((j) => j.id)).to.deep.equal(['rpl_a', 'rpl_free']);
    });

    it('ends a running job once: by its owner, or cancelled by any node; a finished job takes no more writes', async () => {
      await store.createReplayJob(job('rpl_1'));
      await store.createReplayJob(job('rpl_2'));
      const at = clock.now();
      expect(await store.endReplayJob('rpl_1', 'node-b', { state: 'done', finishedAt: at, error: null }), 'not its owner').to.equal(undefined);
      expect(await store.endReplayJob('rpl_1', null, { state: 'cancelled', finishedAt: at, error: null })).to.include({
        id: 'rpl_1',
        state: 'cancelled',
        finishedAt: at,
        owner: null,
      });
      expect(await store.endReplayJob('rpl_1', 'node-a', { state: 'done', finishedAt: at, error: null }), 'ended already').to.equal(undefined);
      expect(await store.saveReplayJobProgress('rpl_1', 'node-a', { cursor: 'dl_1', replayed: 1, waiting: 0 })).to.equal(false);
      expect(await store.leaseReplayJobs('node-a', at, at + LEASE_MS)).to.have.length(1);
      expect(await store.endReplayJob('rpl_2', 'node-a', { state: 'failed', finishedAt: at, error: 'store down' })).to.include({
        state: 'failed',
        error: 'store down',
      });
      expect((await store.getReplayJob('rpl_1'))?.state).to.equal('cancelled');
    });

    it('purge deletes the jobs that ended before the horizon, never a running one', async () => {
      await store.createReplayJob(job('rpl_old_done'));
      await store.createReplayJob(job('rpl_old_failed'));
      await store.createReplayJob(job('rpl_old_running'));
      await store.endReplayJob('rpl_old_done', 'node-a', { state: 'done', finishedAt: clock.now(), error: null });
      await store.endReplayJob('rpl_old_failed', 'node-a', { state: 'failed', finishedAt: clock.now(), error: 'store down' });
      clock.advance(20 * DAY);
      await store.createReplayJob(job('rpl_recent'));
      await store.endReplayJob('rpl_recent', null, { state: 'cancelled', finishedAt: clock.now(), error: null });
      clock.advance(20 * DAY);

      expect((await store.purge(clock.now() - 30 * DAY)).replayJobs).to.equal(2);
      expect((await store.listReplayJobs(10)).map((j) => j.id).sort()).to.deep.equal(['rpl_old_running', 'rpl_recent']);
    });
  });
}

export function describeDeadLettersAndReplay(suite: ConformanceSuite): void {
  const { addEndpoint, seed, lease, claim } = suite;
  describe('dead letters and replay', () => {
    let store: Store;
    let clock: ManualClock;
    beforeEach(() => {
      store = suite.store;
      clock = suite.clock;
    });

    /** A dead delivery to `endpointId` at the current time; returns its ids. */
    async function deadDelivery(endpointId: string, deadLetterId: string, tenantId = 'acme') {
      const { deliveryIds: [deliveryId], event } = await seed([endpointId], { tenantId });
      await lease();
      const [job] = await claim({ endpointId });
      if (job === undefined || job.delivery.id !== deliveryId) throw new Error('not claimed');
      await store.settle(
        [{ kind: 'dead', deliveryId, epoch: job.delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), deadLetterId, reason: 'exhausted' }],
        clock.now(),
      );
      return { deliveryId, event, deadLetterId };
    }

    context('when a dead letter is replayed by id', () => {
      it('puts its delivery back to pending, due now, in a new round, with the same event id', async () => {
        await addEndpoint('ep_1');
        const dead = await deadDelivery('ep_1', 'dl_1');
        clock.advance(HOUR);
        expect(await store.replayDeadLetters({ ids: ['dl_1'] }, clock.now())).to.deep.equal(['dl_1']);
        expect(await store.getDelivery(dead.deliveryId)).to.include({
          status: 'pending',
          attempts: 0,
          nextAttemptAt: clock.now(),
          lastError: null,
          eventId: dead.event.id,
        });
        expect((await store.getDeadLetter('dl_1'))?.replayedAt).to.equal(clock.now());

        await lease();
        const [job] = await claim();
        expect(job?.event.id).to.equal(dead.event.id);
        await store.settle(
          [{ kind: 'retry', deliveryId: dead.deliveryId, epoch: job!.delivery.leaseEpoch, attempt: attempt(clock.now(), BUSY, 'HTTP 503'), nextAttemptAt: clock.now() + MINUTE }],
          clock.now(),
        );
        const attempts = await store.listAttempts(dead.deliveryId);
        expect(attempts.map((a) => [a.round, a.number])).to.deep.equal([[0, 1], [1, 1]]);
      });

      it('replays nothing the second time', async () => {
        await addEndpoint('ep_1');
        await deadDelivery('ep_1', 'dl_1');
        expect(await store.replayDeadLetters({ ids: ['dl_1'] }, clock.now())).to.deep.equal(['dl_1']);
        expect(await store.replayDeadLetters({ ids: ['dl_1', 'dl_missing'] }, clock.now())).to.deep.equal([]);
      });
    });

    context('when dead letters are replayed by filter', () => {
      it('replays every unreplayed match of endpoint, tenant and time range', async () => {
        await addEndpoint('ep_1', 'acme');
        await addEndpoint('ep_2', 'acme');
        await addEndpoint('ep_3', 'globex');
        const t0 = clock.now();
        await deadDelivery('ep_1', 'dl_1');
        clock.advance(HOUR);
        await deadDelivery('ep_2', 'dl_2');
        clock.advance(HOUR);
        await deadDelivery('ep_3', 'dl_3', 'globex');
        clock.advance(HOUR);
        await deadDelivery('ep_1', 'dl_4');

        const now = clock.now();
        expect(await store.replayDeadLetters({ endpointId: 'ep_1', until: t0 + HOUR }, now)).to.deep.equal(['dl_1']);
        expect((await store.replayDeadLetters({ tenantId: 'acme' }, now)).sort()).to.deep.equal(['dl_2', 'dl_4']);
        expect(await store.replayDeadLetters({ since: t0 + 2 * HOUR, until: t0 + 3 * HOUR }, now)).to.deep.equal(['dl_3']);
        expect(await store.replayDeadLetters({}, now)).to.deep.equal([]);
        expect((await store.countDeliveries()).pending).to.equal(4);
      });

      it('counts what a replay by the same filter would replay, changing nothing', async () => {
        await addEndpoint('ep_1', 'acme');
        await addEndpoint('ep_2', 'acme');
        await addEndpoint('ep_gone', 'acme');
        const t0 = clock.now();
        await deadDelivery('ep_1', 'dl_1');
        clock.advance(HOUR);
        await deadDelivery('ep_1', 'dl_2');
        const thrown = await deadDelivery('ep_1', 'dl_discarded');
        await deadDelivery('ep_2', 'dl_3');
        await deadDelivery('ep_gone', 'dl_orphan');
        await store.triageDeadLetters({ ids: ['dl_discarded'], state: 'discarded', note: 'test event', by: 'bob' }, clock.now());
        expect(await store.deleteEndpoint('ep_gone', clock.now())).to.equal(true);

        expect(await store.countReplayableDeadLetters({ tenantId: 'acme' })).to.equal(3);
        expect(await store.countReplayableDeadLetters({ endpointId: 'ep_1' })).to.equal(2);
        expect(await store.countReplayableDeadLetters({ endpointId: 'ep_1', since: t0 + HOUR })).to.equal(1);
        expect(await store.countReplayableDeadLetters({ endpointId: 'ep_1', state: 'discarded' })).to.equal(0);
        expect(await store.countReplayableDeadLetters({ endpointId: 'ep_gone' })).to.equal(0);
        expect((await store.countDeliveries()).pending).to.equal(0);
        expect((await store.getDelivery(thrown.deliveryId))?.status).to.equal('dead');

        expect((await store.replayDeadLetters({ tenantId: 'acme' }, clock.now())).length).to.equal(3);
        expect(await store.countReplayableDeadLetters({ tenantId: 'acme' })).to.equal(0);
      });

      it('pages the open matches oldest first after a dead-letter cursor, with their deliveries', async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        const deliveries = new Map<string, string>();
        for (let i = 0; i < 5; i++) deliveries.set(`dl_${i}`, (await deadDelivery('ep_1', `dl_${i}`)).deliveryId);
        clock.advance(MINUTE);
        await deadDelivery('ep_2', 'dl_other');
        await store.triageDeadLetters({ ids: ['dl_1'], state: 'discarded', note: 'test event', by: 'bob' }, clock.now());

        const first = await store.replayableDeadLetterPage({ endpointId: 'ep_1' }, null, 2);
        expect(first).to.deep.equal([
          { id: 'dl_0', deliveryId: deliveries.get('dl_0'), endpointId: 'ep_1' },
          { id: 'dl_2', deliveryId: deliveries.get('dl_2'), endpointId: 'ep_1' },
        ]);
        await store.replayDeadLetters({ ids: ['dl_0', 'dl_2'] }, clock.now());
        expect((await store.replayableDeadLetterPage({ endpointId: 'ep_1' }, 'dl_2', 10)).map((d) => d.id)).to.deep.equal(['dl_3', 'dl_4']);
        expect((await store.replayableDeadLetterPage({ endpointId: 'ep_1' }, 'dl_4', 10))).to.deep.equal([]);
        expect((await store.replayableDeadLetterPage({ tenantId: 'acme' }, null, 10)).map((d) => d.id)).to.deep.equal(['dl_3', 'dl_4', 'dl_other']);
        expect((await store.replayableDeadLetterPage({ tenantId: 'acme' }, null, 10, ['ep_1'])).map((d) => d.id), 'ep_1 skipped').to.deep.equal([
          'dl_other',
        ]);
        expect(await store.replayableDeadLetterPage({ tenantId: 'acme' }, null, 10, ['ep_1', 'ep_2'])).to.deep.equal([]);
      });

      it("counts each endpoint's replayed deliveries still pending or in flight, in one read", async () => {
        await addEndpoint('ep_1');
        await addEndpoint('ep_2');
        for (let i = 0; i < 3; i++) await deadDelivery('ep_1', `dl_a${i}`);
        await deadDelivery('ep_2', 'dl_b0');
        expect(await store.countLiveReplays(['ep_1', 'ep_2']), 'dead, not replayed: none live').to.deep.equal({});
        await store.replayDeadLetters({ ids: ['dl_a0', 'dl_a1', 'dl_b0'] }, clock.now());
        expect(await store.countLiveReplays(['ep_1', 'ep_2'])).to.deep.equal({ 'ep_1': 2, 'ep_2': 1 });
        expect(await store.countLiveReplays(['ep_2'])).to.deep.equal({ 'ep_2': 1 });
        expect(await store.countLiveReplays([])).to.deep.equal({});
        // Claimed (in flight) still counts; delivered no longer does.
        const replayed = (await claim()).filter((job) => job.delivery.round > 0);
        expect(replayed.map((job) => job.delivery.endpointId).sort()).to.deep.equal(['ep_1', 'ep_1', 'ep_2']);
        expect(await store.countLiveReplays(['ep_1', 'ep_2'])).to.deep.equal({ 'ep_1': 2, 'ep_2': 1 });
        const [first] = replayed.filter((job) => job.delivery.endpointId === 'ep_1');
        await store.settle([{ kind: 'delivered', deliveryId: first!.delivery.id, epoch: first!.delivery.leaseEpoch, attempt: attempt(clock.now(), OK, null) }], clock.now());
        expect(await store.countLiveReplays(['ep_1', 'ep_2'])).to.deep.equal({ 'ep_1': 1, 'ep_2': 1 });
      });

      it('replays all matches, ignoring limit', async () => {
        await addEndpoint('ep_1');
        for (let i = 0; i < 3; i++) await deadDelivery('ep_1', `dl_${i}`);
        expect((await store.replayDeadLetters({ endpointId: 'ep_1', limit: 1 }, clock.now())).sort()).to.deep.equal([
          'dl_0',
          'dl_1',
          'dl_2',
        ]);
      });
    });

    context('when listing dead letters', () => {
      it('lists newest first, filtered, hiding replayed ones unless asked', async () => {
        await addEndpoint('ep_1', 'acme');
        await addEndpoint('ep_2', 'globex');
        const t0 = clock.now();
        await deadDelivery('ep_1', 'dl_1');
        clock.advance(MINUTE);
        await deadDelivery('ep_2', 'dl_2', 'globex');
        clock.advance(MINUTE);
        await deadDelivery('ep_1', 'dl_3');
        await store.replayDeadLetters({ ids: ['dl_3'] }, clock.now());

        const ids = async (filter: Parameters<Store['listDeadLetters']>[0]) =>
          (await store.listDeadLetters(filter)).map((d) => d.id);
        expect(await ids({})).to.deep.equal(['dl_2', 'dl_1']);
        expect(await ids({ includeReplayed: true })).to.deep.equal(['dl_3', 'dl_2', 'dl_1']);
        expect(await ids({ endpointId: 'ep_1', includeReplayed: true })).to.deep.equal(['dl_3', 'dl_1']);
        expect(await ids({ tenantId: 'globex' })).to.deep.equal(['dl_2']);
        expect(await ids({ since: t0 + MINUTE })).to.deep.equal(['dl_2']);
        expect(await ids({ until: t0 + MINUTE })).to.deep.equal(['dl_1']);
        expect(await ids({ includeReplayed: true, limit: 2 })).to.deep.equal(['dl_3', 'dl_2']);
        const [listed] = await store.listDeadLetters({ tenantId: 'globex' });
        expect(listed).to.deep.equal(await store.getDeadLetter('dl_2'));
        expect(listed?.attempts).to.have.length(1);
      });
    });

    context('when listing dead letters page by page (after the last of a page)', () => {
      it('walks the listing in its order, ties the later inserted first, each dead letter once', async () => {
        await addEndpoint('ep_1');
        const t0 = clock.now();
        // Inserted e then c in one millisecond, a then d in the next: ids in neither order.
        await deadDelivery('ep_1', 'dl_e');
        await deadDelivery('ep_1', 'dl_c');
        clock.advance(MINUTE);
        await deadDelivery('ep_1', 'dl_a');
        await deadDelivery('ep_1', 'dl_d');
        clock.advance(MINUTE);
        await deadDelivery('ep_1', 'dl_b');

        const walked: string[][] = [];
        let after: { createdAt: number; id: string } | undefined;
        for (let page = 0; page < 5; page++) {
          const rows = await store.listDeadLetters({ endpointId: 'ep_1', limit: 2, ...(after === undefined ? {} : { after }) });
          if (rows.length === 0) break;
          walked.push(rows.map((d) => d.id));
          const last = rows.at(-1)!;
          after = { createdAt: last.createdAt, id: last.id };
        }
        expect(walked).to.deep.equal([['dl_b', 'dl_d'], ['dl_a', 'dl_c'], ['dl_e']]);
        const ids = async (filter: Parameters<Store['listDeadLetters']>[0]) => (await store.listDeadLetters(filter)).map((d) => d.id);
        expect(await ids({ after: { createdAt: t0 + MINUTE, id: 'dl_d' } })).to.deep.equal(['dl_a', 'dl_c', 'dl_e']);
        expect(await ids({ after: { createdAt: t0 + MINUTE, id: 'dl_gone' } }), 'after one purged: the older ones').to.deep.equal(['dl_c', 'dl_e']);
        expect(await ids({ tenantId: 'globex', after: { createdAt: t0 + 2 * MINUTE, id: 'dl_b' } })).to.deep.equal([]);
      });
    });

    context('when operators triage dead letters', () => {
      const ack = (ids: string[], note = 'consumer fixed, replay tomorrow', by = 'alice') =>
        store.triageDeadLetters({ ids, state: 'acknowledged', note, by }, clock.now());
      const discard = (ids: string[], note = 'test event, never to be delivered', by = 'bob') =>
        store.triageDeadLetters({ ids, state: 'discarded', note, by }, clock.now());
      const triageOf = async (id: string) => (await store.getDeadLetter(id))?.triage;

      it('acknowledges and discards open ones with the note, who and when; a second acknowledgement replaces the note', async () => {
        await addEndpoint('ep_1');
        const born = clock.now();
        await deadDelivery('ep_1', 'dl_1');
        await deadDelivery('ep_1', 'dl_2');
        clock.advance(HOUR);
        expect(await ack(['dl_1', 'dl_1'])).to.deep.equal({ applied: ['dl_1'], skipped: [] });
        expect(await triageOf('dl_1')).to.deep.equal({ state: 'acknowledged', note: 'consumer fixed, replay tomorrow', by: 'alice', at: born + HOUR });
        expect(await triageOf('dl_2')).to.deep.equal({ state: 'new', note: null, by: null, at: born });

        clock.advance(MINUTE);
        expect(await ack(['dl_1'], 'still waiting for the consumer', 'carol')).to.deep.equal({ applied: ['dl_1'], skipped: [] });
        expect(await triageOf('dl_1')).to.deep.equal({ state: 'acknowledged', note: 'still waiting for the consumer', by: 'carol', at: clock.now() });
        expect(await discard(['dl_2', 'dl_1'])).to.deep.equal({ applied: ['dl_2', 'dl_1'], skipped: [] });
        expect(await triageOf('dl_1')).to.deep.equal({ state: 'discarded', note: 'test event, never to be delivered', by: 'bob', at: clock.now() });
        expect((await store.getDeadLetter('dl_1'))?.replayedAt).to.equal(null);
      });

      it('skips unknown and closed ones (replayed, discarded), naming why, and changes nothing of them', async () => {
        await addEndpoint('ep_1');
        await deadDelivery('ep_1', 'dl_open');
        await deadDelivery('ep_1', 'dl_replayed');
        await deadDelivery('ep_1', 'dl_discarded');
        await store.replayDeadLetters({ ids: ['dl_replayed'] }, clock.now());
        await discard(['dl_discarded']);
        const before = await triageOf('dl_replayed');
        clock.advance(MINUTE);

        expect(await ack(['dl_missing', 'dl_replayed', 'dl_open', 'dl_discarded'])).to.deep.equal({
          applied: ['dl_open'],
          skipped: [
            { id: 'dl_missing', reason: 'unknown' },
            { id: 'dl_replayed', reason: 'replayed' },
            { id: 'dl_discarded', reason: 'discarded' },
          ],
        });
        expect(await discard(['dl_replayed'])).to.deep.equal({ applied: [], skipped: [{ id: 'dl_replayed', reason: 'replayed' }] });
        expect(await triageOf('dl_replayed')).to.deep.equal(before);
        expect((await triageOf('dl_discarded'))?.state).to.equal('discarded');
      });

      it('replays an acknowledged one by id or by filter, keeping its note and who, marked replayed at the replay', async () => {
        await addEndpoint('ep_1');
        const dead = await deadDelivery('ep_1', 'dl_1');
        await deadDelivery('ep_1', 'dl_2');
        await ack(['dl_1', 'dl_2']);
        clock.advance(HOUR);
        expect(await store.replayDeadLetters({ ids: ['dl_1'] }, clock.now())).to.deep.equal(['dl_1']);
        expect(await store.getDeadLetter('dl_1')).to.deep.include({
          replayedAt: clock.now(),
          triage: { state: 'replayed', note: 'consumer fixed, replay tomorrow', by: 'alice', at: clock.now() },
        });
        expect((await store.getDelivery(dead.deliveryId))?.status).to.equal('pending');
        expect(await store.replayDeadLetters({ endpointId: 'ep_1' }, clock.now())).to.deep.equal(['dl_2']);
        expect((await triageOf('dl_2'))?.state).to.equal('replayed');
      });

      it('keeps a discarded one out of every replay by filter; a replay naming it by id replays it', async () => {
        await addEndpoint('ep_1');
        await deadDelivery('ep_1', 'dl_1');
        const kept = await deadDelivery('ep_1', 'dl_2');
        await discard(['dl_2']);
        expect(await store.replayDeadLetters({ endpointId: 'ep_1' }, clock.now())).to.deep.equal(['dl_1']);
        expect(await store.replayDeadLetters({ tenantId: 'acme', state: 'discarded' }, clock.now())).to.deep.equal([]);
        expect((await store.getDelivery(kept.deliveryId))?.status).to.equal('dead');

        clock.advance(MINUTE);
        expect(await store.replayDeadLetters({ ids: ['dl_2'] }, clock.now())).to.deep.equal(['dl_2']);
        expect(await triageOf('dl_2')).to.deep.equal({ state: 'replayed', note: 'test event, never to be delivered', by: 'bob', at: clock.now() });
        expect((await store.getDelivery(kept.deliveryId))?.status).to.equal('pending');
      });

      it('replays by filter only the state asked for, among the open ones', async () => {
        await addEndpoint('ep_1');
        await deadDelivery('ep_1', 'dl_new');
        await deadDelivery('ep_1', 'dl_ack');
        await ack(['dl_ack']);
        expect(await store.replayDeadLetters({ endpointId: 'ep_1', state: 'acknowledged' }, clock.now())).to.deep.equal(['dl_ack']);
        expect((await triageOf('dl_new'))?.state).to.equal('new');
      });

      it('lists by triage state; by default the open ones (new, acknowledged); with includeReplayed every one', async () => {
        await addEndpoint('ep_1');
        for (const id of ['dl_new', 'dl_ack', 'dl_replayed', 'dl_discarded']) {
          await deadDelivery('ep_1', id);
          clock.advance(SECOND);
        }
        await ack(['dl_ack']);
        await discard(['dl_discarded']);
        await store.replayDeadLetters({ ids: ['dl_replayed'] }, clock.now());
        const ids = async (filter: Parameters<Store['listDeadLetters']>[0]) => (await store.listDeadLetters(filter)).map((d) => d.id);
        expect(await ids({})).to.deep.equal(['dl_ack', 'dl_new']);
        expect(await ids({ includeReplayed: true })).to.deep.equal(['dl_discarded', 'dl_replayed', 'dl_ack', 'dl_new']);
        expect(await ids({ state: 'new' })).to.deep.equal(['dl_new']);
        expect(await ids({ state: 'acknowledged' })).to.deep.equal(['dl_ack']);
        expect(await ids({ state: 'replayed', includeReplayed: false })).to.deep.equal(['dl_replayed']);
        expect(await ids({ state: 'discarded', endpointId: 'ep_1' })).to.deep.equal(['dl_discarded']);
        expect(await ids({ state: 'discarded', endpointId: 'ep_2' })).to.deep.equal([]);
        const [acknowledged] = await store.listDeadLetters({ state: 'acknowledged' });
        expect(acknowledged).to.deep.equal(await store.getDeadLetter('dl_ack'));
      });
    });

    context('when asking for the unreviewed dead letters', () => {
      it('counts those in state new, up to the cap, with the oldest one\'s time; none gives 0 and null', async () => {
        await addEndpoint('ep_1');
        expect(await store.unreviewedDeadLetters(100)).to.deep.equal({ count: 0, oldestAt: null });
        const t0 = clock.now();
        await deadDelivery('ep_1', 'dl_1');
        clock.advance(HOUR);
        await deadDelivery('ep_1', 'dl_2');
        clock.advance(HOUR);
        await deadDelivery('ep_1', 'dl_3');
        expect(await store.unreviewedDeadLetters(100)).to.deep.equal({ count: 3, oldestAt: t0 });
        expect(await store.unreviewedDeadLetters(2)).to.deep.equal({ count: 2, oldestAt: t0 });

        await store.triageDeadLetters({ ids: ['dl_1'], state: 'acknowledged', note: 'looking', by: 'alice' }, clock.now());
        expect(await store.unreviewedDeadLetters(100)).to.deep.equal({ count: 2, oldestAt: t0 + HOUR });
        await store.replayDeadLetters({ ids: ['dl_2'] }, clock.now());
        await store.triageDeadLetters({ ids: ['dl_3'], state: 'discarded', note: 'noise', by: 'bob' }, clock.now());
        expect(await store.unreviewedDeadLetters(100)).to.deep.equal({ count: 0, oldestAt: null });
      });
    });
  });
}
