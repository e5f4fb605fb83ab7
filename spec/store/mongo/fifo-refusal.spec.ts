/**
 * The MongoDB store's claims lack the FIFO rule, so it refuses the setting rather than ignore it:
 * checked before any server is reached, so this runs without mongod.
 */
import { expect } from 'chai';
import { ManualClock } from '../../../lib/clock.ts';
import { ErrorCode, isHeraldError } from '../../../lib/errors.ts';
import { MongoStore } from '../../../lib/store/mongo/mongo-store.ts';
import { makeEndpoint } from '../conformance.ts';

describe('MongoStore and FIFO endpoints', () => {
  const clock = new ManualClock();
  const store = new MongoStore({ uri: 'mongodb://127.0.0.1:1/herald?replicaSet=rs0', clock });

  for (const [what, write] of [
    ['created', () => store.createEndpoint(makeEndpoint('ep_1', 'acme', clock.now(), { ordering: 'fifo' }))],
    ['patched', () => store.updateEndpoint('ep_1', { ordering: 'fifo' }, clock.now())],
  ] as const) {
    it(`refuses a FIFO endpoint ${what} with HERALD_INVALID_INPUT naming ordering`, async () => {
      const error: unknown = await write().then(() => undefined, (e: unknown) => e);
      expect(isHeraldError(error) && error.code).to.equal(ErrorCode.INVALID_INPUT);
      expect((error as Error).message).to.equal("ordering: 'fifo' is not supported by the MongoDB store yet (use SQLite or PostgreSQL)");
    });
  }
});
