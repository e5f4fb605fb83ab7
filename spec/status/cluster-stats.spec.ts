/**
 * The cluster's stats (`GET /v1/stats`, lib/status/cluster-stats.ts): two Herald nodes on one SQLite
 * file, each counting its attempts into the stored delivery minutes; one node's status server
 * answers the sum of both, once each has flushed, within the caller's tenant.
 */
import { expect } from 'chai';
import { resolveConfig } from '../../lib/config/config.ts';
import { Herald } from '../../lib/herald.ts';
import type { FailureGroup } from '../../lib/store/failure-groups.ts';
import { clusterStatsOf, statsRange } from '../../lib/status/cluster-stats.ts';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { expectOk, startStatus, type StatusFixture } from '../api/status-fixture.ts';

const HOUR = 3_600_000;

describe('Cluster stats (GET /v1/stats)', () => {
  let f: StatusFixture | undefined;
  let other: Herald | undefined;
  const sinks: TestServer[] = [];

  afterEach(async () => {
    await other?.close();
    other = undefined;
    for (const sink of sinks.splice(0)) await sink.close();
    await f?.close();
    f = undefined;
  });

  /**
   * Node A (with the status server) makes two attempts at acme's endpoint, the first failing (503,
   * a retry), and one at globex's. Node B, a second Herald on the same SQLite file, counts attempts
   * of its own at acme's endpoint: A's attempt events, as B's engine would emit them had it made them.
   */
  async function twoNodes(): Promise<{ acme: string; globex: string; b: Herald }> {
    f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
    const { t } = f;
    let answer = 503;
    const sink = await startServer(() => ({ status: answer }));
    sinks.push(sink);
    const acme = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/acme` })).endpoint.id;
    const globex = (await t.herald.createEndpoint({ tenantId: 'globex', url: `${sink.url}/globex` })).endpoint.id;
    await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', endpointId: acme, payload: { n: 1 } });
    const [failed] = await attemptsSeen(t, 1);
    if (failed?.settlement.kind !== 'retry') expect.fail('expected a retry');
    answer = 200;
    t.clock.advanceTo(failed.settlement.nextAttemptAt);
    await attemptsSeen(t, 2);
    await t.herald.publish({ tenantId: 'globex', type: 'invoice.paid', endpointId: globex, payload: { n: 2 } });
    await attemptsSeen(t, 3);
    await t.herald.idle();

    const b = await Herald.open(resolveConfig({ store: `sqlite:${t.dbPath}`, dataDir: t.dir, logLevel: 'silent' }), { clock: t.clock });
    other = b;
    for (const attempt of t.attempts.filter((a) => a.endpointId === acme)) b.events.emit('attempt', attempt);
    return { acme, globex, b };
  }

  context('when two nodes have attempted deliveries to the same endpoint', () => {
    it("answers the sum of both nodes' attempts and failures per endpoint, once each node has flushed its minutes", async () => {
      const { acme, globex, b } = await twoNodes();
      await f!.t.herald.flushDeliveryMinutes();
      const before = await f!.api('GET', '/v1/stats');
      expectOk(before);
      expect(before.json, "B's minutes are not written yet: the cluster figures lag by up to one flush").to.include({ scope: 'cluster' });
      expect(before.json.endpoints.map((e: { endpointId: string; attempts: number }) => [e.endpointId, e.attempts])).to.deep.include([acme, 2]);

      await b.flushDeliveryMinutes();
      const reply = await f!.api('GET', '/v1/stats');
      expectOk(reply);
      expect(reply.json).to.include({ scope: 'cluster', windowMs: HOUR });
      expect(reply.json.to - reply.json.from).to.equal(HOUR);
      expect(reply.json.endpoints).to.deep.equal(
        [
          // 2 attempts on A and 2 on B; one failure on each. Nothing is still failing, so no open failure to show.
          { endpointId: acme, attempts: 4, failures: 2, failureRate: 0.5, lastFailureAt: null, lastError: null },
          { endpointId: globex, attempts: 1, failures: 0, failureRate: 0, lastFailureAt: null, lastError: null },
        ].sort((x, y) => (x.endpointId < y.endpointId ? -1 : 1)),
      );

      const acmeOnly = await f!.api('GET', '/v1/stats?tenantId=acme');
      expect(acmeOnly.json.endpoints.map((e: { endpointId: string; attempts: number }) => [e.endpointId, e.attempts])).to.deep.equal([[acme, 4]]);

      // An hour later the window has moved past every attempt.
      f!.t.clock.advance(61 * 60_000);
      expect((await f!.api('GET', '/v1/stats')).json.endpoints).to.deep.equal([]);
    });
  });

  context('when an endpoint has a failure still open', () => {
    it('shows its latest open failure, from the failure groups, with the counts', async () => {
      f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
      const sink = await startServer(() => ({ status: 404 }));
      sinks.push(sink);
      const id = (await f.t.herald.createEndpoint({ tenantId: 'acme', url: sink.url })).endpoint.id;
      await f.t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: {} });
      const [dead] = await attemptsSeen(f.t, 1);
      await f.t.herald.idle();
      await f.t.herald.flushDeliveryMinutes();
      const reply = await f.api('GET', '/v1/stats');
      expect(reply.json.endpoints).to.deep.equal([
        { endpointId: id, attempts: 1, failures: 1, failureRate: 1, lastFailureAt: reply.json.endpoints[0]?.lastFailureAt, lastError: 'HTTP 404' },
      ]);
      expect(reply.json.endpoints[0].lastFailureAt).to.be.within(dead!.startedAt, dead!.startedAt + dead!.durationMs + 1_000);
    });
  });

  describe('clusterStatsOf', () => {
    const T0 = Date.UTC(2026, 0, 1, 12, 0);
    const totals = (endpointId: string, attempts: number, delivered: number) =>
      ({ endpointId, attempts, delivered, retriesScheduled: attempts - delivered, deadLettered: 0, firstAttempts: attempts, firstAttemptSuccesses: delivered });
    const group = (endpointId: string, kind: string, lastSeen: number, summary: string): FailureGroup =>
      ({ endpointId, kind, tenantId: 'acme', count: { retrying: 1, dead: 0, total: 1 }, firstSeen: lastSeen, lastSeen, sample: { summary, status: null, body: null } });

    it("covers the last 60 whole minutes at a time, the current one included", () => {
      expect(statsRange(T0 + 30_000)).to.deep.equal({ from: T0 + 60_000 - HOUR, to: T0 + 60_000 });
    });

    it("rates each endpoint's failures, takes the latest of its open groups, and leaves out endpoints without attempts", () => {
      const stats = clusterStatsOf(statsRange(T0), [totals('ep_a', 4, 1), totals('ep_b', 0, 0), totals('ep_c', 2, 2)], [
        group('ep_a', 'http-503', T0 - 5_000, 'HTTP 503'),
        group('ep_a', 'timeout', T0 - 1_000, 'timeout after 10 s'),
        group('ep_z', 'dns', T0, 'ENOTFOUND'),
      ]);
      expect(stats).to.deep.include({ scope: 'cluster', windowMs: HOUR });
      expect(stats.endpoints).to.deep.equal([
        { endpointId: 'ep_a', attempts: 4, failures: 3, failureRate: 0.75, lastFailureAt: T0 - 1_000, lastError: 'timeout after 10 s' },
        { endpointId: 'ep_c', attempts: 2, failures: 0, failureRate: 0, lastFailureAt: null, lastError: null },
      ]);
    });
  });
});
