import { expect } from 'chai';
import type { OutboxEvent } from '../../lib/model.ts';
import type { Store } from '../../lib/store/port.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

/** Records each read of the outbox past busy tenants (`exceptTenantIds` given): its limit and how many it returned. */
function spyOnQuietReads(store: Store): Array<{ limit: number; returned: number }> {
  const reads: Array<{ limit: number; returned: number }> = [];
  const unfannedEvents = store.unfannedEvents.bind(store);
  store.unfannedEvents = async (limit: number, exceptTenantIds?: readonly string[]): Promise<OutboxEvent[]> => {
    const events = await unfannedEvents(limit, exceptTenantIds);
    if (exceptTenantIds !== undefined) reads.push({ limit, returned: events.length });
    return events;
  };
  return reads;
}

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

  context('when a quiet tenant publishes while a pump fans out a busy tenant\'s events in batches', () => {
    it('reads the quiet tenant\'s event at the end of the batch under way, before the busy tenant\'s next batch', async () => {
      // maxInFlight 64: a mailbox budget of 256, which 40 endpoints of concurrency 4 (8 each) can fill.
      t = await startHerald({ delivery: { maxInFlight: 64 } }, { start: false });
      server = await startServer(() => 'hold');
      const aIds: string[] = [];
      for (let i = 0; i < 40; i++) aIds.push((await t.herald.createEndpoint({ tenantId: 'acme', url: `${server.url}/a/${i}` })).endpoint.id);
      await t.herald.publish(Array.from({ length: 300 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', endpointId: aIds[n % 40]!, payload: { n } })));
      await t.herald.createEndpoint({ tenantId: 'beta', url: `${server.url}/b` });
      const { store } = t.herald;
      const reads: string[] = [];
      const unfannedEvents = store.unfannedEvents.bind(store);
      store.unfannedEvents = async (limit, exceptTenantIds) => {
        const events = await unfannedEvents(limit, exceptTenantIds);
        reads.push(`${exceptTenantIds === undefined ? 'outbox' : 'past busy'}: ${[...new Set(events.map((e) => e.tenantId))].join(',')}`);
        return events;
      };
      const recordFanOuts = store.recordFanOuts.bind(store);
      let published = false;
      store.recordFanOuts = async (fanOuts, now, claim) => {
        const claimed = await recordFanOuts(fanOuts, now, claim);
        if (!published) {
          // During the first batch of acme's fan-out: beta publishes.
          published = true;
          await t.herald.publish({ tenantId: 'beta', type: 'a.b', payload: { quiet: true } });
        }
        return claimed;
      };
      await t.herald.start();
      await t.herald.idle();
      // In event order, acme's other two batches (100 and 56 events) would come first.
      expect(reads.slice(0, 2)).to.deep.equal(['outbox: acme', 'past busy: beta']);
      expect(reads.filter((read) => read === 'outbox: acme')).to.have.length(3);
      expect(await t.herald.store.countDeliveries()).to.include({ in_flight: 256, pending: 0 });
    });
  });

  /**
   * acme fills the mailbox budget (maxInFlight 2: 8 deliveries, 4 endpoints of concurrency 1) with
   * a backlog left in the outbox, every request held: nothing finishes and no time passes, so only
   * the publish's own pump fans out.
   */
  async function busyAcme(): Promise<void> {
    t = await startHerald({ delivery: { maxInFlight: 2 } }, { start: false });
    server = await startServer(() => 'hold');
    const aIds: string[] = [];
    for (let i = 0; i < 4; i++) aIds.push((await t.herald.createEndpoint({ tenantId: 'acme', url: `${server.url}/a/${i}`, concurrency: 1 })).endpoint.id);
    await t.herald.publish(Array.from({ length: 40 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', endpointId: aIds[n % 4]!, payload: { n } })));
    await t.herald.start();
    await server.requests(2);
    await t.herald.idle();
    expect(await t.herald.store.countDeliveries()).to.include({ in_flight: 8, pending: 0 });
  }

  context('when a quiet tenant\'s event has more deliveries than the reserve beyond the full mailboxes', () => {
    it('claims 100 of them past the budget and writes the rest pending', async () => {
      await busyAcme();
      for (let i = 0; i < 150; i++) await t.herald.createEndpoint({ tenantId: 'beta', url: `${server!.url}/b/${i}`, concurrency: 1 });
      await t.herald.publish({ tenantId: 'beta', type: 'a.b', payload: { wide: true } });
      await t.herald.idle();
      // The budget (8) is full: the reserve of 100 is all beta's event may take in the mailboxes.
      expect(await t.herald.store.countDeliveries()).to.include({ in_flight: 8 + 100, pending: 50 });
      expect(await t.herald.store.countUnfannedEvents(1_000)).to.equal(40 - 8);
    });
  });

  context('when more quiet tenants publish at once than one pump reads', () => {
    it('fans out at most 100 of their events per pump, and claims no more than the reserve', async () => {
      await busyAcme();
      const reads = spyOnQuietReads(t.herald.store);
      for (let i = 0; i < 150; i++) await t.herald.createEndpoint({ tenantId: `quiet-${i}`, url: `${server!.url}/q/${i}`, concurrency: 1 });
      await t.herald.publish(Array.from({ length: 150 }, (_, i) => ({ tenantId: `quiet-${i}`, type: 'a.b', payload: { i } })));
      await t.herald.idle();
      expect(reads.length, 'reads past the busy tenants').to.be.at.least(1);
      for (const read of reads) {
        expect(read.limit, 'events read per pump').to.equal(100);
        expect(read.returned).to.be.at.most(100);
      }
      // The first pump took 100 of the 150, claimed within the reserve; a later one (if the store's
      // change signal asked for one) finds the reserve used and writes the rest pending.
      expect(reads[0]!.returned).to.equal(100);
      const counts = await t.herald.store.countDeliveries();
      expect(counts).to.include({ in_flight: 8 + 100 });
      expect((counts.pending ?? 0) + (await t.herald.store.countUnfannedEvents(1_000)) - (40 - 8)).to.equal(50);
    });
  });
});
