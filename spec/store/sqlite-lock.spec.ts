import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { SqliteStore } from '../../lib/store/sqlite/sqlite-store.ts';
import { makeEndpoint } from './conformance/index.ts';

/** Settles (or not) within one turn of the event loop: whether a promise is still waiting. */
async function stateOf(promise: Promise<unknown>): Promise<'pending' | 'resolved' | 'rejected'> {
  let state: 'pending' | 'resolved' | 'rejected' = 'pending';
  promise.then(
    () => (state = 'resolved'),
    () => (state = 'rejected'),
  );
  await new Promise((resolve) => setImmediate(resolve));
  return state;
}

describe('SqliteStore while another connection holds the write lock', () => {
  let dir: string;
  let clock: ManualClock;
  let store: SqliteStore;
  let holder: Database.Database;

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'herald-sqlite-lock-'));
    clock = new ManualClock();
    const path = join(dir, 'herald.db');
    // The whole wait is on the manual clock; the one blocking wait is kept short.
    store = new SqliteStore({ path, clock, busyTimeoutMs: 5_000, blockingWaitMs: 5, lockRetryIntervalMs: 10 });
    await store.init({ slotCount: 16 });
    holder = new Database(path);
    holder.exec('BEGIN IMMEDIATE');
  });

  afterEach(async () => {
    if (holder.inTransaction) holder.exec('ROLLBACK');
    holder.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('gives the event loop back at once: a write waits on the clock instead of failing or blocking', async () => {
    const heartbeat = store.heartbeat({ id: 'n1', startedAt: clock.now(), now: clock.now(), inFlight: 0, clockOffsetMs: 0 });
    expect(await stateOf(heartbeat)).to.equal('pending');
    clock.advance(1_000);
    expect(await stateOf(heartbeat)).to.equal('pending');

    holder.exec('COMMIT');
    clock.advance(10);
    await heartbeat;
    expect((await store.listNodes(0)).map((n) => n.id)).to.deep.equal(['n1']);
  });

  it('answers reads meanwhile (WAL readers do not wait for the writer)', async () => {
    const heartbeat = store.heartbeat({ id: 'n1', startedAt: clock.now(), now: clock.now(), inFlight: 0, clockOffsetMs: 0 });
    expect(await store.countDeliveries()).to.include({ pending: 0 });
    expect(await store.listNodes(0)).to.deep.equal([]);
    expect(await stateOf(heartbeat)).to.equal('pending');
    holder.exec('COMMIT');
    clock.advance(10);
    await heartbeat;
  });

  it('runs queued writes in the order they were asked for once the lock is free, lease renewals and heartbeats first', async () => {
    const done: string[] = [];
    const ran = (name: string) => () => void done.push(name);
    const writes = [
      store.releaseLeases('n0', [9]).then(ran('release')),
      store.createEndpoint(makeEndpoint('e1', 'acme', 0)).then(ran('endpoint e1')),
      store.heartbeat({ id: 'n1', startedAt: 0, now: 100, inFlight: 0, clockOffsetMs: 0 }).then(ran('heartbeat 100')),
      store.createEndpoint(makeEndpoint('e2', 'acme', 0)).then(ran('endpoint e2')),
      store.acquireLeases({ owner: 'n1', slots: [1, 2], now: clock.now(), leaseMs: 10_000 }).then(ran('leases')),
      store.heartbeat({ id: 'n1', startedAt: 0, now: 200, inFlight: 0, clockOffsetMs: 0 }).then(ran('heartbeat 200')),
    ];
    clock.advance(50);
    expect(await stateOf(Promise.race(writes))).to.equal('pending');

    holder.exec('COMMIT');
    clock.advance(10);
    await Promise.all(writes);
    // Lease renewals and heartbeats pass the other writes, each kind in the order asked for.
    expect(done).to.deep.equal(['heartbeat 100', 'leases', 'heartbeat 200', 'release', 'endpoint e1', 'endpoint e2']);
    expect((await store.listNodes(0))[0]?.seenAt).to.equal(200);
    expect((await store.listLeases()).map((l) => l.slot)).to.deep.equal([1, 2]);
    expect((await store.listEndpoints()).map((e) => e.id)).to.deep.equal(['e1', 'e2']);
  });

  it('fails a write with a StoreError naming the operation once it has waited busyTimeoutMs, and nothing is written', async () => {
    const heartbeat = store.heartbeat({ id: 'n1', startedAt: 0, now: 0, inFlight: 0, clockOffsetMs: 0 });
    const outcome = heartbeat.then(
      () => undefined,
      (error: unknown) => error,
    );
    clock.advance(4_990);
    expect(await stateOf(heartbeat)).to.equal('pending');
    clock.advance(20);
    const error = await outcome;
    expect(isHeraldError(error) && error.code).to.equal(ErrorCode.STORE);
    expect((error as Error).message).to.contain('heartbeat').and.contain('locked').and.contain('busyTimeoutMs');

    holder.exec('COMMIT');
    expect(await store.listNodes(0)).to.deep.equal([]);
  });

  it('counts a lease renewal that waited for the lock from the moment it got the lock', async () => {
    const now = clock.now();
    const renewal = store.acquireLeases({ owner: 'n1', slots: [3], now, leaseMs: 10_000 });
    clock.advance(3_000);
    holder.exec('COMMIT');
    clock.advance(10);
    const [lease] = await renewal;
    expect(lease?.until).to.equal(now + 3_010 + 10_000);
  });

  it('opens meanwhile: a process starting while a producer holds the lock waits for it on the clock', async () => {
    const starting = new SqliteStore({ path: join(dir, 'herald.db'), clock, blockingWaitMs: 5, lockRetryIntervalMs: 10 });
    try {
      const init = starting.init({ slotCount: 16 });
      expect(await stateOf(init)).to.equal('pending');
      holder.exec('COMMIT');
      clock.advance(10);
      expect(await init).to.deep.equal({ slotCount: 16 });
    } finally {
      await starting.close();
    }
  });

  it('fails the writes still waiting when the store closes', async () => {
    const heartbeat = store.heartbeat({ id: 'n1', startedAt: 0, now: 0, inFlight: 0, clockOffsetMs: 0 }).then(
      () => undefined,
      (error: unknown) => error,
    );
    await store.close();
    const error = await heartbeat;
    expect(isHeraldError(error) && error.code).to.equal(ErrorCode.CLOSED);
  });
});
