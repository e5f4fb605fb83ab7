/**
 * The store's lifecycle: no call before `init()` or after `close()`, and a store started again
 * keeps the slot count of its first start.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { ManualClock } from '../../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../../lib/errors.ts';
import type { Store } from '../../../lib/store/port.ts';
import { SLOTS, type ConformanceSuite } from './fixtures.ts';

/** Against a store on a file of its own, opened here: the suite's stores are always initialised. */
export function describeFileStoreLifecycle(
  name: string,
  open: (path: string, clock: ManualClock) => Store & { close(): Promise<void> },
  startAt: number,
): void {
  describe(`Store lifecycle: ${name}`, () => {
    it('rejects a call before init() with HERALD_STORE and after close() with HERALD_CLOSED', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'herald-store-'));
      try {
        const store = open(join(dir, 'herald.db'), new ManualClock(startAt));
        const early = await store.getEndpoint('ep_1').catch((e: unknown) => e);
        expect(isHeraldError(early) && early.code).to.equal(ErrorCode.STORE);
        await store.init({ slotCount: SLOTS });
        await store.close();
        const late = await store.getEndpoint('ep_1').catch((e: unknown) => e);
        expect(isHeraldError(late) && late.code).to.equal(ErrorCode.CLOSED);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}

export function describeInit(suite: ConformanceSuite): void {
  describe('init', () => {
    let store: Store;
    beforeEach(() => {
      store = suite.store;
    });

    context('when started again with another slot count', () => {
      it('keeps the slot count of the first start', async () => {
        expect(await store.init({ slotCount: SLOTS })).to.deep.equal({ slotCount: SLOTS });
        expect(await store.init({ slotCount: 1024 })).to.deep.equal({ slotCount: SLOTS });
      });
    });
  });
}
