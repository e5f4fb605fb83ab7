import { expect } from 'chai';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

describe('Tenant-fair scheduling (engine)', () => {
  let t: TestHerald;
  let server: TestServer | undefined;

  afterEach(async () => {
    await server?.close();
    server = undefined;
    await t?.close();
  });

  context('when a tenant with many endpoints has a backlog beyond the mailboxes and another tenant publishes one event', () => {
    it('hands the quiet tenant\'s event to its actor in the pump after its publish, and attempts it within W grants', async () => {
      const weightA = 3;
      // maxInFlight 4: a mailbox budget of 16, filled by 8 of acme's 20 endpoints (concurrency 1 holds 2).
      t = await startHerald({ delivery: { maxInFlight: 4, tenantWeights: { acme: weightA } } }, { start: false });
      server = await startServer((request) => (request.path.startsWith('/a/') ? 'hold' : { status: 200 }));
      const aIds: string[] = [];
      for (let i = 0; i < 20; i++) aIds.push((await t.herald.createEndpoint({ tenantId: 'acme', url: `${server.url}/a/${i}`, concurrency: 1 })).endpoint.id);
      await t.herald.publish(Array.from({ length: 300 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', endpointId: aIds[n % 20]!, payload: { n } })));
      await t.herald.start();
      await server.requests(4);
      await t.herald.idle();
      expect(await t.herald.store.countUnfannedEvents(1_000)).to.equal(300 - 16);

      // Published after acme's 284 waiting events: in event order it would wait for all of them.
      await t.herald.createEndpoint({ tenantId: 'beta', url: `${server.url}/b`, concurrency: 1 });
      await t.herald.publish({ tenantId: 'beta', type: 'a.b', payload: { quiet: true } });
      await t.herald.idle();
      // No time passed and no acme attempt finished: one pump fanned it out past the backlog and claimed it.
      expect(await t.herald.store.countDeliveries()).to.include({ in_flight: 17, pending: 0 });
      expect(await t.herald.store.countUnfannedEvents(1_000)).to.equal(300 - 16);

      // Every permit is held by acme; each one freed is one grant. At most W (acme's weight) go to
      // acme before beta's: the last grant counted here is beta's own.
      let grants = 0;
      while (!server.received.some((r) => r.path === '/b')) {
        expect(grants, 'grants to acme before beta\'s').to.be.at.most(weightA);
        const held = server.held.shift();
        if (held === undefined) throw new Error('no acme request left to release');
        const seen = server.received.length;
        held.respond(200);
        await server.requests(seen + 1);
        grants += 1;
      }
      expect(grants - 1, 'grants to acme before beta\'s').to.be.within(0, weightA);
      const [beta] = await attemptsSeen(t, 1, (a) => a.tenantId === 'beta');
      expect(beta?.settlement.kind).to.equal('delivered');
    });
  });
});
