/**
 * FIFO endpoints end to end on SQLite: a real sink on 127.0.0.1, time on the
 * ManualClock. The order the sink receives is the order asserted, so a
 * delivery sent early shows as a wrong sequence, never as a timing guess.
 */
import { expect } from 'chai';
import { attemptsSeen, startHerald, startServer, type ReceivedRequest, type TestHerald, type TestServer } from '../support/harness.ts';

const SECOND = 1_000;
/** Fast retries (1 s, ±20% jitter), then dead: a FIFO endpoint's recommended short policy. */
const SHORT_RETRY = { schedule: ['PT1S', 'PT1S'] };

const label = (request: ReceivedRequest): string => (JSON.parse(request.body) as { n: string }).n;

describe('FIFO endpoints (engine, end to end on SQLite)', () => {
  let t: TestHerald | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await t?.close();
    t = undefined;
    await sink?.close();
    sink = undefined;
  });

  /** Publishes one event per label, in order, each with its ordering key. */
  async function publish(herald: TestHerald, events: ReadonlyArray<readonly [n: string, key: string]>): Promise<void> {
    for (const [n, orderingKey] of events) await herald.herald.publish({ tenantId: 'acme', type: 'order.updated', payload: { n }, orderingKey });
  }

  /** A sink that answers 503 to the first `failures[n]` requests of event `n`, then 200. */
  function sinkFailing(failures: Readonly<Record<string, number>>): Promise<TestServer> {
    const failuresLeft = new Map(Object.entries(failures));
    return startServer((request) => {
      const n = label(request);
      const left = failuresLeft.get(n) ?? 0;
      failuresLeft.set(n, left - 1);
      return { status: left > 0 ? 503 : 200 };
    });
  }

  context('when the second event of a line fails twice, then succeeds', () => {
    it('sends nothing after it until it succeeds, then the rest at once, in order: 1, 2, 2, 2, 3, 4', async () => {
      sink = await sinkFailing({ '2': 2 });
      t = await startHerald();
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, ordering: 'fifo', concurrency: 4, retry: SHORT_RETRY });
      await publish(t, [['1', 'k'], ['2', 'k'], ['3', 'k'], ['4', 'k']]);

      await attemptsSeen(t, 1, (e) => e.settlement.kind === 'retry');
      expect(sink.received.map(label)).to.deep.equal(['1', '2']);
      t.clock.advance(2 * SECOND);
      await attemptsSeen(t, 2, (e) => e.settlement.kind === 'retry');
      expect(sink.received.map(label)).to.deep.equal(['1', '2', '2']);
      t.clock.advance(2 * SECOND);
      // No time passes after 2 succeeds: 3 and 4 follow without waiting for a poll.
      await attemptsSeen(t, 4, (e) => e.settlement.kind === 'delivered');
      expect(sink.received.map(label)).to.deep.equal(['1', '2', '2', '2', '3', '4']);
    });
  });

  context('when one line is held by a failing event', () => {
    it('lets another key\'s line go on, and releases the held line once its head is dead-lettered', async () => {
      sink = await startServer((request) => ({ status: label(request) === 'a1' ? 503 : 200 }));
      t = await startHerald();
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, ordering: 'fifo', concurrency: 4, retry: SHORT_RETRY });
      await publish(t, [['a1', 'a'], ['a2', 'a'], ['b1', 'b'], ['b2', 'b']]);

      // b's line is delivered while a1 waits for its retry, and a2 waits behind it.
      await attemptsSeen(t, 2, (e) => e.settlement.kind === 'delivered');
      await attemptsSeen(t, 1, (e) => e.settlement.kind === 'retry');
      expect(sink.received.map(label).sort()).to.deep.equal(['a1', 'b1', 'b2']);

      t.clock.advance(2 * SECOND);
      await attemptsSeen(t, 2, (e) => e.settlement.kind === 'retry');
      expect(sink.received.map(label).filter((n) => n.startsWith('a'))).to.deep.equal(['a1', 'a1']);
      t.clock.advance(2 * SECOND);
      await attemptsSeen(t, 1, (e) => e.settlement.kind === 'dead');
      await attemptsSeen(t, 3, (e) => e.settlement.kind === 'delivered');
      const aLine = sink.received.map(label).filter((n) => n.startsWith('a'));
      expect(aLine).to.deep.equal(['a1', 'a1', 'a1', 'a2']);
      const deliveries = await t.herald.listDeliveries({ endpointId: endpoint.id });
      expect(deliveries.map((d) => [d.orderingKey, d.sequence, d.status]).sort()).to.deep.equal([
        ['a', 1, 'dead'],
        ['a', 2, 'delivered'],
        ['b', 3, 'delivered'],
        ['b', 4, 'delivered'],
      ]);
    });
  });

  context('when Herald restarts while a line is held', () => {
    it('keeps the order across the restart', async () => {
      sink = await sinkFailing({ '2': 1 });
      t = await startHerald();
      const dir = t.dir;
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, ordering: 'fifo', retry: SHORT_RETRY });
      await publish(t, [['1', 'k'], ['2', 'k'], ['3', 'k']]);
      await attemptsSeen(t, 1, (e) => e.settlement.kind === 'retry');
      await t.herald.close();

      const restarted = await startHerald({}, { dir });
      t = { ...restarted, close: async () => {
        await restarted.close();
        const { rmSync } = await import('node:fs');
        rmSync(dir, { recursive: true, force: true });
      } };
      t.clock.advance(2 * SECOND);
      await attemptsSeen(t, 2, (e) => e.settlement.kind === 'delivered');
      expect(sink.received.map(label)).to.deep.equal(['1', '2', '2', '3']);
    });
  });
});
