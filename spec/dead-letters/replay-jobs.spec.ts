import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { PACE_FACTOR, ReplayJobs, ReplayJobState, type ReplayJobStore } from '../../lib/dead-letters/replay-jobs.ts';
import { HeraldError } from '../../lib/errors.ts';
import { deliveryIdFor, slotOf } from '../../lib/ids.ts';
import type { OutboxEvent } from '../../lib/model.ts';
import type { Store } from '../../lib/store/port.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { makeEndpoint } from '../store/conformance/index.ts';

const SLOTS = 4;
const POLL_MS = 1_000;
const LEASE_MS = 10_000;
const OK = { kind: 'response', status: 200, location: null, retryAfter: null, body: 'ok' } as const;

/** A SQLite store holding dead letters, and the endpoints that drain their replays. */
class Backlog {
  readonly clock = new ManualClock();
  readonly dir = mkdtempSync(join(tmpdir(), 'herald-replay-jobs-'));
  readonly store = new SqliteStore({ path: join(this.dir, 'herald.db'), clock: this.clock });
  #events = 0;

  async open(endpoints: Readonly<Record<string, number>>): Promise<void> {
    await this.store.init({ slotCount: SLOTS });
    for (const [id, concurrency] of Object.entries(endpoints)) await this.store.createEndpoint(makeEndpoint(id, 'acme', this.clock.now(), { concurrency, eventTypes: ['*'] }));
    await this.store.acquireLeases({ owner: 'engine', slots: [0, 1, 2, 3], now: this.clock.now(), leaseMs: 1_000 * LEASE_MS });
  }

  /** `count` dead letters, round-robin over `endpointIds`, oldest first in that order. */
  async kill(endpointIds: readonly string[], count: number): Promise<void> {
    const events: OutboxEvent[] = [];
    for (let i = 0; i < count; i++) {
      const id = `evt_${String(++this.#events).padStart(6, '0')}`;
      events.push({ id, tenantId: 'acme', type: 'a.b', payload: '{}', createdAt: this.clock.now(), endpointId: endpointIds[i % endpointIds.length]!, orderingKey: null });
    }
    await this.store.appendEvents(events);
    await this.store.recordFanOuts(
      events.map((event) => ({
        eventId: event.id,
        deliveries: [
          {
            id: deliveryIdFor(event.id, event.endpointId!, event.createdAt),
            eventId: event.id,
            endpointId: event.endpointId!,
            tenantId: 'acme',
            eventType: 'a.b',
            slot: slotOf(event.endpointId!, SLOTS),
            orderingKey: null,
            nextAttemptAt: this.clock.now(),
            createdAt: this.clock.now(),
          },
        ],
      })),
      this.clock.now(),
    );
    const claimed = await this.store.claimDue({ owner: 'engine', now: this.clock.now(), limit: count, perEndpointLimit: count, skipEndpointIds: [] });
    const attempt = { number: 1, startedAt: this.clock.now(), durationMs: 1, outcome: OK, error: 'HTTP 500' };
    await this.store.settle(
      claimed.map((job, i) => ({
        kind: 'dead' as const,
        deliveryId: job.delivery.id,
        epoch: job.delivery.leaseEpoch,
        attempt,
        deadLetterId: `dl_${job.delivery.eventId.slice(4)}_${i}`,
        reason: 'exhausted',
      })),
      this.clock.now(),
    );
    this.clock.advance(1);
  }

  /** The endpoint delivers up to `n` of its live replays. */
  async deliver(endpointId: string, n: number): Promise<number> {
    const jobs = await this.store.claimForEndpoints({ owner: 'engine', now: this.clock.now(), endpoints: [{ endpointId, limit: n }] });
    const attempt = { number: 1, startedAt: this.clock.now(), durationMs: 1, outcome: OK, error: null };
    await this.store.settle(jobs.map((job) => ({ kind: 'delivered' as const, deliveryId: job.delivery.id, epoch: job.delivery.leaseEpoch, attempt })), this.clock.now());
    return jobs.length;
  }

  async live(endpointId: string): Promise<number> {
    return (await this.store.countLiveReplays([endpointId]))[endpointId] ?? 0;
  }

  /** Each delivery's round: 1 for a delivery replayed exactly once. */
  async rounds(): Promise<number[]> {
    return (await this.store.listDeliveries({ limit: 1000 })).map((delivery) => delivery.round);
  }

  async close(): Promise<void> {
    await this.store.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A node's jobs on `store`, with the actor limits it knows. */
function node(backlog: Backlog, owner: string, store: ReplayJobStore = backlog.store, limits: Readonly<Record<string, number>> = {}, lookGapMs = 0) {
  const errors: unknown[] = [];
  let signals = 0;
  const jobs = new ReplayJobs(
    {
      clock: backlog.clock,
      store,
      owner,
      concurrencyLimit: (endpointId) => limits[endpointId],
      signal: () => void signals++,
      onError: (_jobId, error) => void errors.push(error),
    },
    { pollMs: POLL_MS, leaseMs: LEASE_MS, lookGapMs },
  );
  return { jobs, errors, signals: () => signals };
}

async function tick(backlog: Backlog, jobs: ReplayJobs, ms = POLL_MS): Promise<void> {
  backlog.clock.advance(ms);
  await jobs.settled();
}

describe('ReplayJobs', () => {
  let backlog: Backlog;
  const nodes: ReplayJobs[] = [];

  beforeEach(() => {
    backlog = new Backlog();
  });
  afterEach(async () => {
    for (const jobs of nodes.splice(0)) await jobs.close();
    await backlog.close();
  });

  function started(owner: string, store?: ReplayJobStore, limits?: Readonly<Record<string, number>>) {
    const made = node(backlog, owner, store, limits);
    nodes.push(made.jobs);
    made.jobs.start();
    return made;
  }

  context('when a job runs over one endpoint', () => {
    it(`keeps its live replays under ${PACE_FACTOR} × the replays' share of the concurrency limit, releases more as they settle (no poll needed), and ends done with each dead letter replayed once`, async () => {
      await backlog.open({ ep_1: 10 });
      await backlog.kill(['ep_1'], 300);
      const { jobs, signals } = started('node-a', undefined, { ep_1: 4 });
      await jobs.settled();

      const job = await jobs.create({ endpointId: 'ep_1' }, { chunkSize: 50 });
      expect(job).to.include({ state: ReplayJobState.RUNNING, total: 300, replayed: 6, waiting: 6, chunkSize: 50 });
      expect(await backlog.live('ep_1'), '2 × 3, the replays\' share of the actor limit (4), not of the endpoint concurrency (10)').to.equal(6);

      // The endpoint takes 4: the next look (on the settle, no clock advance) releases 4 more.
      expect(await backlog.deliver('ep_1', 4)).to.equal(4);
      jobs.nudge();
      await jobs.settled();
      expect((await jobs.get(job.id)).replayed).to.equal(10);
      expect(await backlog.live('ep_1')).to.equal(6);

      let maxLive = 0;
      for (let round = 0; round < 200 && (await jobs.get(job.id)).state === ReplayJobState.RUNNING; round++) {
        await backlog.deliver('ep_1', 5);
        jobs.nudge();
        await jobs.settled();
        maxLive = Math.max(maxLive, await backlog.live('ep_1'));
      }
      expect(maxLive).to.equal(6);
      expect(await jobs.get(job.id)).to.include({ state: ReplayJobState.DONE, total: 300, replayed: 300, finishedAt: backlog.clock.now() });
      expect(await backlog.rounds()).to.have.length(300).and.satisfy((rounds: number[]) => rounds.every((round) => round === 1));
      expect(signals()).to.be.greaterThan(50);
    });
  });

  context('when the endpoint takes every replay as soon as it is released', () => {
    it('answers create() after the first look, its progress saved, and goes on in further rounds to the end', async () => {
      await backlog.open({ ep_1: 6 });
      await backlog.kill(['ep_1'], 300);
      // An endpoint with no latency: each release is delivered before the next step, so every step
      // finds room again. One look is 10 steps of at most 10 (2 × 5, the replays' share of the limit 6), then it saves.
      const instant: ReplayJobStore = new Proxy(backlog.store as Store, {
        get(target, name, receiver) {
          const value = Reflect.get(target, name, receiver) as unknown;
          if (typeof value !== 'function') return value;
          if (name !== 'replayDeadLetters') return (...args: unknown[]) => (value as (...a: unknown[]) => unknown).apply(target, args);
          return async (...args: unknown[]) => {
            const replayed = await (value as (...a: unknown[]) => Promise<unknown[]>).apply(target, args);
            await backlog.deliver('ep_1', 1_000);
            return replayed;
          };
        },
      });
      const { jobs } = started('node-a', instant, { ep_1: 6 });
      await jobs.settled();

      const job = await jobs.create({ endpointId: 'ep_1' }, { chunkSize: 50 });
      expect(job, 'the first look only: 10 steps of 10').to.include({ state: ReplayJobState.RUNNING, replayed: 100 });
      expect(await backlog.store.getReplayJob(job.id), 'saved before create() answers').to.include({ replayed: 100 });
      await jobs.settled();
      expect(await jobs.get(job.id)).to.include({ state: ReplayJobState.DONE, replayed: 300 });
      expect((await backlog.rounds()).every((round) => round === 1)).to.equal(true);
    });
  });

  context('when every endpoint of the job is full', () => {
    it('reads past them once; while they stay full, later looks do not walk the backlog again', async () => {
      await backlog.open({ ep_1: 1, ep_2: 1 });
      await backlog.kill(['ep_1', 'ep_2'], 40);
      let readsPast = 0;
      const counting: ReplayJobStore = new Proxy(backlog.store as Store, {
        get(target, name, receiver) {
          const value = Reflect.get(target, name, receiver) as unknown;
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            if (name === 'replayableDeadLetterPage' && ((args[3] as string[] | undefined)?.length ?? 0) > 0) readsPast++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
      const { jobs } = started('node-a', counting);
      const job = await jobs.create({ tenantId: 'acme' }, { chunkSize: 10 });
      expect(job.replayed, '2 × 1 for each endpoint').to.equal(4);
      expect(readsPast, 'the first look read past both: nothing').to.equal(1);

      await tick(backlog, jobs);
      expect(readsPast, 'a poll with both still full: no read past them').to.equal(1);
      await backlog.deliver('ep_1', 2);
      jobs.nudge();
      await jobs.settled();
      expect((await jobs.get(job.id)).replayed, 'ep_1 refilled from the head').to.equal(6);
      expect(readsPast, 'full again, both: still no read past them').to.equal(1);

      for (let round = 0; round < 40 && (await jobs.get(job.id)).state === ReplayJobState.RUNNING; round++) {
        await backlog.deliver('ep_1', 2);
        await backlog.deliver('ep_2', 2);
        await tick(backlog, jobs);
      }
      expect(await jobs.get(job.id)).to.include({ state: ReplayJobState.DONE, replayed: 40 });
      expect((await backlog.rounds()).every((round) => round === 1)).to.equal(true);
    });
  });

  context('when settles come faster than the settle gap', () => {
    it('gathers them into one look once 25 ms have passed since the last', async () => {
      await backlog.open({ ep_1: 3 });
      await backlog.kill(['ep_1'], 20);
      const made = node(backlog, 'node-a', backlog.store, {}, 25);
      nodes.push(made.jobs);
      made.jobs.start();
      const job = await made.jobs.create({ endpointId: 'ep_1' }, { chunkSize: 10 });
      expect(job.replayed).to.equal(4);
      for (let i = 0; i < 3; i++) {
        await backlog.deliver('ep_1', 1);
        made.jobs.nudge();
        await made.jobs.settled();
      }
      expect((await made.jobs.get(job.id)).replayed, 'within the gap: no look yet').to.equal(4);
      backlog.clock.advance(24);
      await made.jobs.settled();
      expect((await made.jobs.get(job.id)).replayed).to.equal(4);
      backlog.clock.advance(1);
      await made.jobs.settled();
      expect((await made.jobs.get(job.id)).replayed, 'one look for the three settles').to.equal(7);
    });
  });

  context('when a job spans a slow endpoint and a fast one', () => {
    it('paces each under its own limit: the slow one holds back only its own dead letters', async () => {
      await backlog.open({ ep_slow: 1, ep_fast: 6 });
      // The slow endpoint's dead letters come first and fill whole chunks.
      await backlog.kill(['ep_slow'], 100);
      await backlog.kill(['ep_fast'], 100);
      const { jobs } = started('node-a');
      await jobs.settled();
      const job = await jobs.create({ tenantId: 'acme' }, { chunkSize: 20 });

      for (let round = 0; round < 100 && (await jobs.get(job.id)).replayed < 102; round++) {
        await backlog.deliver('ep_fast', 10);
        await tick(backlog, jobs);
      }
      expect(await backlog.live('ep_slow'), 'never more than 2 × 1 of the slow one').to.equal(2);
      expect((await jobs.get(job.id)).replayed, 'all of the fast one, 2 of the slow one').to.equal(102);

      for (let round = 0; round < 200 && (await jobs.get(job.id)).state === ReplayJobState.RUNNING; round++) {
        await backlog.deliver('ep_slow', 1);
        await backlog.deliver('ep_fast', 10);
        await tick(backlog, jobs);
        expect(await backlog.live('ep_slow')).to.be.at.most(2);
      }
      expect(await jobs.get(job.id)).to.include({ state: ReplayJobState.DONE, replayed: 200 });
      expect((await backlog.rounds()).every((round) => round === 1)).to.equal(true);
    });
  });

  context('when the node running a job dies between releasing dead letters and saving its cursor', () => {
    it('another node takes the job once the lease ends and finishes it, replaying none twice', async () => {
      await backlog.open({ ep_1: 6 });
      await backlog.kill(['ep_1'], 100);
      // Node A's store: once A has replayed its second lot of dead letters, it hears nothing more
      // back (the process died): that lot's saved progress never comes.
      let replays = 0;
      let dead = false;
      const hang = new Promise<never>(() => {});
      const dying = new Proxy(backlog.store as Store, {
        get(target, name, receiver) {
          const value = Reflect.get(target, name, receiver) as unknown;
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            if (dead) return hang;
            const result = (value as (...a: unknown[]) => unknown).apply(target, args);
            if (name !== 'replayDeadLetters') return result;
            return Promise.resolve(result).then((ids) => {
              if (++replays === 2) dead = true;
              return ids;
            });
          };
        },
      });
      const a = node(backlog, 'node-a', dying);
      a.jobs.start();
      await a.jobs.settled();
      const job = await a.jobs.create({ endpointId: 'ep_1' }, { chunkSize: 10 });
      expect(job.replayed).to.equal(10);
      await backlog.deliver('ep_1', 10);
      a.jobs.nudge();
      for (let i = 0; i < 50 && !dead; i++) await new Promise((resolve) => setImmediate(resolve));
      expect(dead).to.equal(true);
      const before = await backlog.store.getReplayJob(job.id);
      expect(before).to.include({ owner: 'node-a', state: 'running' });
      const released = (await backlog.rounds()).filter((round) => round === 1).length;
      expect(released, 'released beyond what the job saved').to.be.greaterThan(before!.replayed);

      // Node B: the job is node A's until its lease ends.
      const b = started('node-b');
      await tick(backlog, b.jobs);
      expect(b.jobs.running).to.equal(0);
      await tick(backlog, b.jobs, LEASE_MS);
      expect(b.jobs.running).to.equal(1);
      for (let round = 0; round < 100 && (await b.jobs.get(job.id)).state === ReplayJobState.RUNNING; round++) {
        await backlog.deliver('ep_1', 10);
        await tick(backlog, b.jobs);
      }
      const done = await b.jobs.get(job.id);
      expect(done.state).to.equal(ReplayJobState.DONE);
      expect(done.replayed, 'the look that died is not counted').to.equal(100 - (released - before!.replayed));
      expect(await backlog.rounds()).to.have.length(100).and.satisfy((rounds: number[]) => rounds.every((round) => round === 1));
      expect(await backlog.store.countReplayableDeadLetters({ endpointId: 'ep_1' })).to.equal(0);
    });
  });

  context('when the node running a job closes', () => {
    it('gives the job back: another node takes it at its next poll, not after the lease', async () => {
      await backlog.open({ ep_1: 6 });
      await backlog.kill(['ep_1'], 50);
      const a = node(backlog, 'node-a');
      a.jobs.start();
      const job = await a.jobs.create({ endpointId: 'ep_1' }, { chunkSize: 10 });
      const b = started('node-b');
      await tick(backlog, b.jobs);
      expect([a.jobs.running, b.jobs.running], 'one node at a time').to.deep.equal([1, 0]);
      await a.jobs.close();
      expect(await backlog.store.getReplayJob(job.id)).to.include({ state: 'running', owner: null });
      await backlog.deliver('ep_1', 10);
      await tick(backlog, b.jobs);
      expect(b.jobs.running).to.equal(1);
      expect((await b.jobs.get(job.id)).replayed).to.equal(20);
    });
  });

  context('when a job is cancelled from another node', () => {
    it('stops: what went out stays replayed, the rest stays dead', async () => {
      await backlog.open({ ep_1: 6 });
      await backlog.kill(['ep_1'], 50);
      const a = started('node-a');
      const b = started('node-b');
      const job = await a.jobs.create({ endpointId: 'ep_1' }, { chunkSize: 10 });
      expect(await b.jobs.cancel(job.id)).to.include({ state: ReplayJobState.CANCELLED, replayed: 10, finishedAt: backlog.clock.now() });
      for (let i = 0; i < 3; i++) {
        await backlog.deliver('ep_1', 10);
        a.jobs.nudge();
        await tick(backlog, a.jobs);
      }
      expect(a.jobs.running).to.equal(0);
      expect((await backlog.rounds()).filter((round) => round === 1)).to.have.length(10);
      expect(await b.jobs.cancel(job.id), 'a finished job as it is').to.include({ state: ReplayJobState.CANCELLED });
      expect((await a.jobs.list()).map((listed) => listed.id)).to.deep.equal([job.id]);
      expect(await a.jobs.get(job.id)).to.not.have.any.keys('cursor', 'owner', 'leaseUntil');
    });
  });

  context('when the store keeps failing', () => {
    it('ends the job failed after five looks in a row, saying why', async () => {
      await backlog.open({ ep_1: 6 });
      await backlog.kill(['ep_1'], 50);
      let failing = false;
      const flaky: ReplayJobStore = new Proxy(backlog.store as Store, {
        get(target, name, receiver) {
          const value = Reflect.get(target, name, receiver) as unknown;
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) =>
            failing && name === 'replayableDeadLetterPage' ? Promise.reject(new Error('store unreachable')) : (value as (...a: unknown[]) => unknown).apply(target, args);
        },
      });
      const a = started('node-a', flaky);
      const job = await a.jobs.create({ endpointId: 'ep_1' }, { chunkSize: 10 });
      failing = true;
      for (let i = 0; i < 4; i++) await tick(backlog, a.jobs);
      expect((await a.jobs.get(job.id)).state, 'four failures: still running').to.equal(ReplayJobState.RUNNING);
      await tick(backlog, a.jobs);
      expect(await a.jobs.get(job.id)).to.include({ state: ReplayJobState.FAILED, replayed: 10, error: 'store unreachable' });
      expect(a.errors).to.have.length(5);
    });
  });

  context('when asked for what does not exist or with a bad chunk size', () => {
    it('throws coded errors naming the field', async () => {
      await backlog.open({});
      const a = started('node-a');
      const missing = await a.jobs.get('rpl_missing').catch((e: unknown) => e);
      expect(missing).to.be.instanceOf(HeraldError).and.include({ code: 'HERALD_NOT_FOUND', field: 'replayId' });
      for (const chunkSize of [0, 1.5, 1_001]) {
        const error = await a.jobs.create({}, { chunkSize }).catch((e: unknown) => e);
        expect(error, String(chunkSize)).to.be.instanceOf(HeraldError).and.include({ code: 'HERALD_INVALID_INPUT', field: 'chunkSize' });
      }
      expect(() => new ReplayJobs({} as never, { pollMs: 0 })).to.throw(HeraldError).with.property('field', 'pollMs');
    });
  });
});
