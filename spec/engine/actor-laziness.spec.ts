import { expect } from 'chai';
import { BreakerFamily } from '../../lib/engine/breaker.ts';
import { Ticker } from '../../lib/engine/ticker.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

/** Counts the circuits and timer wheels the engine makes, by wrapping the two methods that make them. */
function countMade() {
  const made = { circuits: 0, wheels: 0 };
  const createCircuit = BreakerFamily.prototype.createCircuit;
  const createWheel = Ticker.prototype.createWheel;
  BreakerFamily.prototype.createCircuit = function (this: BreakerFamily) {
    made.circuits += 1;
    return createCircuit.call(this);
  };
  Ticker.prototype.createWheel = function (this: Ticker, ...args: Parameters<Ticker['createWheel']>) {
    made.wheels += 1;
    return createWheel.apply(this, args);
  } as Ticker['createWheel'];
  const restore = (): void => {
    BreakerFamily.prototype.createCircuit = createCircuit;
    Ticker.prototype.createWheel = createWheel;
  };
  return { made, restore };
}

describe('Actors made light (engine)', () => {
  let t: TestHerald | undefined;
  let server: TestServer | undefined;
  let restore: (() => void) | undefined;

  afterEach(async () => {
    restore?.();
    await server?.close();
    await t?.close();
    server = undefined;
    t = undefined;
  });

  context('when an endpoint only succeeds', () => {
    it('delivers without ever making its actor a circuit breaker or a timer wheel', async () => {
      const counting = countMade();
      restore = counting.restore;
      t = await startHerald();
      server = await startServer(() => ({ status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: server.url });
      await t.herald.publish(Array.from({ length: 20 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      const attempts = await attemptsSeen(t, 20);
      expect(attempts.every((a) => a.settlement.kind === 'delivered')).to.equal(true);
      expect(counting.made).to.deep.equal({ circuits: 0, wheels: 0 });
      expect((await t.herald.status()).actors.map((a) => a.breaker)).to.deep.equal(['closed']);
    });
  });

  context('when an endpoint fails once, then is evicted when idle', () => {
    it('makes a circuit and a wheel at the failure, and its next actor starts without either', async () => {
      const counting = countMade();
      restore = counting.restore;
      t = await startHerald({ engine: { actorIdleMs: 60_000 } });
      server = await startServer((_, index) => (index === 0 ? { status: 500 } : { status: 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: server.url });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      const [failed] = await attemptsSeen(t, 1);
      expect(failed?.settlement.kind).to.equal('retry');
      expect(counting.made, 'the breaker counts the failure; the retry needs a wake-up').to.deep.equal({ circuits: 1, wheels: 1 });

      t.clock.advanceTo(failed?.settlement.kind === 'retry' ? failed.settlement.nextAttemptAt : 0);
      const [, retried] = await attemptsSeen(t, 2);
      expect(retried?.settlement.kind).to.equal('delivered');
      t.clock.advance(60_000);
      await t.herald.idle();
      expect((await t.herald.status()).actors, 'evicted').to.deep.equal([]);

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      const [, , again] = await attemptsSeen(t, 3);
      expect(again?.settlement.kind).to.equal('delivered');
      expect((await t.herald.status()).actors.map((a) => [a.endpointId, a.breaker])).to.deep.equal([[endpoint.id, 'closed']]);
      expect(counting.made, 'nothing more made for the new actor').to.deep.equal({ circuits: 1, wheels: 1 });
    });
  });
});
