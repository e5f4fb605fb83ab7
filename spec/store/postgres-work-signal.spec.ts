import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import pg from 'pg';
import { ManualClock, systemClock } from '../../lib/clock.ts';
import { ClosedError, ErrorCode, isHeraldError, ValidationError } from '../../lib/errors.ts';
import { WORK_CHANNEL } from '../../lib/store/postgres/schema.ts';
import { PostgresWorkSignal, reconnectDelay } from '../../lib/store/postgres/work-signal.ts';
import type { ClientLike, WorkSignalOptions, WorkSignalRestart } from '../../lib/store/postgres/work-signal.ts';
import { createTestDatabase } from '../../test-kit/postgres-server.ts';

/** Lets every pending promise callback run (no timers involved). */
async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
}

interface FakeScript {
  /** connect() rejects with this. */
  readonly connectError?: Error;
  /** LISTEN rejects with this. */
  readonly listenError?: Error;
  /** connect() waits until the test calls `finishConnect()`. */
  readonly holdConnect?: boolean;
}

/** A scripted connection: connects (or fails to), records its queries, and emits what the test tells it to. */
class FakeClient extends EventEmitter implements ClientLike {
  readonly queries: string[] = [];
  ended = false;
  readonly #script: FakeScript;
  #finishConnect: (() => void) | undefined;

  constructor(script: FakeScript) {
    super();
    this.#script = script;
  }

  connect(): Promise<void> {
    if (this.#script.connectError !== undefined) return Promise.reject(this.#script.connectError);
    if (this.#script.holdConnect === true) return new Promise<void>((resolve) => (this.#finishConnect = resolve));
    return Promise.resolve();
  }

  finishConnect(): void {
    this.#finishConnect?.();
  }

  async query(text: string): Promise<void> {
    this.queries.push(text);
    if (this.#script.listenError !== undefined) throw this.#script.listenError;
  }

  async end(): Promise<void> {
    this.ended = true;
  }

  notify(payload: string | undefined, channel = WORK_CHANNEL): void {
    this.emit('notification', payload === undefined ? { channel } : { channel, payload });
  }

  /** What pg does when the server terminates the backend: 'error', then 'end'. */
  terminate(): void {
    this.emit('error', new Error('terminating connection due to administrator command'));
    this.emit('end');
  }
}

describe('PostgresWorkSignal', () => {
  let clock: ManualClock;
  let scripts: FakeScript[];
  let clients: FakeClient[];
  let restarts: WorkSignalRestart[];
  let changes: number;
  let signal: PostgresWorkSignal;

  function makeSignal(overrides: Partial<WorkSignalOptions> = {}): PostgresWorkSignal {
    signal = new PostgresWorkSignal({
      connect: () => {
        const client = new FakeClient(scripts.shift() ?? {});
        clients.push(client);
        return client;
      },
      accept: (payload) => payload.startsWith('herald ') && payload !== 'herald node-self',
      onChange: () => changes++,
      onRestart: (restart) => restarts.push(restart),
      clock,
      retryDelayMs: 100,
      maxRetryDelayMs: 800,
      ...overrides,
    });
    return signal;
  }

  function lastClient(): FakeClient {
    const client = clients.at(-1);
    if (client === undefined) throw new Error('no client was made');
    return client;
  }

  beforeEach(() => {
    clock = new ManualClock();
    scripts = [];
    clients = [];
    restarts = [];
    changes = 0;
  });

  afterEach(async () => {
    await signal?.stop();
  });

  context('when started', () => {
    it('connects one client, listens on herald_work, and signals once for what was committed before it listened', async () => {
      makeSignal().start();
      expect(signal.listening).to.equal(false);
      await signal.whenListening();
      expect(clients).to.have.length(1);
      expect(lastClient().queries).to.deep.equal(['LISTEN herald_work']);
      expect(signal.listening).to.equal(true);
      expect(changes).to.equal(1);
      expect(signal.restarts).to.equal(0);
    });

    it('does nothing when started again', async () => {
      makeSignal().start();
      signal.start();
      await flush();
      expect(clients).to.have.length(1);
    });
  });

  context('when a notification arrives', () => {
    it('signals for each payload the filter accepts, and not for others or other channels', async () => {
      const seen: string[] = [];
      makeSignal({
        accept: (payload) => {
          seen.push(payload);
          return payload === 'herald node-b';
        },
      }).start();
      await signal.whenListening();
      changes = 0;
      const client = lastClient();
      client.notify('herald node-b');
      client.notify('herald node-a');
      client.notify('other_schema node-b');
      client.notify(undefined);
      client.notify('herald node-b', 'some_other_channel');
      client.notify('herald node-b');
      expect(seen).to.deep.equal(['herald node-b', 'herald node-a', 'other_schema node-b', '', 'herald node-b']);
      expect(changes).to.equal(2);
    });

    it('signals when the filter throws (a needless sweep is cheaper than a missed one)', async () => {
      makeSignal({
        accept: () => {
          throw new Error('filter bug');
        },
      }).start();
      await signal.whenListening();
      changes = 0;
      lastClient().notify('herald node-b');
      expect(changes).to.equal(1);
    });
  });

  context('when the listening connection is terminated', () => {
    it('signals a sweep, reports one restart, reconnects at once on the clock, and signals again once listening', async () => {
      makeSignal().start();
      await signal.whenListening();
      changes = 0;
      const first = lastClient();
      first.terminate();
      // 'error' then 'end' for one termination: one restart.
      expect(restarts).to.have.length(1);
      expect(restarts[0]).to.include({ reason: 'error', restarts: 1, delayMs: 0 });
      expect((restarts[0]!.error as Error).message).to.match(/administrator command/);
      expect(signal.restarts).to.equal(1);
      expect(signal.listening).to.equal(false);
      expect(changes).to.equal(1);
      expect(first.ended).to.equal(true);
      // Not from inside the client's event handler: the reconnect waits for the clock.
      expect(clients).to.have.length(1);
      clock.advance(0);
      await signal.whenListening();
      expect(clients).to.have.length(2);
      expect(lastClient().queries).to.deep.equal(['LISTEN herald_work']);
      expect(changes).to.equal(2);
      // The old client's late notifications are not the signal's any more.
      first.notify('herald node-b');
      expect(changes).to.equal(2);
      lastClient().notify('herald node-b');
      expect(changes).to.equal(3);
    });

    it('reports an end without an error as ended, with no error', async () => {
      makeSignal().start();
      await signal.whenListening();
      lastClient().emit('end');
      expect(restarts).to.have.length(1);
      expect(restarts[0]).to.include({ reason: 'ended', restarts: 1, delayMs: 0 });
      expect(restarts[0]).to.not.have.property('error');
    });
  });

  context('when failures follow each other', () => {
    it('reconnects the first at once, then after retryDelayMs doubling up to maxRetryDelayMs, and resets after a good connection', async () => {
      const refused = (): FakeScript => ({ connectError: new Error('ECONNREFUSED') });
      // The first connection is good; then five attempts fail; the sixth listens.
      scripts.push({}, refused(), refused(), refused(), refused(), refused(), {});
      makeSignal().start();
      await signal.whenListening();
      changes = 0;
      lastClient().terminate();
      const expected = [0, 100, 200, 400, 800, 800];
      for (let i = 0; i < expected.length; i++) {
        expect(restarts.map((r) => r.delayMs)).to.deep.equal(expected.slice(0, i + 1));
        const delayMs = expected[i]!;
        if (delayMs > 0) {
          clock.advance(delayMs - 1);
          await flush();
          expect(clients, `attempt ${i + 2} waits ${delayMs} ms`).to.have.length(i + 1);
          clock.advance(1);
        } else {
          clock.advance(0);
        }
        await flush();
        expect(clients).to.have.length(i + 2);
      }
      expect(restarts.map((r) => r.reason)).to.deep.equal(['error', 'connect-failed', 'connect-failed', 'connect-failed', 'connect-failed', 'connect-failed']);
      expect(restarts.map((r) => r.restarts)).to.deep.equal([1, 2, 3, 4, 5, 6]);
      // One sweep for the drop, none for the failed attempts, one for the new LISTEN.
      expect(signal.listening).to.equal(true);
      expect(changes).to.equal(2);
      // Every failed client was ended.
      expect(clients.slice(0, -1).every((c) => c.ended)).to.equal(true);
      // A good connection resets the backoff: the next drop reconnects at once.
      lastClient().terminate();
      expect(restarts.at(-1)).to.include({ delayMs: 0, restarts: 7 });
    });
  });

  context('when the first connection fails', () => {
    it('does not throw, reports it, and retries it like a drop', async () => {
      scripts.push({ connectError: new Error('ECONNREFUSED') });
      makeSignal().start();
      await flush();
      expect(restarts).to.have.length(1);
      expect(restarts[0]).to.include({ reason: 'connect-failed', restarts: 1, delayMs: 0 });
      expect(changes).to.equal(0);
      clock.advance(0);
      await signal.whenListening();
      expect(clients).to.have.length(2);
      expect(changes).to.equal(1);
    });

    it('treats a failing LISTEN or a throwing factory as a failed connection', async () => {
      let throwing = true;
      scripts.push({ listenError: new Error('permission denied') });
      makeSignal({
        connect: () => {
          if (throwing) {
            throwing = false;
            throw new Error('bad config');
          }
          const client = new FakeClient(scripts.shift() ?? {});
          clients.push(client);
          return client;
        },
      }).start();
      await flush();
      expect(restarts.map((r) => [r.reason, r.delayMs, (r.error as Error).message])).to.deep.equal([['connect-failed', 0, 'bad config']]);
      clock.advance(0);
      await flush();
      expect(restarts.map((r) => [r.reason, r.delayMs, (r.error as Error).message])).to.deep.equal([
        ['connect-failed', 0, 'bad config'],
        ['connect-failed', 100, 'permission denied'],
      ]);
      expect(clients[0]!.ended).to.equal(true);
      clock.advance(100);
      await signal.whenListening();
    });
  });

  context('when stopped', () => {
    it('cancels a pending reconnect and never connects again', async () => {
      scripts.push({ connectError: new Error('ECONNREFUSED') }, { connectError: new Error('ECONNREFUSED') });
      makeSignal().start();
      await flush();
      clock.advance(0);
      await flush();
      expect(restarts.map((r) => r.delayMs)).to.deep.equal([0, 100]);
      expect(clock.pendingTimerCount).to.equal(1);
      await signal.stop();
      expect(clock.pendingTimerCount).to.equal(0);
      clock.advance(60_000);
      await flush();
      expect(clients).to.have.length(2);
    });

    it('ends the listening client, ignores its late events, and stays stopped', async () => {
      makeSignal().start();
      await signal.whenListening();
      changes = 0;
      const client = lastClient();
      await signal.stop();
      expect(client.ended).to.equal(true);
      expect(signal.listening).to.equal(false);
      client.notify('herald node-b');
      client.terminate();
      clock.advance(60_000);
      await flush();
      expect(changes).to.equal(0);
      expect(restarts).to.deep.equal([]);
      expect(clients).to.have.length(1);
      await signal.stop();
      expect(() => signal.start()).to.throw(ClosedError);
      const waiting = await signal.whenListening().then(() => undefined, (error: unknown) => error);
      expect(isHeraldError(waiting) && waiting.code).to.equal(ErrorCode.CLOSED);
    });

    it('while connecting: ends that client, does not listen, and fails whoever waits', async () => {
      scripts.push({ holdConnect: true });
      makeSignal().start();
      const waiting = signal.whenListening().then(() => 'listening', (error: unknown) => error);
      await flush();
      await signal.stop();
      const client = lastClient();
      client.finishConnect();
      await flush();
      expect(client.ended).to.equal(true);
      expect(client.queries).to.deep.equal([]);
      expect(signal.listening).to.equal(false);
      expect(await waiting).to.be.instanceOf(ClosedError);
      expect(changes).to.equal(0);
    });
  });

  context('when a listener throws', () => {
    it('goes on', async () => {
      makeSignal({
        onChange: () => {
          changes++;
          throw new Error('listener bug');
        },
        onRestart: (restart) => {
          restarts.push(restart);
          throw new Error('reporter bug');
        },
      }).start();
      await signal.whenListening();
      lastClient().terminate();
      clock.advance(0);
      await signal.whenListening();
      lastClient().notify('herald node-b');
      expect(changes).to.equal(4);
      expect(restarts).to.have.length(1);
    });
  });

  context('when an option is bad', () => {
    it('throws a ValidationError naming it', () => {
      const good: WorkSignalOptions = { connect: () => new FakeClient({}), accept: () => true, onChange: () => undefined, clock };
      const field = (options: unknown): string | undefined => {
        try {
          new PostgresWorkSignal(options as WorkSignalOptions);
          return undefined;
        } catch (error) {
          expect(error).to.be.instanceOf(ValidationError);
          return (error as ValidationError).field;
        }
      };
      expect(field(good)).to.equal(undefined);
      expect(field({ ...good, connect: 'postgres://x' })).to.equal('connect');
      expect(field({ ...good, accept: undefined })).to.equal('accept');
      expect(field({ ...good, onRestart: 1 })).to.equal('onRestart');
      expect(field({ ...good, clock: {} })).to.equal('clock');
      expect(field({ ...good, retryDelayMs: -1 })).to.equal('retryDelayMs');
      expect(field({ ...good, retryDelayMs: 1.5 })).to.equal('retryDelayMs');
      expect(field({ ...good, retryDelayMs: 1_000, maxRetryDelayMs: 999 })).to.equal('maxRetryDelayMs');
      expect(field({ ...good, maxRetryDelayMs: 50 })).to.equal('maxRetryDelayMs');
    });
  });
});

describe('reconnectDelay', () => {
  it('is zero for the first reconnect, then doubles from retryDelayMs up to the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 40, 1_000].map((n) => reconnectDelay(n, 100, 5_000))).to.deep.equal([
      0, 100, 200, 400, 800, 1_600, 3_200, 5_000, 5_000,
    ]);
  });
});

/** Counts calls and lets a test wait for the nth, instead of sleeping. */
class Tally<T = void> {
  readonly calls: T[] = [];
  #waiters: Array<{ readonly n: number; resolve(): void }> = [];

  readonly record = (value: T): void => {
    this.calls.push(value);
    this.#waiters = this.#waiters.filter((w) => (this.calls.length >= w.n ? (w.resolve(), false) : true));
  };

  /** Resolves once there have been at least `n` calls. */
  reach(n: number): Promise<void> {
    if (this.calls.length >= n) return Promise.resolve();
    return new Promise<void>((resolve) => this.#waiters.push({ n, resolve }));
  }
}

describe('PostgresWorkSignal (a real server)', function () {
  // The first spec of a run that needs the server starts it (a few seconds; bounded at 60 s).
  this.timeout(90_000);
  const LISTENER = 'herald-work-signal-spec';
  let pool: pg.Pool;
  let signal: PostgresWorkSignal;
  let changes: Tally;
  let restarts: Tally<WorkSignalRestart>;
  let seen: string[];

  beforeEach(async () => {
    const connectionString = await createTestDatabase();
    pool = new pg.Pool({ connectionString, max: 2 });
    changes = new Tally();
    restarts = new Tally<WorkSignalRestart>();
    seen = [];
    signal = new PostgresWorkSignal({
      connect: () => new pg.Client({ connectionString, application_name: LISTENER }),
      accept: (payload) => {
        seen.push(payload);
        return payload === 'herald node-b';
      },
      onChange: changes.record,
      onRestart: restarts.record,
      clock: systemClock,
      retryDelayMs: 10,
    });
    signal.start();
    await signal.whenListening();
    // The sweep for what was committed before LISTEN.
    await changes.reach(1);
  });

  afterEach(async () => {
    await signal.stop();
    await pool.end();
  });

  function notify(payload: string): Promise<unknown> {
    return pool.query('SELECT pg_notify($1, $2)', [WORK_CHANNEL, payload]);
  }

  it('signals a notification the filter accepts and not one it refuses', async () => {
    // Sent one after the other, so they arrive in this order: the accepted one's signal proves the refused one came and went.
    await notify('herald node-a');
    await notify('herald node-b');
    await changes.reach(2);
    expect(seen).to.deep.equal(['herald node-a', 'herald node-b']);
    expect(changes.calls).to.have.length(2);
    expect(signal.restarts).to.equal(0);
  });

  it('reconnects after its backend is terminated, and hears notifications sent after that', async () => {
    const { rows } = await pool.query<{ terminated: boolean }>(
      'SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity WHERE application_name = $1',
      [LISTENER],
    );
    expect(rows).to.deep.equal([{ terminated: true }]);
    await restarts.reach(1);
    expect(restarts.calls[0]).to.include({ reason: 'error', restarts: 1, delayMs: 0 });
    expect(restarts.calls[0]!.error).to.be.instanceOf(Error);
    // The sweep for the drop, then the one for the new LISTEN.
    await changes.reach(3);
    await signal.whenListening();
    expect(signal.listening).to.equal(true);
    await notify('herald node-b');
    await changes.reach(4);
    expect(seen).to.deep.equal(['herald node-b']);
    expect(signal.restarts).to.equal(1);
    expect(restarts.calls).to.have.length(1);
  });
});
