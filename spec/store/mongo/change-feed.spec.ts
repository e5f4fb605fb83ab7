import { expect } from 'chai';
import { MongoNetworkError, MongoServerError } from 'mongodb';
import { ManualClock } from '../../../lib/clock.ts';
import {
  ChangeFeed,
  changeFeedPipeline,
  classifyChangeFeedError,
  restartDelay,
} from '../../../lib/store/mongo/change-feed.ts';
import type { ChangeFeedRestart, ChangeStreamLike, OpenStreamOptions } from '../../../lib/store/mongo/change-feed.ts';
import { ResumeTokenKeeper } from '../../../lib/store/mongo/resume-tokens.ts';
import type { TokenDocuments } from '../../../lib/store/mongo/resume-tokens.ts';
import { loadMongoDriver } from '../../../lib/store/mongo/driver.ts';

/** Lets every pending promise callback run (no timers involved). */
async function flush(): Promise<void> {
  for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
}

type Step = { readonly change: string; readonly token: unknown } | { readonly empty: true; readonly token: unknown } | { readonly error: unknown };

/** A scripted change stream: plays its steps, then waits until closed (as a real getMore waits). */
class FakeStream implements ChangeStreamLike {
  resumeToken: unknown;
  closed = false;
  readonly #steps: Step[];
  #wake: (() => void) | undefined;

  constructor(steps: Step[], initialToken: unknown) {
    this.#steps = [...steps];
    this.resumeToken = initialToken ?? null;
  }

  async tryNext(): Promise<{ operationType: string } | null> {
    const step = this.#steps.shift();
    if (step === undefined) {
      if (!this.closed) await new Promise<void>((resolve) => (this.#wake = resolve));
      throw new Error('ChangeStream is closed');
    }
    if ('error' in step) throw step.error;
    this.resumeToken = step.token;
    return 'empty' in step ? null : { operationType: step.change };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.#wake?.();
  }
}

/** A stream whose next answer the test gives by hand: a batch the driver already holds when a reopen begins. */
class GatedStream implements ChangeStreamLike {
  resumeToken: unknown = null;
  closed = false;
  #answer: ((change: { operationType: string } | null) => void) | undefined;

  tryNext(): Promise<{ operationType: string } | null> {
    return new Promise((resolve) => (this.#answer = resolve));
  }

  /** The pending `tryNext()` answers `change` with `token` as the stream's new position. */
  answer(change: string | null, token: unknown): void {
    this.resumeToken = token;
    this.#answer?.(change === null ? null : { operationType: change });
  }

  async close(): Promise<void> {
    // As the driver's: closing does not take back a batch already received.
    this.closed = true;
  }
}

class MemoryTokens implements TokenDocuments {
  readonly docs = new Map<string, unknown>();
  writes = 0;
  async read(id: string) {
    return this.docs.get(id);
  }
  async write(id: string, token: unknown) {
    this.writes++;
    this.docs.set(id, token);
  }
  async remove(id: string) {
    this.docs.delete(id);
  }
}

const T1 = { _data: '01' };
const T2 = { _data: '02' };
const T3 = { _data: '03' };
const DOC = 'resume_token:default';

function historyLost(): MongoServerError {
  return new MongoServerError({ message: 'resume point lost', code: 286, codeName: 'ChangeStreamHistoryLost' });
}

describe('ChangeFeed', () => {
  // The adapter takes the driver's classes from the loaded driver, as after MongoStore.init().
  before(() => loadMongoDriver({ key: 'store', value: 'mongodb://spec' }));

  let clock: ManualClock;
  let tokens: MemoryTokens;
  let opened: OpenStreamOptions[];
  let streams: FakeStream[];
  let scripts: Step[][];
  let restarts: ChangeFeedRestart[];
  let changes: number;
  let feed: ChangeFeed;

  function makeFeed(slots?: readonly number[], onChange: () => void = () => changes++): ChangeFeed {
    feed = new ChangeFeed(
      {
        open: (options) => {
          opened.push(options);
          const stream = new FakeStream(scripts.shift() ?? [], options.resumeAfter);
          streams.push(stream);
          return stream;
        },
        tokens: new ResumeTokenKeeper(tokens, { key: 'default', saveIntervalMs: 1_000 }),
        clock,
        onChange,
        onRestart: (r) => restarts.push(r),
        restartDelayMs: 1_000,
        maxRestartDelayMs: 8_000,
      },
      slots,
    );
    return feed;
  }

  beforeEach(() => {
    clock = new ManualClock();
    tokens = new MemoryTokens();
    opened = [];
    streams = [];
    scripts = [];
    restarts = [];
    changes = 0;
  });

  afterEach(async () => {
    await feed?.stop();
  });

  context('when started with no stored token', () => {
    it('opens from now, signals each change, saves the token (empty batches too) and is ready', async () => {
      scripts.push([{ empty: true, token: T1 }, { change: 'insert', token: T2 }, { change: 'insert', token: T3 }]);
      makeFeed([3, 1]).start();
      await feed.whenReady();
      await flush();
      expect(opened).to.have.length(1);
      expect(opened[0]).to.not.have.property('resumeAfter');
      expect(opened[0]!.pipeline).to.deep.equal(changeFeedPipeline([1, 3]));
      expect(changes).to.equal(2);
      // The first token was saved at once; later ones wait for the save interval.
      expect(tokens.docs.get(DOC)).to.deep.equal(T1);
      clock.advance(1_000);
      await feed.stop();
      expect(tokens.docs.get(DOC)).to.deep.equal(T3);
      expect(streams[0]!.closed).to.equal(true);
    });
  });

  context('when a token is stored', () => {
    it('resumes after it', async () => {
      tokens.docs.set(DOC, T2);
      makeFeed().start();
      await flush();
      expect(opened[0]).to.include({ resumeAfter: T2 });
      expect(opened[0]!.pipeline).to.deep.equal(changeFeedPipeline(undefined));
    });

    it('ignores a stored value that cannot be a token', async () => {
      tokens.docs.set(DOC, 'not a token');
      makeFeed().start();
      await flush();
      expect(opened[0]).to.not.have.property('resumeAfter');
    });
  });

  context('when the resume token fell out of the oplog (error 286)', () => {
    it('signals a sweep, counts and reports the restart, forgets the token and reopens from now', async () => {
      tokens.docs.set(DOC, T1);
      scripts.push([{ error: historyLost() }]);
      makeFeed().start();
      await flush();
      expect(restarts).to.have.length(1);
      expect(restarts[0]).to.include({ reason: 'history-lost', resumed: false, restarts: 1, delayMs: 0 });
      expect(feed.restarts).to.equal(1);
      expect(changes).to.equal(1);
      expect(tokens.docs.has(DOC)).to.equal(false);
      expect(opened).to.have.length(2);
      expect(opened[1]).to.not.have.property('resumeAfter');
    });
  });

  context('when the stream is invalidated', () => {
    it('restarts from now after a sweep', async () => {
      scripts.push([{ change: 'insert', token: T1 }, { change: 'invalidate', token: T2 }]);
      makeFeed().start();
      await flush();
      expect(restarts.map((r) => r.reason)).to.deep.equal(['invalidated']);
      expect(restarts[0]).to.not.have.property('error');
      expect(changes).to.equal(2); // the insert, then the sweep
      expect(opened[1]).to.not.have.property('resumeAfter');
    });
  });

  context('when the error is resumable', () => {
    it('reopens from the last token and keeps it stored', async () => {
      scripts.push([{ change: 'insert', token: T1 }, { error: new MongoNetworkError('connection reset') }]);
      makeFeed().start();
      await flush();
      expect(restarts[0]).to.include({ reason: 'resumable-error', resumed: true });
      expect(opened[1]).to.include({ resumeAfter: T1 });
      expect(tokens.docs.get(DOC)).to.deep.equal(T1);
    });
  });

  context('when failures follow each other', () => {
    it('restarts the first at once, then backs off on the clock, and resets after a good batch', async () => {
      const failing = (): Step[] => [{ error: new MongoServerError({ message: 'boom', code: 8000 }) }];
      scripts.push(failing(), failing(), failing(), [{ empty: true, token: T1 }], failing(), failing());
      makeFeed().start();
      await flush();
      expect(opened).to.have.length(2);
      expect(restarts.map((r) => r.delayMs)).to.deep.equal([0, 1_000]);
      clock.advance(999);
      await flush();
      expect(opened).to.have.length(2);
      clock.advance(1);
      await flush();
      expect(opened).to.have.length(3);
      expect(restarts.map((r) => r.delayMs)).to.deep.equal([0, 1_000, 2_000]);
      clock.advance(2_000);
      await flush();
      // A good batch, then a failure (the stream closed under it): immediate again; the next one waits the base delay.
      expect(restarts.map((r) => r.delayMs)).to.deep.equal([0, 1_000, 2_000]);
      await streams[3]!.close();
      await flush();
      expect(restarts.map((r) => r.delayMs)).to.deep.equal([0, 1_000, 2_000, 0, 1_000]);
      expect(opened).to.have.length(5);
    });
  });

  context('when the owned slots change', () => {
    it('reopens with the new filter from the current token, without counting a restart', async () => {
      scripts.push([{ empty: true, token: T1 }]);
      makeFeed([1]).start();
      await feed.whenReady();
      feed.setSlots([1]);
      await flush();
      expect(opened).to.have.length(1);
      feed.setSlots([2, 1]);
      await flush();
      expect(opened).to.have.length(2);
      expect(opened[1]).to.include({ resumeAfter: T1 });
      expect(opened[1]!.pipeline).to.deep.equal(changeFeedPipeline([1, 2]));
      expect(restarts).to.deep.equal([]);
      expect(streams[0]!.closed).to.equal(true);
    });
  });

  context('when a change arrives as the owned slots change', () => {
    it('signals it before reopening: the new stream resumes after it, so it would never come again', async () => {
      const gated: GatedStream[] = [];
      feed = new ChangeFeed(
        {
          open: (options) => {
            opened.push(options);
            const stream = gated.length === 0 ? new GatedStream() : new FakeStream([], options.resumeAfter);
            if (stream instanceof GatedStream) gated.push(stream);
            else streams.push(stream);
            return stream;
          },
          tokens: new ResumeTokenKeeper(tokens, { key: 'default', saveIntervalMs: 1_000 }),
          clock,
          onChange: () => changes++,
          onRestart: (r) => restarts.push(r),
          restartDelayMs: 1_000,
          maxRestartDelayMs: 8_000,
        },
        [1],
      );
      feed.start();
      await flush();
      feed.setSlots([1, 2]);
      gated[0]!.answer('insert', T2);
      await flush();
      expect(changes).to.equal(1);
      expect(opened).to.have.length(2);
      expect(opened[1]).to.include({ resumeAfter: T2 });
      expect(restarts).to.deep.equal([]);
    });
  });

  context('when someone waits for the feed to be ready across a reopen or a restart', () => {
    it('resolves the wait once the next stream answers, and on stop', async () => {
      scripts.push([], [{ empty: true, token: T1 }]);
      makeFeed([1]).start();
      await flush();
      let ready = false;
      void feed.whenReady().then(() => (ready = true));
      feed.setSlots([2]);
      await flush();
      expect(opened).to.have.length(2);
      expect(ready, 'the wait begun before the reopen').to.equal(true);

      scripts.push([{ error: new MongoServerError({ message: 'boom', code: 8000 }) }], [{ error: new MongoServerError({ message: 'boom', code: 8000 }) }]);
      await streams[1]!.close();
      await flush();
      let readyAfterRestart = false;
      void feed.whenReady().then(() => (readyAfterRestart = true));
      await flush();
      expect(readyAfterRestart).to.equal(false);
      await feed.stop();
      await flush();
      expect(readyAfterRestart, 'stop ends every wait').to.equal(true);
    });
  });

  context('when the stream is idle', () => {
    it('saves the empty batches\' tokens at the idle pace, so its own save does not keep it writing', async () => {
      const idleTokens = new ResumeTokenKeeper(tokens, { key: 'default', saveIntervalMs: 1_000, idleSaveIntervalMs: 600_000 });
      scripts.push([
        { empty: true, token: T1 },
        { empty: true, token: T2 },
        { change: 'insert', token: T3 },
      ]);
      feed = new ChangeFeed(
        {
          open: (options) => {
            const stream = new FakeStream(scripts.shift() ?? [], options.resumeAfter);
            streams.push(stream);
            return stream;
          },
          tokens: idleTokens,
          clock,
          onChange: () => changes++,
          onRestart: (r) => restarts.push(r),
          restartDelayMs: 1_000,
          maxRestartDelayMs: 8_000,
        },
        undefined,
      );
      feed.start();
      await flush();
      // T1 saved at once (the first save); T2 (idle) waits for the idle interval; T3 follows a change.
      expect(tokens.writes).to.equal(1);
      expect(tokens.docs.get(DOC)).to.deep.equal(T1);
    });
  });

  context('when a listener throws', () => {
    it('goes on', async () => {
      scripts.push([{ change: 'insert', token: T1 }, { change: 'insert', token: T2 }]);
      makeFeed(undefined, () => {
        changes++;
        throw new Error('listener bug');
      }).start();
      await flush();
      expect(changes).to.equal(2);
      expect(restarts).to.deep.equal([]);
    });
  });

  context('when stopped while backing off', () => {
    it('stops at once and leaves no timer', async () => {
      const failing = (): Step[] => [{ error: new Error('boom') }];
      scripts.push(failing(), failing());
      makeFeed().start();
      await flush();
      expect(clock.pendingTimerCount).to.equal(1);
      await feed.stop();
      expect(clock.pendingTimerCount).to.equal(0);
      expect(feed.running).to.equal(false);
    });
  });
});

describe('classifyChangeFeedError', () => {
  // The adapter takes the driver's classes from the loaded driver, as after MongoStore.init().
  before(() => loadMongoDriver({ key: 'store', value: 'mongodb://spec' }));

  it('tells lost history, resumable errors and the rest apart', () => {
    expect(classifyChangeFeedError(historyLost())).to.equal('history-lost');
    // 280 (ChangeStreamFatal) meant lost history only on MongoDB 4.0; on 4.4+ it is any other fatal error.
    expect(classifyChangeFeedError(new MongoServerError({ message: 'x', code: 280 }))).to.equal('error');
    expect(classifyChangeFeedError(new MongoNetworkError('reset'))).to.equal('resumable-error');
    expect(
      classifyChangeFeedError(new MongoServerError({ message: 'x', code: 11602, errorLabels: ['ResumableChangeStreamError'] })),
    ).to.equal('resumable-error');
    expect(classifyChangeFeedError(new MongoServerError({ message: 'bad token', code: 2 }))).to.equal('error');
    expect(classifyChangeFeedError(new TypeError('bug'))).to.equal('error');
  });
});

describe('restartDelay', () => {
  it('is zero for the first restart, then doubles from the base up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 40].map((n) => restartDelay(n, 1_000, 8_000))).to.deep.equal([0, 1_000, 2_000, 4_000, 8_000, 8_000, 8_000]);
  });
});

describe('changeFeedPipeline', () => {
  it('passes outbox inserts, delivery inserts in the slots, wake-ups, re-enabled endpoints and invalidate; keeps little', () => {
    const [match, project] = changeFeedPipeline([0, 5]);
    expect(match).to.deep.equal({
      $match: {
        $or: [
          { operationType: 'insert', 'ns.coll': 'events' },
          { operationType: 'insert', 'ns.coll': 'deliveries', 'fullDocument.slot': { $in: [0, 5] } },
          { operationType: 'update', 'ns.coll': 'deliveries', 'updateDescription.updatedFields.wokeAt': { $exists: true } },
          { operationType: 'update', 'ns.coll': 'endpoints', 'updateDescription.updatedFields.status': 'enabled' },
          { operationType: 'invalidate' },
        ],
      },
    });
    expect(project).to.deep.equal({ $project: { operationType: 1, ns: 1 } });
  });

  it('leaves out the events and deliveries the store inserted itself (its origin), keeping a producer\'s', () => {
    const [match] = changeFeedPipeline([0], 'me');
    const branches = (match as { $match: { $or: Array<Record<string, unknown>> } }).$match.$or;
    expect(branches[0]).to.deep.equal({ operationType: 'insert', 'ns.coll': 'events', 'fullDocument.origin': { $ne: 'me' } });
    expect(branches[1]).to.deep.equal({ operationType: 'insert', 'ns.coll': 'deliveries', 'fullDocument.origin': { $ne: 'me' }, 'fullDocument.slot': { $in: [0] } });
    // `$ne` matches a missing field: a producer's publishMongo, which sets no origin, is signalled.
    expect(JSON.stringify(changeFeedPipeline([0]))).to.not.include('origin');
  });

  it('does not filter delivery inserts by slot when the slots are unknown', () => {
    const [match] = changeFeedPipeline(undefined);
    expect(JSON.stringify(match)).to.not.include('fullDocument.slot');
  });
});
