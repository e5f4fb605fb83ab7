import { expect } from 'chai';
import { ObjectId } from 'mongodb';
import { CHUNK } from '../../../lib/store/mongo/collections.ts';
import { listDeadLetters, replayDeadLetters } from '../../../lib/store/mongo/dead-letters.ts';
import {
  afterKeyFilter,
  DEAD_LETTER_LIST_SORT,
  DEAD_LETTER_REPLAY_SORT,
  REPLAY_FENCE_UPDATE,
  replayFenceFilter,
} from '../../../lib/store/mongo/dead-letter-queries.ts';
import type { DeadLetterDoc } from '../../../lib/store/mongo/schema.ts';
import { FAKE_SESSION, fakeDb } from './fake-db.ts';

const NOW = 1_000_000;

function letter(i: number, endpointId = 'ep_1'): DeadLetterDoc {
  return {
    _id: `dl_${i}`, deliveryId: `dlv_${i}`, eventId: `evt_${i}`, endpointId, tenantId: 'acme', eventType: 't', payload: '{}',
    reason: 'exhausted', lastOutcome: { kind: 'timeout', timeoutMs: 1 }, round: 0, createdAt: NOW - 1_000 + i, replayedAt: null,
    triage: { state: 'new', note: null, by: null, at: NOW }, ord: new ObjectId(), at: new Date(NOW),
  };
}

describe('MongoDB dead letters', () => {
  context('when a replay races the delete of an endpoint', () => {
    it('writes to the endpoints it replays for inside its transaction, before moving any delivery, so the two conflict', async () => {
      const fake = fakeDb();
      fake.c.deadLetters.on('find', () => [letter(1), letter(2, 'ep_gone')]);
      fake.c.endpoints.on('find', () => [{ _id: 'ep_1' }]);
      expect(await replayDeadLetters(fake.db, { ids: ['dl_1', 'dl_2'] }, NOW)).to.deep.equal(['dl_1']);
      const inTransaction = fake.calls.slice(1).map((call) => `${call.collection}.${call.op}`);
      expect(inTransaction).to.deep.equal(['endpoints.find', 'endpoints.updateMany', 'deliveries.updateOne', 'deadLetters.updateOne']);
      const [fence] = fake.callsTo('endpoints', 'updateMany');
      expect(fence!.args).to.deep.equal([replayFenceFilter(['ep_1']), REPLAY_FENCE_UPDATE, { session: FAKE_SESSION }]);
    });
  });

  context('when listing after the last dead letter of a page', () => {
    it("seeks past it in the listing's order (createdAt, ord), by the ord it reads first", async () => {
      const fake = fakeDb();
      const anchor = letter(5);
      fake.c.deadLetters.on('findOne', () => ({ _id: anchor._id, ord: anchor.ord }));
      await listDeadLetters(fake.db, { endpointId: 'ep_1', after: { createdAt: anchor.createdAt, id: anchor._id } }, 2);
      const [find] = fake.callsTo('deadLetters', 'find');
      expect(fake.callsTo('deadLetters', 'findOne')[0]?.args[0]).to.deep.equal({ _id: 'dl_5' });
      expect(find!.args[0]).to.deep.include({
        endpointId: 'ep_1',
        $or: [{ createdAt: { $lt: anchor.createdAt } }, { createdAt: anchor.createdAt, ord: { $lt: anchor.ord } }],
      });
      expect(find!.args[2]).to.deep.equal({ sort: DEAD_LETTER_LIST_SORT, limit: 2 });
    });

    it('lists the older ones only when that dead letter is gone (purged)', async () => {
      const fake = fakeDb();
      await listDeadLetters(fake.db, { after: { createdAt: NOW, id: 'dl_gone' } }, 2);
      expect(fake.callsTo('deadLetters', 'find')[0]!.args[0]).to.deep.include({ $or: [{ createdAt: { $lt: NOW } }] });
    });
  });

  context('when replaying by filter', () => {
    it('pages oldest first in the listing\'s order reversed, keyed on (createdAt, ord)', async () => {
      const fake = fakeDb();
      const page = Array.from({ length: CHUNK }, (_, i) => letter(i));
      let pages = 0;
      fake.c.deadLetters.on('find', () => (pages++ === 0 ? page : []));
      await replayDeadLetters(fake.db, { endpointId: 'ep_1' }, NOW);
      const finds = fake.callsTo('deadLetters', 'find');
      expect(finds).to.have.length(2);
      expect(finds[0]!.args[2]).to.deep.equal({ sort: DEAD_LETTER_REPLAY_SORT, limit: CHUNK });
      const last = page.at(-1)!;
      expect((finds[1]!.args[0] as { $and: unknown[] }).$and[1]).to.deep.equal(afterKeyFilter({ createdAt: last.createdAt, ord: last.ord }));
    });
  });
});
