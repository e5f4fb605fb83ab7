import { expect } from 'chai';
import type { Store } from '../../lib/store/port.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

/** Counts the store's three ways of claiming and the deliveries each returned. */
function spyOnClaims(store: Store) {
  const seen = { atFanOut: 0, discoveries: 0, discovered: 0, refills: 0, refilled: 0 };
  const recordFanOuts = store.recordFanOuts.bind(store);
  const claimDue = store.claimDue.bind(store);
  const claimForEndpoints = store.claimForEndpoints.bind(store);
  store.recordFanOuts = async (fanOuts, now, claim) => {
    const claimed = await recordFanOuts(fanOuts, now, claim);
    seen.atFanOut += claimed.length;
    return claimed;
  };
  store.claimDue = async (request) => {
    const jobs = await claimDue(request);
    seen.discoveries += 1;
    seen.discovered += jobs.length;
    return jobs;
  };
  store.claimForEndpoints = async (request) => {
    const jobs = await claimForEndpoints(request);
    seen.refills += 1;
    seen.refilled += jobs.length;
    return jobs;
  };
  return seen;
}

describe('Claiming: at fan-out, by refill, by discovery (engine)', () => {
  let t: TestHerald;
  let server: TestServer | undefined;

  afterEach(async () => {
    await server?.close();
    server = undefined;
    await t?.close();
  });

  context('when an endpoint has a backlog larger than its mailbox', () => {
    it('claims what the mailbox takes at fan-out and drains the rest with refills, without discovery or any time passing', async () => {
      t = await startHerald({}, { start: false });
      server = await startServer(() => ({ status: 200 }));
      const claims = spyOnClaims(t.herald.store);
      await t.herald.createEndpoint({ tenantId: 'acme', url: server.url, concurrency: 1 });
      await t.herald.publish(Array.from({ length: 30 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await t.herald.start();

      await attemptsSeen(t, 30);
      expect(t.attempts.every((a) => a.settlement.kind === 'delivered')).to.equal(true);
      // Fan-out claims the per-endpoint share for a new actor (claimPerEndpoint, 8) as it writes
      // them; refills take the other 22, a mailbox's room at a time (concurrency 1 holds 2).
      expect(claims.atFanOut).to.equal(8);
      expect(claims.discovered).to.equal(0);
      expect(claims.refilled).to.equal(22);
      expect(claims.refills).to.be.at.least(11);
      const bodies = (await server.requests(30)).map((r) => (JSON.parse(r.body) as { n: number }).n);
      expect([...bodies].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 30 }, (_, n) => n));
    });
  });

  context('when the outbox holds more than the mailboxes have room for', () => {
    it('fans out only what they take, each delivery written in flight, and the rest as room frees', async () => {
      // maxInFlight 2: a mailbox budget of 8; four endpoints of concurrency 1 hold 2 each.
      t = await startHerald({ delivery: { maxInFlight: 2 } }, { start: false });
      let answering = false;
      server = await startServer(() => (answering ? { status: 200 } : 'hold'));
      const claims = spyOnClaims(t.herald.store);
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) ids.push((await t.herald.createEndpoint({ tenantId: 'acme', url: `${server.url}/${i}`, concurrency: 1 })).endpoint.id);
      await t.herald.publish(Array.from({ length: 40 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', endpointId: ids[n % 4]!, payload: { n } })));
      await t.herald.start();

      await server.requests(2);
      await t.herald.idle();
      // The mailboxes are full: 8 deliveries exist, every one claimed as it was written; the other
      // 32 events wait in the outbox instead of becoming pending rows to claim later.
      expect(await t.herald.store.countDeliveries()).to.include({ in_flight: 8, pending: 0 });
      expect(await t.herald.store.unfannedEvents(100)).to.have.length(32);
      expect((await t.herald.status()).unfannedEvents).to.equal(32);
      expect(claims.atFanOut).to.equal(8);

      answering = true;
      for (const held of server.held.splice(0)) held.respond(200);
      await attemptsSeen(t, 40);
      expect(t.attempts.every((a) => a.settlement.kind === 'delivered')).to.equal(true);
      expect(await t.herald.store.unfannedEvents(100)).to.have.length(0);
      const bodies = (await server.requests(40)).map((r) => (JSON.parse(r.body) as { n: number }).n);
      expect([...bodies].sort((a, b) => a - b)).to.deep.equal(Array.from({ length: 40 }, (_, n) => n));
    });
  });

  context('when an endpoint with room gets new work', () => {
    it('claims it as it is fanned out: no claim query', async () => {
      t = await startHerald();
      server = await startServer(() => ({ status: 200 }));
      const claims = spyOnClaims(t.herald.store);
      await t.herald.createEndpoint({ tenantId: 'acme', url: server.url, concurrency: 1 });
      await t.herald.publish(Array.from({ length: 5 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await attemptsSeen(t, 5);
      const before = { ...claims };

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 5 } });
      await attemptsSeen(t, 6);
      expect(claims.atFanOut - before.atFanOut).to.equal(1);
      expect(claims.discovered - before.discovered).to.equal(0);
      expect(claims.refilled - before.refilled).to.equal(0);
    });
  });

  context('when work is due that nobody announced', () => {
    it('finds it at the next sweep', async () => {
      t = await startHerald();
      server = await startServer(() => ({ status: 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: server.url });
      // Written straight into the store, as another process would: no signal in this one.
      const now = t.clock.now();
      await t.herald.store.appendEvents([{ id: 'evt_quiet', tenantId: 'acme', type: 'a.b', payload: '{}', createdAt: now, endpointId: endpoint.id, orderingKey: null }]);
      const claims = spyOnClaims(t.herald.store);
      t.clock.advance(t.herald.config.engine.sweepIntervalMs);
      await attemptsSeen(t, 1);
      expect(claims.atFanOut + claims.discovered).to.equal(1);
    });
  });
});
