import { expect } from 'chai';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

/**
 * Answers the first `count` held requests with `status`, then waits for their attempts to be
 * recorded and for the requests that this lets start (`expectReceived` in all) to arrive.
 */
async function answer(t: TestHerald, sink: TestServer, count: number, status: number, expectReceived: number): Promise<void> {
  const seen = t.attempts.length;
  for (const held of sink.held.splice(0, count)) held.respond(status);
  await attemptsSeen(t, seen + count);
  await sink.requests(expectReceived);
  await t.herald.idle();
}

/** What the sink and the endpoint's actor show now: requests held at the sink, running, and the limit. */
async function inFlight(t: TestHerald, sink: TestServer, endpointId: string): Promise<{ held: number; running: number; limit: number }> {
  const actor = (await t.herald.status()).actors.find((a) => a.endpointId === endpointId);
  return { held: sink.held.length, running: actor?.running ?? -1, limit: actor?.concurrencyLimit ?? -1 };
}

describe('Adaptive concurrency per endpoint (engine, end to end on SQLite)', () => {
  let t: TestHerald | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
    t = undefined;
  });

  const events = (n: number): Array<{ tenantId: string; type: string; payload: { n: number } }> =>
    Array.from({ length: n }, (_, i) => ({ tenantId: 'acme', type: 'a.b', payload: { n: i } }));

  context('when an adaptive endpoint has a backlog', () => {
    it('sends as many requests at once as its limit: doubling on fast 2xx up to its concurrency, halving on a 503 and on a slow answer', async () => {
      t = await startHerald();
      sink = await startServer(() => 'hold');
      // Retries an hour away: the 503'd delivery does not come back during the test.
      const { endpoint } = await t.herald.createEndpoint({
        tenantId: 'acme',
        url: sink.url,
        concurrency: 8,
        adaptiveConcurrency: { initial: 2, targetLatencyMs: 1_000 },
        retry: { schedule: ['PT1H'] },
      });
      expect(endpoint.adaptiveConcurrency).to.deep.equal({ initial: 2, targetLatencyMs: 1_000 });
      await t.herald.publish(events(60));

      await sink.requests(2);
      await t.herald.idle();
      expect(await inFlight(t, sink, endpoint.id), 'it starts at initial').to.deep.equal({ held: 2, running: 2, limit: 2 });

      // Slow start: each fast 2xx (the clock stands still: 0 ms) lets one more go.
      await answer(t, sink, 2, 200, 6);
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 4, running: 4, limit: 4 });
      await answer(t, sink, 4, 200, 14);
      expect(await inFlight(t, sink, endpoint.id), 'up to its concurrency').to.deep.equal({ held: 8, running: 8, limit: 8 });
      await answer(t, sink, 8, 200, 22);
      expect(await inFlight(t, sink, endpoint.id), 'and no further').to.deep.equal({ held: 8, running: 8, limit: 8 });

      // A 503 halves the limit: nothing new starts until fewer than 4 are in flight.
      await answer(t, sink, 1, 503, 22);
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 7, running: 7, limit: 4 });
      // The other answers to requests sent before the halving change the limit no more.
      await answer(t, sink, 3, 503, 22);
      await answer(t, sink, 1, 200, 23);
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 4, running: 4, limit: 4 });

      // A 2xx slower than the target latency (the newest request, sent after the halving) halves it again.
      t.clock.advance(1_500);
      const newest = sink.held.pop();
      const seen = t.attempts.length;
      newest?.respond(200);
      await attemptsSeen(t, seen + 1);
      await t.herald.idle();
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 3, running: 3, limit: 2 });
      await answer(t, sink, 2, 200, 24);
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 2, running: 2, limit: 2 });
      expect(t.attempts.filter((a) => a.settlement.kind === 'retry')).to.have.length(4);
    });
  });

  context('when an adaptive endpoint with a high maximum starts low', () => {
    it('claims for its current limit, not for its maximum', async () => {
      t = await startHerald();
      sink = await startServer(() => 'hold');
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 64, adaptiveConcurrency: { initial: 1 } });
      await t.herald.publish(events(200));
      await sink.requests(1);
      await t.herald.idle();
      // A new actor's first claim takes engine.claimPerEndpoint (8); with one request allowed, no more
      // (claimed for a fixed 64, it would hold 128).
      const claimed = await t.herald.listDeliveries({ endpointId: endpoint.id, status: 'in_flight', limit: 1_000 });
      expect(claimed).to.have.length(8);
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 1, running: 1, limit: 1 });
    });
  });

  context('when an endpoint has a fixed concurrency (the default)', () => {
    it('keeps its concurrency through fast 2xx and 503s', async () => {
      t = await startHerald();
      sink = await startServer(() => 'hold');
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 3, retry: { schedule: ['PT1H'] } });
      expect(endpoint.adaptiveConcurrency).to.equal(null);
      await t.herald.publish(events(20));
      await sink.requests(3);
      await t.herald.idle();
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 3, running: 3, limit: 3 });
      await answer(t, sink, 3, 200, 6);
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 3, running: 3, limit: 3 });
      await answer(t, sink, 1, 503, 7);
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 3, running: 3, limit: 3 });
    });
  });

  context('when the node makes new endpoints adaptive (delivery.adaptiveConcurrency)', () => {
    it('creates them adaptive with the defaults, starting at one request, unless created with null', async () => {
      t = await startHerald({ delivery: { adaptiveConcurrency: true } });
      sink = await startServer(() => 'hold');
      // Both share one origin and its connections (delivery.connectionsPerOrigin, 16): 1 + 8 fit.
      const adaptive = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/a`, concurrency: 8 })).endpoint;
      const fixed = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/f`, concurrency: 8, adaptiveConcurrency: null })).endpoint;
      expect(adaptive.adaptiveConcurrency).to.deep.equal({ initial: 1, targetLatencyMs: 2_000 });
      expect(fixed.adaptiveConcurrency).to.equal(null);
      await t.herald.publish(events(40));
      await sink.requests(1 + 8);
      await t.herald.idle();
      const to = (path: string): number => sink?.held.filter((h) => h.request.path === path).length ?? 0;
      expect([to('/a'), to('/f')]).to.deep.equal([1, 8]);
    });
  });

  context('when the endpoint is edited', () => {
    it('caps the limit at a lowered concurrency at once, and goes back to a fixed concurrency with null', async () => {
      t = await startHerald();
      sink = await startServer(() => 'hold');
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 8, adaptiveConcurrency: { initial: 6 } });
      await t.herald.publish(events(30));
      await sink.requests(6);
      await t.herald.idle();
      await t.herald.updateEndpoint(endpoint.id, { concurrency: 4 });
      await answer(t, sink, 6, 200, 10);
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 4, running: 4, limit: 4 });
      const edited = await t.herald.updateEndpoint(endpoint.id, { adaptiveConcurrency: null, concurrency: 5 });
      expect(edited.adaptiveConcurrency).to.equal(null);
      await sink.requests(11);
      await t.herald.idle();
      expect(await inFlight(t, sink, endpoint.id)).to.deep.equal({ held: 5, running: 5, limit: 5 });
    });
  });
});
