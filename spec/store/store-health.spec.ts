import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { ConflictError, StoreError } from '../../lib/errors.ts';
import type { Store } from '../../lib/store/port.ts';
import { StoreHealth } from '../../lib/store/store-health.ts';

/** A store whose calls answer when the test says so. */
function scriptedStore(): { store: Store; answer(value?: unknown): void; fail(error: unknown): void; calls: string[] } {
  const waiting: Array<{ resolve(value: unknown): void; reject(error: unknown): void }> = [];
  const calls: string[] = [];
  const pending = (name: string) => () => {
    calls.push(name);
    return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  };
  const store = {
    init: pending('init'),
    close: pending('close'),
    watch: () => () => undefined,
    heartbeat: pending('heartbeat'),
    appendEvents: pending('appendEvents'),
    countDeliveries: pending('countDeliveries'),
  } as unknown as Store;
  return {
    store,
    calls,
    answer: (value) => waiting.shift()?.resolve(value),
    fail: (error) => waiting.shift()?.reject(error),
  };
}

describe('StoreHealth', () => {
  let clock: ManualClock;
  let health: StoreHealth;

  beforeEach(() => {
    clock = new ManualClock();
    health = new StoreHealth({ clock, stallMs: 2_000, failureHoldMs: 5_000 });
  });

  it('passes calls, results and errors through unchanged', async () => {
    const scripted = scriptedStore();
    const store = health.monitor(scripted.store);
    const counted = store.countDeliveries();
    scripted.answer({ pending: 3 });
    expect(await counted).to.deep.equal({ pending: 3 });
    const conflict = new ConflictError('endpoint exists');
    const appended = store.appendEvents([]);
    scripted.fail(conflict);
    expect(await appended.catch((e: unknown) => e)).to.equal(conflict);
    expect(scripted.calls).to.deep.equal(['countDeliveries', 'appendEvents']);
  });

  context('when a call waits', () => {
    it('is available until the call has waited stallMs, then names the call, and is available again once it answers', async () => {
      const scripted = scriptedStore();
      const store = health.monitor(scripted.store);
      const beat = store.heartbeat({ id: 'n', startedAt: 0, now: 0, inFlight: 0, clockOffsetMs: 0 });
      clock.advance(1_999);
      expect(health.availability).to.deep.equal({ available: true });
      clock.advance(1);
      expect(health.availability).to.deep.equal({
        available: false,
        since: clock.now(),
        reason: 'store call heartbeat has been waiting for 2 s',
      });
      scripted.answer();
      await beat;
      expect(health.availability).to.deep.equal({ available: true });
    });

    it('does not watch lifecycle calls (init can take long on a first start)', () => {
      const scripted = scriptedStore();
      void health.monitor(scripted.store).init({ slotCount: 4 });
      clock.advance(60_000);
      expect(health.availability).to.deep.equal({ available: true });
    });
  });

  context('when a call fails with a StoreError (a full disk)', () => {
    it('is unavailable for failureHoldMs after the failure, even while other calls succeed', async () => {
      const scripted = scriptedStore();
      const store = health.monitor(scripted.store);
      const appended = store.appendEvents([]).catch(() => undefined);
      scripted.fail(new StoreError('sqlite: appendEvents failed: database or disk is full'));
      await appended;
      const failedAt = clock.now();
      const beat = store.heartbeat({ id: 'n', startedAt: 0, now: 0, inFlight: 0, clockOffsetMs: 0 });
      scripted.answer();
      await beat;
      expect(health.availability).to.deep.equal({
        available: false,
        since: failedAt,
        reason: 'store call appendEvents failed: sqlite: appendEvents failed: database or disk is full',
      });
      clock.advance(4_999);
      expect(health.availability.available).to.equal(false);
      clock.advance(1);
      expect(health.availability).to.deep.equal({ available: true });
    });

    it('ignores errors that are the store working (a conflict)', async () => {
      const scripted = scriptedStore();
      const appended = health.monitor(scripted.store).appendEvents([]).catch(() => undefined);
      scripted.fail(new ConflictError('exists'));
      await appended;
      expect(health.availability).to.deep.equal({ available: true });
    });
  });

  it('refuses options that are not positive integers, naming them', () => {
    expect(() => new StoreHealth({ clock, stallMs: 0 })).to.throw(/stallMs/);
    expect(() => new StoreHealth({ clock, failureHoldMs: 1.5 })).to.throw(/failureHoldMs/);
  });
});
