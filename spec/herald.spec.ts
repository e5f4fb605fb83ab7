import { expect } from 'chai';
import { ErrorCode, NotFoundError } from '../lib/errors.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from './support/harness.ts';

describe('Herald (library operations)', () => {
  let t: TestHerald;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
  });

  context('when a list of events names an unknown tenant', () => {
    it('names the item in the field and stores none of the list', async () => {
      t = await startHerald({}, { start: false });
      await t.herald.createEndpoint({ tenantId: 'acme', url: 'http://127.0.0.1:9/' });
      const error = await t.herald
        .publish([
          { tenantId: 'acme', type: 'a.b', payload: {} },
          { tenantId: 'nobody', type: 'a.b', payload: {} },
        ])
        .then(() => undefined, (e: unknown) => e);
      expect(error).to.be.instanceOf(NotFoundError);
      expect((error as NotFoundError).field).to.equal('[1].tenantId');
      expect(await t.herald.store.unfannedEvents(10)).to.deep.equal([]);
    });
  });

  context('when the same dead letter is replayed twice at once', () => {
    it('replays it once and refuses the other with a conflict', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 410 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t, 1);
      const [letter] = await t.herald.listDeadLetters({});
      const results = await Promise.allSettled([t.herald.replayDeadLetter(letter?.id ?? ''), t.herald.replayDeadLetter(letter?.id ?? '')]);
      expect(results.map((r) => r.status).sort()).to.deep.equal(['fulfilled', 'rejected']);
      const rejected = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect((rejected.reason as { code: string }).code).to.equal(ErrorCode.CONFLICT);
    });
  });

  context('when an endpoint has been idle for engine.actorIdleMs', () => {
    it('evicts its actor, and a new event brings one back', async () => {
      t = await startHerald({ engine: { actorIdleMs: 60_000 } });
      sink = await startServer(() => ({ status: 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t, 1);
      expect((await t.herald.status()).actors.map((a) => a.endpointId)).to.deep.equal([endpoint.id]);

      t.clock.advance(30_000);
      await t.herald.idle();
      expect((await t.herald.status()).actors, 'not idle long enough yet').to.have.length(1);
      t.clock.advance(30_000);
      await t.herald.idle();
      expect((await t.herald.status()).actors).to.deep.equal([]);

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t, 2);
      expect((await t.herald.status()).actors).to.have.length(1);
    });
  });
});
