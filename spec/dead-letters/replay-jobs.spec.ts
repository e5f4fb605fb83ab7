import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ReplayJobs, ReplayJobState, type ReplayJobsDeps } from '../../lib/dead-letters/replay-jobs.ts';
import { HeraldError } from '../../lib/errors.ts';
import type { Delivery, DeliveryStatus } from '../../lib/model.ts';

const POLL_MS = 250;

/** Dead letters and their deliveries in memory, replayed and settled as the store and the endpoints would. */
class Backlog {
  readonly letters: { id: string; deliveryId: string; replayed: boolean }[] = [];
  readonly status = new Map<string, DeliveryStatus>();
  signals = 0;
  failNextPage = false;

  constructor(count: number) {
    for (let i = 0; i < count; i++) {
      const id = `dl_${String(i).padStart(5, '0')}`;
      this.letters.push({ id, deliveryId: `dlv_${i}`, replayed: false });
      this.status.set(`dlv_${i}`, 'dead');
    }
  }

  deps(clock: ManualClock): ReplayJobsDeps {
    return {
      clock,
      countReplayable: async () => this.letters.filter((l) => !l.replayed).length,
      page: async (_filter, afterId, limit) => {
        if (this.failNextPage) throw new Error('store unreachable');
        const start = afterId === null ? 0 : this.letters.findIndex((l) => l.id === afterId) + 1;
        return this.letters.slice(start).filter((l) => !l.replayed).slice(0, limit).map(({ id, deliveryId }) => ({ id, deliveryId }));
      },
      replay: async (ids) => {
        const done: string[] = [];
        for (const letter of this.letters) {
          if (!ids.includes(letter.id) || letter.replayed) continue;
          letter.replayed = true;
          this.status.set(letter.deliveryId, 'pending');
          done.push(letter.id);
        }
        return done;
      },
      getDelivery: async (id) => ({ id, status: this.status.get(id) ?? 'dead' }) as Delivery,
      signal: () => void this.signals++,
    };
  }

  /** Deliveries released and not yet settled. */
  get live(): string[] {
    return [...this.status].filter(([, status]) => status === 'pending' || status === 'in_flight').map(([id]) => id);
  }

  /** The endpoint delivers `n` of the live ones. */
  deliver(n: number): void {
    for (const id of this.live.slice(0, n)) this.status.set(id, 'delivered');
  }

  get replayed(): number {
    return this.letters.filter((l) => l.replayed).length;
  }
}

/** Lets the job's pending store calls (all resolved at once here) run to the end. */
const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

async function tick(clock: ManualClock): Promise<void> {
  clock.advance(POLL_MS);
  await settle();
}

describe('ReplayJobs', () => {
  let jobs: ReplayJobs | undefined;
  afterEach(() => jobs?.close());

  context('when a job runs over 2 000 dead letters in chunks of 100', () => {
    it('releases a chunk only once at most half the last one still waits, and ends done with every letter replayed once', async () => {
      const clock = new ManualClock();
      const backlog = new Backlog(2_000);
      jobs = new ReplayJobs(backlog.deps(clock), { pollMs: POLL_MS });

      const started = await jobs.start({ endpointId: 'ep_1' }, { chunkSize: 100 });
      expect(started).to.include({ state: ReplayJobState.RUNNING, total: 2_000, replayed: 100, waiting: 100, chunkSize: 100 });
      expect(backlog.live).to.have.length(100);

      // The endpoint is slow: nothing more goes out while more than half a chunk waits.
      await tick(clock);
      backlog.deliver(49);
      await tick(clock);
      expect(jobs.get(started.id)).to.include({ replayed: 100, waiting: 51 });
      backlog.deliver(1);
      await tick(clock);
      expect(jobs.get(started.id)).to.include({ replayed: 200, waiting: 150 });

      let maxLive = 0;
      for (let round = 0; round < 200 && jobs.get(started.id).state === ReplayJobState.RUNNING; round++) {
        maxLive = Math.max(maxLive, backlog.live.length);
        backlog.deliver(40);
        await tick(clock);
      }
      expect(maxLive).to.be.at.most(150);
      expect(jobs.get(started.id)).to.include({ state: ReplayJobState.DONE, replayed: 2_000, finishedAt: clock.now() });
      expect(backlog.replayed).to.equal(2_000);
      expect(backlog.signals).to.equal(20);
      expect(clock.nextTimerAt()).to.equal(undefined);
    });
  });

  context('when a job is cancelled', () => {
    it('releases nothing more: what went out stays replayed, the rest stays dead', async () => {
      const clock = new ManualClock();
      const backlog = new Backlog(500);
      jobs = new ReplayJobs(backlog.deps(clock), { pollMs: POLL_MS });
      const started = await jobs.start({}, { chunkSize: 100 });
      backlog.deliver(100);
      await tick(clock);
      expect(backlog.replayed).to.equal(200);

      expect(jobs.cancel(started.id)).to.include({ state: ReplayJobState.CANCELLED, replayed: 200, finishedAt: clock.now() });
      backlog.deliver(100);
      for (let i = 0; i < 5; i++) await tick(clock);
      expect(backlog.replayed).to.equal(200);
      expect(jobs.cancel(started.id).state).to.equal(ReplayJobState.CANCELLED);
      expect(jobs.list().map((job) => job.id)).to.deep.equal([started.id]);
    });

    it('ends every running job cancelled when the node closes, leaving no timer', async () => {
      const clock = new ManualClock();
      const backlog = new Backlog(300);
      jobs = new ReplayJobs(backlog.deps(clock), { pollMs: POLL_MS });
      const started = await jobs.start({}, { chunkSize: 100 });
      expect(clock.nextTimerAt()).to.equal(clock.now() + POLL_MS);
      jobs.close();
      expect(jobs.get(started.id)).to.include({ state: ReplayJobState.CANCELLED, replayed: 100 });
      expect(clock.nextTimerAt()).to.equal(undefined);
    });
  });

  context('when the store fails', () => {
    it('ends the job failed, saying why', async () => {
      const clock = new ManualClock();
      const backlog = new Backlog(300);
      jobs = new ReplayJobs(backlog.deps(clock), { pollMs: POLL_MS });
      const started = await jobs.start({}, { chunkSize: 100 });
      backlog.deliver(100);
      backlog.failNextPage = true;
      await tick(clock);
      expect(jobs.get(started.id)).to.include({ state: ReplayJobState.FAILED, replayed: 100, error: 'store unreachable' });
    });
  });

  context('when asked for what does not exist or with a bad chunk size', () => {
    it('throws coded errors naming the field', async () => {
      const clock = new ManualClock();
      jobs = new ReplayJobs(new Backlog(1).deps(clock));
      expect(() => jobs?.get('rpl_missing')).to.throw(HeraldError).with.property('field', 'replayId');
      for (const chunkSize of [0, 1.5, 1_001]) {
        const error = await jobs.start({}, { chunkSize }).catch((e: unknown) => e);
        expect(error, String(chunkSize)).to.be.instanceOf(HeraldError).and.include({ code: 'HERALD_INVALID_INPUT', field: 'chunkSize' });
      }
    });
  });
});
