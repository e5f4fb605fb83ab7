import { expect } from 'chai';
import { ErrorCode } from '../../lib/errors.ts';
import { SettleBatcher } from '../../lib/engine/settle-batcher.ts';
import type { SettleResult, Settlement } from '../../lib/store/port.ts';

const release = (deliveryId: string, epoch = 1): Settlement => ({ kind: 'release', deliveryId, epoch, nextAttemptAt: 0 });

/** A fake store.settle that records each call; ids in `fenced` are refused. */
function fakeStore(options: { fenced?: readonly string[]; fail?: Error } = {}) {
  const calls: Array<{ ids: string[]; now: number }> = [];
  return {
    calls,
    settle: async (settlements: readonly Settlement[], now: number): Promise<SettleResult> => {
      calls.push({ ids: settlements.map((s) => s.deliveryId), now });
      if (options.fail !== undefined) throw options.fail;
      const fenced = settlements.map((s) => s.deliveryId).filter((id) => options.fenced?.includes(id));
      return { applied: settlements.map((s) => s.deliveryId).filter((id) => !fenced.includes(id)), fenced };
    },
    now: () => 42,
  };
}

/** A defer the test runs by hand. */
function manualDefer() {
  const queued: Array<() => void> = [];
  return { defer: (fn: () => void) => void queued.push(fn), run: () => queued.splice(0).forEach((fn) => fn()) };
}

describe('SettleBatcher', () => {
  context('when several settlements are issued before the flush', () => {
    it('writes them in one store call, with the time read once', async () => {
      const store = fakeStore();
      const batcher = new SettleBatcher(store);
      const results = await Promise.all([batcher.settle(release('a')), batcher.settle(release('b')), batcher.settle(release('c'))]);
      expect(results).to.deep.equal([true, true, true]);
      expect(store.calls).to.deep.equal([{ ids: ['a', 'b', 'c'], now: 42 }]);
      expect(batcher.stats).to.deep.equal({ settlements: 3, flushes: 1 });
    });

    it('flushes only when its defer runs', async () => {
      const store = fakeStore();
      const manual = manualDefer();
      const batcher = new SettleBatcher(store, { defer: manual.defer });
      const a = batcher.settle(release('a'));
      const b = batcher.settle(release('b'));
      expect(store.calls).to.have.length(0);
      expect(batcher.pending).to.equal(2);
      manual.run();
      expect(await Promise.all([a, b])).to.deep.equal([true, true]);
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a', 'b']]);
    });
  });

  context('while a write is in flight', () => {
    /** A store.settle whose calls the test answers by hand. */
    function heldStore() {
      const calls: Array<{ ids: string[]; answer: () => void }> = [];
      return {
        calls,
        settle: (settlements: readonly Settlement[]): Promise<SettleResult> =>
          new Promise((resolve) => {
            const ids = settlements.map((s) => s.deliveryId);
            calls.push({ ids, answer: () => resolve({ applied: ids, fenced: [] }) });
          }),
        now: () => 42,
      };
    }

    it('gathers what settles meanwhile into one batch, written when the write returns', async () => {
      const store = heldStore();
      const manual = manualDefer();
      const batcher = new SettleBatcher(store, { defer: manual.defer });
      const a = batcher.settle(release('a'));
      manual.run();
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a']]);
      const later = ['b', 'c'].map((id) => batcher.settle(release(id)));
      manual.run();
      const last = batcher.settle(release('d'));
      manual.run();
      // Three defers ran, yet nothing more reached the store: the first write has not returned.
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a']]);
      expect(batcher.pending).to.equal(3);
      store.calls[0]!.answer();
      expect(await a).to.equal(true);
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a'], ['b', 'c', 'd']]);
      store.calls[1]!.answer();
      expect(await Promise.all([...later, last])).to.deep.equal([true, true, true]);
      expect(batcher.stats).to.deep.equal({ settlements: 4, flushes: 2 });
    });

    it('writes as many at once as maxFlushesInFlight allows', async () => {
      const store = heldStore();
      const manual = manualDefer();
      const batcher = new SettleBatcher(store, { defer: manual.defer, maxFlushesInFlight: 2 });
      const first = batcher.settle(release('a'));
      manual.run();
      const second = batcher.settle(release('b'));
      manual.run();
      const third = batcher.settle(release('c'));
      manual.run();
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a'], ['b']]);
      store.calls[1]!.answer();
      expect(await second).to.equal(true);
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a'], ['b'], ['c']]);
      store.calls[0]!.answer();
      store.calls[2]!.answer();
      expect(await Promise.all([first, third])).to.deep.equal([true, true]);
    });

    it('keeps a delivery settled twice in two writes, in order, and close() waits for both', async () => {
      const store = heldStore();
      const manual = manualDefer();
      const batcher = new SettleBatcher(store, { defer: manual.defer });
      const a1 = batcher.settle(release('a'));
      manual.run();
      const a2 = batcher.settle(release('a', 2));
      const a3 = batcher.settle(release('a', 3));
      const closed = batcher.close();
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a']]);
      store.calls[0]!.answer();
      await a1;
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a'], ['a']]);
      store.calls[1]!.answer();
      await a2;
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a'], ['a'], ['a']]);
      store.calls[2]!.answer();
      await Promise.all([a3, closed]);
    });
  });

  context('when some settlements are fenced', () => {
    it('resolves each caller with its own result', async () => {
      const store = fakeStore({ fenced: ['b'] });
      const batcher = new SettleBatcher(store);
      const results = await Promise.all(['a', 'b', 'c'].map((id) => batcher.settle(release(id))));
      expect(results).to.deep.equal([true, false, true]);
    });
  });

  context('when the batch reaches maxBatch', () => {
    it('flushes at once and starts a new batch', async () => {
      const store = fakeStore();
      const manual = manualDefer();
      const batcher = new SettleBatcher(store, { maxBatch: 2, defer: manual.defer });
      const all = ['a', 'b', 'c'].map((id) => batcher.settle(release(id)));
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a', 'b']]);
      manual.run();
      expect(await Promise.all(all)).to.deep.equal([true, true, true]);
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a', 'b'], ['c']]);
    });
  });

  context('when the same delivery is settled twice before a flush', () => {
    it('writes them in separate calls, in order', async () => {
      const store = fakeStore();
      const batcher = new SettleBatcher(store);
      await Promise.all([batcher.settle(release('a')), batcher.settle(release('b')), batcher.settle(release('a', 2))]);
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a', 'b'], ['a']]);
    });
  });

  context('when the store fails', () => {
    it('rejects every caller of that batch with the error', async () => {
      const failure = new Error('disk full');
      const batcher = new SettleBatcher(fakeStore({ fail: failure }));
      const results = await Promise.allSettled([batcher.settle(release('a')), batcher.settle(release('b'))]);
      expect(results.map((r) => (r.status === 'rejected' ? r.reason : r.value))).to.deep.equal([failure, failure]);
    });

    it('rejects when the store throws instead of rejecting', async () => {
      const batcher = new SettleBatcher({
        settle: () => {
          throw new Error('sync');
        },
        now: () => 0,
      });
      await batcher.settle(release('a')).then(
        () => expect.fail('should reject'),
        (error: Error) => expect(error.message).to.equal('sync'),
      );
    });
  });

  context('when closed', () => {
    it('flushes what is queued, waits for it, and refuses more', async () => {
      const store = fakeStore();
      const manual = manualDefer();
      const batcher = new SettleBatcher(store, { defer: manual.defer });
      const queued = batcher.settle(release('a'));
      await batcher.close();
      expect(await queued).to.equal(true);
      expect(store.calls.map((c) => c.ids)).to.deep.equal([['a']]);
      await batcher.settle(release('b')).then(
        () => expect.fail('should reject'),
        (error: { code: string }) => expect(error.code).to.equal(ErrorCode.CLOSED),
      );
    });
  });

  context('when an option is invalid', () => {
    it('names it', () => {
      expect(() => new SettleBatcher(fakeStore(), { maxBatch: 0 })).to.throw(/maxBatch/);
      expect(() => new SettleBatcher(fakeStore(), { maxFlushesInFlight: 0 })).to.throw(/maxFlushesInFlight.*≥ 1/);
    });
  });
});
