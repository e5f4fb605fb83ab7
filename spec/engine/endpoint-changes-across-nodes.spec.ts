import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

/**
 * Two nodes on one SQLite file, in one process, each on its own manual clock: B holds every slot
 * (it started first and its leases never lapse by A's clock), and A is only the node an operator
 * talks to. What is changed through A must reach B's running actor at B's next sync interval.
 */
/** Polls `read` on the event loop (no clock involved) until it answers something, at most 2 000 turns. */
async function until<T>(read: () => Promise<T | undefined>): Promise<T> {
  for (let turn = 0; turn < 2_000; turn++) {
    const value = await read();
    if (value !== undefined) return value;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error('the condition never held');
}

describe('Endpoint changes across nodes (two Heralds on one SQLite file)', () => {
  let b: TestHerald;
  let a: TestHerald;
  const servers: TestServer[] = [];

  async function server(): Promise<TestServer> {
    const s = await startServer(() => ({ status: 200 }));
    servers.push(s);
    return s;
  }

  /** Lets B's catch-up, started by its clock, run to its end (it runs on promises and the store). */
  async function syncB(): Promise<void> {
    b.clock.advance(b.herald.config.engine.endpointSyncIntervalMs);
    for (let i = 0; i < 50; i++) await new Promise((resolve) => setImmediate(resolve));
  }

  beforeEach(async () => {
    b = await startHerald({ engine: { storeThread: false } });
    a = await startHerald({ engine: { storeThread: false } }, { dir: b.dir });
  });

  afterEach(async () => {
    await a.close();
    await b.close();
    for (const s of servers.splice(0)) await s.close();
  });

  context("when the URL of an endpoint B is delivering to is changed through A", () => {
    it('B sends every later attempt to the new URL', async () => {
      const before = await server();
      const after = await server();
      const { endpoint } = await b.herald.createEndpoint({ tenantId: 'acme', url: `${before.url}/old` });
      await b.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
      await before.requests(1);
      await attemptsSeen(b, 1);

      await a.herald.updateEndpoint(endpoint.id, { url: `${after.url}/new` });
      await syncB();
      await b.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 2 } });
      const [moved] = await after.requests(1);
      expect(moved?.path).to.equal('/new');
      expect(JSON.parse(moved?.body ?? '')).to.deep.equal({ n: 2 });
      expect(before.received).to.have.length(1);
    });
  });

  context('when the secret of an endpoint B is delivering to is rotated through A', () => {
    it("B's later requests verify with the new secret", async () => {
      const sink = await server();
      const { endpoint, secret: oldSecret } = await b.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await b.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
      await attemptsSeen(b, 1);

      const { secret: newSecret } = await a.herald.rotateSecret(endpoint.id);
      await syncB();
      await b.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 2 } });
      const second = (await sink.requests(2))[1];
      const headers = second?.headers as Record<string, string>;
      expect(() => new Webhook(newSecret).verify(second?.body ?? '', headers)).to.not.throw();
      // Both sign during the rotation's overlap, so a consumer still on the old one is not cut off.
      expect(() => new Webhook(oldSecret).verify(second?.body ?? '', headers)).to.not.throw();
    });
  });

  context('when an endpoint B is delivering to is disabled, then deleted, through A', () => {
    it('B stops sending to it, and closes its actor once it is deleted', async () => {
      const sink = await server();
      const { endpoint } = await b.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await b.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
      await attemptsSeen(b, 1);

      await a.herald.disableEndpoint(endpoint.id);
      await syncB();
      const [second] = await b.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 2 } });
      // B fanned it out without claiming it: it waits, pending, as a disabled endpoint's deliveries do.
      const waiting = await until(async () => (await b.herald.listDeliveries({ endpointId: endpoint.id })).find((d) => d.eventId === second?.id));
      expect(waiting.status).to.equal('pending');
      expect(waiting.attempts).to.equal(0);
      expect(sink.received).to.have.length(1);
      expect((await b.herald.status()).actors.map((actor) => actor.endpointId)).to.include(endpoint.id);

      await a.herald.deleteEndpoint(endpoint.id);
      await syncB();
      expect((await b.herald.status()).actors.map((actor) => actor.endpointId)).to.not.include(endpoint.id);
    });
  });
});
