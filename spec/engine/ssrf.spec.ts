import { expect } from 'chai';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

describe('SSRF guard (engine)', () => {
  let t: TestHerald;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
  });

  context('when loopback is not allowlisted', () => {
    it('refuses the address, records a non-retryable error and dead-letters the delivery; nothing reaches the server', async () => {
      t = await startHerald({ allowNetworks: [] });
      sink = await startServer(() => ({ status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.createEndpoint({ tenantId: 'acme', url: `http://localhost:${sink.port}/by-name` });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });

      const attempts = await attemptsSeen(t, 2);
      for (const attempt of attempts) {
        expect(attempt.outcome.kind).to.equal('blocked');
        expect(attempt.settlement.kind).to.equal('dead');
      }
      expect(sink.received).to.have.length(0);
      const letters = await t.herald.listDeadLetters({});
      expect(letters.map((l) => l.reason).every((r) => r.startsWith('permanent: blocked'))).to.equal(true);
    });
  });
});
