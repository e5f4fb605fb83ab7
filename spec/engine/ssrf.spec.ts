import { expect } from 'chai';
import { createAddressGuard } from '../../lib/delivery/address-guard.ts';
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

    it('refuses the IPv4-compatible form of loopback, http://[::127.0.0.1]/, before connecting', async () => {
      // ::127.0.0.1 is ::7f00:1, not loopback: with a broken guard the kernel would send it to the
      // IPv6 default route. Check the classifier first so that a broken one fails here, sending nothing.
      t = await startHerald({ allowNetworks: [] });
      sink = await startServer(() => ({ status: 200 }));
      expect(createAddressGuard([]).isAllowed('::7f00:1'), 'the guard refuses ::7f00:1').to.equal(false);
      await t.herald.createEndpoint({ tenantId: 'acme', url: `http://[::127.0.0.1]:${sink.port}/compat` });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });

      const [attempt] = await attemptsSeen(t, 1);
      expect(attempt?.outcome).to.include({ kind: 'blocked', address: '::7f00:1' });
      expect(attempt?.settlement.kind).to.equal('dead');
      expect(sink.received).to.have.length(0);
    });
  });
});
