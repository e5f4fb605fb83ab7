/**
 * The behaviour every Store adapter must show, whatever it is built on. An
 * adapter's spec calls {@link describeStoreConformance} with a function that
 * opens a fresh, empty store on a ManualClock; the suite calls `init()` itself.
 *
 * One file per concern of the Store port, run in this order; what they share
 * (constants, builders, the running test's store) is in `fixtures.ts`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../../lib/clock.ts';
import type { Store } from '../../../lib/store/port.ts';
import { describeClaimDue, describeClaimForEndpoints } from './claims.ts';
import { describeDeadLettersAndReplay, describeReplayJobs } from './dead-letters.ts';
import { describeDeliveryLog } from './delivery-log.ts';
import { describeDeliveryMinutes } from './delivery-minutes.ts';
import { describeEndpointChanges, describeEndpoints, describeResumeDeliveries } from './endpoints.ts';
import { describeEventTypes } from './event-types.ts';
import { describeFailureGroups } from './failure-groups.ts';
import { describeFifoEndpoints } from './fifo-endpoints.ts';
import { ConformanceSuite, type StoreHarness } from './fixtures.ts';
import { describeFileStoreLifecycle, describeInit } from './lifecycle.ts';
import { describeLeases, describeMembership, describeSlotWeights } from './nodes-and-leases.ts';
import { describePublishAndFanOut } from './publish-and-fan-out.ts';
import { describePurge } from './purge.ts';
import { describeSettle } from './settle.ts';
import { describeTenantTokens } from './tenant-tokens.ts';

export { makeEndpoint, type StoreHarness } from './fixtures.ts';

/**
 * The suite against a store on a file of its own in a fresh temp folder (removed afterwards).
 * `startAt`: the clock's first reading (a store that reads the system clock needs the real time).
 */
export function describeFileStoreConformance(
  name: string,
  open: (path: string, clock: ManualClock) => Store & { close(): Promise<void> },
  startAt = 0,
): void {
  describeFileStoreLifecycle(name, open, startAt);

  describeStoreConformance(name, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-store-'));
    const clock = new ManualClock(startAt);
    const store = open(join(dir, 'herald.db'), clock);
    return {
      store,
      clock,
      async close() {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  });
}

export function describeStoreConformance(name: string, open: () => Promise<StoreHarness>): void {
  describe(`Store conformance: ${name}`, () => {
    const suite = new ConformanceSuite(open);
    beforeEach(() => suite.openStore());
    afterEach(() => suite.closeStore());

    describeInit(suite);
    describeEndpoints(suite);
    describeEndpointChanges(suite);
    describeResumeDeliveries(suite);
    describePublishAndFanOut(suite);
    describeMembership(suite);
    describeLeases(suite);
    describeSlotWeights(suite);
    describeClaimDue(suite);
    describeClaimForEndpoints(suite);
    describeSettle(suite);
    describeFifoEndpoints(suite);
    describeReplayJobs(suite);
    describeDeadLettersAndReplay(suite);
    describeFailureGroups(suite);
    describeDeliveryLog(suite);
    describeTenantTokens(suite);
    describeEventTypes(suite);
    describeDeliveryMinutes(suite);
    describePurge(suite);
  });
}
