import { expect } from 'chai';
import { StoreError } from '../../lib/errors.ts';
import { encodeCursor, decodeCursor } from '../../lib/api/delivery-cursor.ts';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { expectOk, sample, startStatus, type StatusFixture } from './status-fixture.ts';

describe('Status port: status, readiness and the delivery log', () => {
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await f?.close();
    f = undefined;
  });

  /** Makes the store's status query fail until the returned function is called. */
  function breakStore(fixture: StatusFixture): () => void {
    const store = fixture.t.herald.store as { countDeliveries: () => Promise<unknown> };
    store.countDeliveries = async () => {
      throw new StoreError('SQLITE_CANTOPEN: unable to open database file');
    };
    return () => delete (store as Partial<typeof store>).countDeliveries;
  }

  describe('GET /readyz', () => {
    context('when the store answers and slots are owned', () => {
      it('answers 200 ready', async () => {
        f = await startStatus();
        const reply = await f.api('GET', '/readyz', undefined, null);
        expectOk(reply);
        expect(reply.json).to.deep.equal({ status: 'ready', slotsOwned: f.t.herald.leases.length });
      });
    });

    context('when no slot is owned (not started)', () => {
      it('answers 503 with the reason', async () => {
        f = await startStatus({}, { start: false });
        const reply = await f.api('GET', '/readyz', undefined, null);
        expect(reply.status).to.equal(503);
        expect(reply.json).to.deep.equal({ status: 'not ready', reason: 'no slot lease held' });
      });
    });

    context('when the store is unreachable', () => {
      it('answers 503 naming the store and its error, and 200 again once it has answered for 5 s', async () => {
        f = await startStatus();
        const repair = breakStore(f);
        const reply = await f.api('GET', '/readyz', undefined, null);
        expect(reply.status).to.equal(503);
        expect(reply.json.status).to.equal('not ready');
        expect(reply.json.reason).to.equal('store unreachable: SQLITE_CANTOPEN: unable to open database file');
        repair();
        // The failed call keeps the store unavailable for a while: a store that fails now and then is not ready.
        const held = await f.api('GET', '/readyz', undefined, null);
        expect(held.status).to.equal(503);
        expect(held.json.reason).to.equal('store unavailable: store call countDeliveries failed: SQLITE_CANTOPEN: unable to open database file');
        f.t.clock.advance(5_000);
        expectOk(await f.api('GET', '/readyz', undefined, null));
      });
    });
  });

  describe('GET /v1/status', () => {
    context('when an endpoint has failed and succeeded', () => {
      it('shows the node, its actors with breaker, queue and last error, the store, and the recent failure rate', async () => {
        f = await startStatus({ breaker: { volumeThreshold: 1_000 } });
        const { t } = f;
        let answer = 503;
        sink = await startServer(() => ({ status: answer }));
        const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
        await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
        const [failed] = await attemptsSeen(t, 1);
        answer = 200;
        if (failed?.settlement.kind !== 'retry') expect.fail('expected a retry');
        t.clock.advanceTo(failed.settlement.nextAttemptAt);
        await attemptsSeen(t, 2);
        await t.herald.idle();

        const reply = await f.api('GET', '/v1/status');
        expectOk(reply);
        const status = reply.json;
        expect(status).to.include({ node: t.herald.nodeId, slotsOwned: t.herald.leases.length, inFlight: 0, fencedWrites: 0 });
        expect(status.store).to.deep.equal({ reachable: true, available: true, latencyMs: 0, error: null });
        expect(status.deliveries).to.include({ delivered: 1, pending: 0 });
        const actor = status.actors.find((a: { endpointId: string }) => a.endpointId === endpoint.id);
        expect(actor).to.deep.include({ breaker: 'closed', queued: 0, running: 0, lastError: 'HTTP 503' });
        expect(status.recent).to.include({ scope: 'node', windowMs: 3_600_000 });
        expect(status.recent.endpoints).to.deep.equal([
          { endpointId: endpoint.id, attempts: 2, failures: 1, failureRate: 0.5, lastFailureAt: failed.startedAt, lastError: 'HTTP 503' },
        ]);

        // An hour later the window has moved past both attempts.
        t.clock.advance(61 * 60_000);
        expect((await f.api('GET', '/v1/status')).json.recent.endpoints).to.deep.equal([]);
      });
    });

    context('when this node\'s clock is 30 s ahead of the store\'s and another node is live', () => {
      it('shows its offset, every live node with its figures and leases, and the offset gauge', async () => {
        f = await startStatus({}, { start: false });
        const { herald, clock } = f.t;
        // The store's clock is 30 s behind this node's.
        (herald.store as { serverTime: () => Promise<number> }).serverTime = async () => clock.now() - 30_000;
        const skews: unknown[] = [];
        herald.events.on('clockSkew', (e) => skews.push(e));
        await herald.start();
        const clusterNow = clock.now() - 30_000;
        await herald.store.heartbeat({ id: 'node_other', startedAt: clusterNow - 5_000, now: clusterNow, inFlight: 5, clockOffsetMs: 12 });
        // A node whose last heartbeat is older than a lease period is not live.
        await herald.store.heartbeat({ id: 'node_gone', startedAt: 0, now: clusterNow - herald.config.engine.leaseMs, inFlight: 1, clockOffsetMs: 0 });

        const status = (await f.api('GET', '/v1/status')).json;
        expect(status.clockOffsetMs).to.equal(-30_000);
        expect(status.cluster.nodes).to.deep.equal([
          { id: herald.nodeId, startedAt: status.startedAt, lastHeartbeatAt: clusterNow, slotsHeld: herald.slotCount, inFlight: 0, clockOffsetMs: -30_000 },
          { id: 'node_other', startedAt: clusterNow - 5_000, lastHeartbeatAt: clusterNow, slotsHeld: 0, inFlight: 5, clockOffsetMs: 12 },
        ].sort((a, b) => (a.id < b.id ? -1 : 1)));
        expect(status.startedAt, 'on the cluster\'s clock').to.equal(clusterNow);
        expect(skews).to.deep.equal([{ offsetMs: -30_000, skewed: true, thresholdMs: 1_000 }]);

        const metrics = await f.api('GET', '/metrics');
        expect(sample(metrics.text, 'herald_clock_offset_seconds')).to.equal(-30);
      });
    });

    context('when the store is unreachable', () => {
      it('still answers 200, saying so in store', async () => {
        f = await startStatus();
        breakStore(f);
        const reply = await f.api('GET', '/v1/status');
        expectOk(reply);
        expect(reply.json.store).to.include({ reachable: false, error: 'SQLITE_CANTOPEN: unable to open database file' });
        expect(reply.json.deliveries).to.deep.equal({});
      });
    });
  });

  describe('GET /v1/deliveries', () => {
    /** 11 deliveries: 7 to `ok` (tenant acme, answers 200), 4 to `refused` (globex, 404); 5 of type b.y; created in 3 rounds 1 s apart (4, 4, 3), several in the same ms. */
    async function seed(fixture: StatusFixture): Promise<{ ok: string; refused: string; start: number }> {
      const { t } = fixture;
      sink = await startServer((request) => ({ status: request.path === '/refused' ? 404 : 200 }));
      const ok = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/ok` })).endpoint.id;
      const refused = (await t.herald.createEndpoint({ tenantId: 'globex', url: `${sink.url}/refused` })).endpoint.id;
      const start = t.clock.now();
      let made = 0;
      for (let round = 0; round < 3; round++) {
        const batch = [
          { tenantId: 'acme', type: 'a.x', payload: { round } },
          { tenantId: 'acme', type: round === 0 ? 'a.x' : 'b.y', payload: { round } },
          ...(round < 2 ? [{ tenantId: 'globex', type: 'a.x', payload: { round } }, { tenantId: 'globex', type: 'b.y', payload: { round } }] : []),
        ];
        if (round === 2) batch.push({ tenantId: 'acme', type: 'b.y', payload: { round } });
        await t.herald.publish(batch);
        made += batch.length;
        await attemptsSeen(t, made);
        await t.herald.idle();
        t.clock.advance(1_000);
      }
      return { ok, refused, start };
    }

    context('when walking the log with a cursor', () => {
      it('returns every delivery exactly once, newest first, and a null nextCursor on the last page', async () => {
        f = await startStatus();
        await seed(f);
        const all = (await f.api('GET', '/v1/deliveries?limit=1000')).json;
        expect(all.data).to.have.length(11);
        expect(all.nextCursor).to.equal(null);
        for (const limit of [1, 2, 4]) {
          const walked: string[] = [];
          let cursor: string | null = null;
          let pages = 0;
          do {
            const reply = await f.api('GET', `/v1/deliveries?limit=${limit}${cursor === null ? '' : `&cursor=${cursor}`}`);
            expectOk(reply);
            expect(reply.json.data.length).to.be.at.most(limit);
            walked.push(...reply.json.data.map((d: { id: string }) => d.id));
            cursor = reply.json.nextCursor;
            pages++;
          } while (cursor !== null);
          expect(walked, `limit ${limit}`).to.deep.equal(all.data.map((d: { id: string }) => d.id));
          expect(pages).to.equal(Math.ceil(11 / limit));
        }
        const order = all.data.map((d: { createdAt: number; id: string }) => [d.createdAt, d.id]);
        expect(order).to.deep.equal([...order].sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? 1 : -1)));
      });
    });

    context('when filtering', () => {
      it('filters by endpoint, tenant, event type, status and time range, and pages within a filter', async () => {
        f = await startStatus();
        const { ok, refused, start } = await seed(f);
        const ids = async (query: string): Promise<Array<{ endpointId: string; tenantId: string; eventType: string; status: string; createdAt: number }>> => {
          const reply = await f!.api('GET', `/v1/deliveries?${query}`);
          expectOk(reply);
          return reply.json.data;
        };
        expect((await ids(`endpointId=${ok}`)).every((d) => d.endpointId === ok)).to.equal(true);
        expect(await ids(`endpointId=${ok}`)).to.have.length(7);
        expect(await ids('tenantId=globex')).to.have.length(4);
        const typed = await ids('eventType=b.y');
        expect(typed.map((d) => d.eventType)).to.deep.equal(['b.y', 'b.y', 'b.y', 'b.y', 'b.y']);
        expect((await ids('status=dead')).every((d) => d.endpointId === refused)).to.equal(true);
        expect(await ids('status=dead')).to.have.length(4);
        expect(await ids(`status=delivered&eventType=b.y&endpointId=${ok}`)).to.have.length(3);
        const second = new Date(start + 1_000).toISOString();
        const third = start + 2_000;
        expect(await ids(`since=${second}`)).to.have.length(7);
        expect(await ids(`since=${second}&until=${third}`)).to.have.length(4);
        expect(await ids(`until=${start + 1_000}`)).to.have.length(4);

        const first = await f.api('GET', `/v1/deliveries?tenantId=acme&limit=3`);
        expect(first.json.data).to.have.length(3);
        const second3 = await f.api('GET', `/v1/deliveries?tenantId=acme&limit=3&cursor=${first.json.nextCursor}`);
        const last = await f.api('GET', `/v1/deliveries?tenantId=acme&limit=3&cursor=${second3.json.nextCursor}`);
        expect([second3.json.data.length, last.json.data.length, last.json.nextCursor]).to.deep.equal([3, 1, null]);
        const acme = [...first.json.data, ...second3.json.data, ...last.json.data];
        expect(acme.every((d: { tenantId: string }) => d.tenantId === 'acme')).to.equal(true);
        expect(new Set(acme.map((d: { id: string }) => d.id)).size).to.equal(7);
      });
    });

    context('when the cursor is not one the server made', () => {
      it('answers 400 naming cursor', async () => {
        f = await startStatus();
        for (const cursor of ['nope!', 'bm9wZQ', encodeURIComponent(Buffer.from('{"c":"x","i":1}').toString('base64url'))]) {
          const reply = await f.api('GET', `/v1/deliveries?cursor=${cursor}`);
          expect(reply.status, cursor).to.equal(400);
          expect(reply.json.error).to.include({ code: 'HERALD_INVALID_INPUT', field: 'cursor' });
        }
      });
    });

    describe('the cursor', () => {
      it('round-trips {createdAt, id} as an opaque url-safe string', () => {
        const text = encodeCursor({ createdAt: 1_767_225_600_000, id: 'dlv_a/b+c' });
        expect(text).to.match(/^[A-Za-z0-9_-]+$/);
        expect(decodeCursor(text)).to.deep.equal({ createdAt: 1_767_225_600_000, id: 'dlv_a/b+c' });
      });
    });
  });

  describe('GET /v1/dead-letters', () => {
    context('when walking the dead letters with a cursor', () => {
      it('returns every dead letter exactly once, newest first, and a null nextCursor on the last page', async () => {
        f = await startStatus();
        sink = await startServer(() => ({ status: 404 }));
        await f.t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
        for (let n = 1; n <= 5; n++) await f.t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n } });
        await attemptsSeen(f.t, 5);
        await f.t.herald.idle();
        const all = (await f.api('GET', '/v1/dead-letters?limit=1000')).json;
        expect(all.data).to.have.length(5);
        expect(all.nextCursor).to.equal(null);
        const walked: string[] = [];
        let cursor: string | null = null;
        let pages = 0;
        do {
          const reply = await f.api('GET', `/v1/dead-letters?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
          expectOk(reply);
          walked.push(...reply.json.data.map((d: { id: string }) => d.id));
          cursor = reply.json.nextCursor;
          pages++;
        } while (cursor !== null);
        expect(walked).to.deep.equal(all.data.map((d: { id: string }) => d.id));
        expect(pages).to.equal(3);
        const bad = await f.api('GET', '/v1/dead-letters?cursor=nope');
        expect(bad.status).to.equal(400);
        expect(bad.json.error.field).to.equal('cursor');
      });
    });
  });

  describe('POST /v1/dead-letters/replay with dryRun', () => {
    it('answers how many a replay by the filter would replay, replaying nothing, and refuses a dryRun that is not a boolean', async () => {
      f = await startStatus();
      const { t } = f;
      sink = await startServer(() => ({ status: 404 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await attemptsSeen(t, 3);
      await t.herald.idle();

      const dry = await f.api('POST', '/v1/dead-letters/replay', { endpointId: endpoint.id, dryRun: true });
      expectOk(dry, 200);
      expect(dry.json).to.deep.equal({ dryRun: true, wouldReplay: 3 });
      expect((await f.api('POST', '/v1/dead-letters/replay', { tenantId: 'globex', dryRun: true })).json.wouldReplay).to.equal(0);
      expect((await t.herald.listDeadLetters({ endpointId: endpoint.id })).length).to.equal(3);
      expect((await t.herald.listDeliveries({ endpointId: endpoint.id })).map((d) => d.status)).to.deep.equal(['dead', 'dead', 'dead']);

      const bad = await f.api('POST', '/v1/dead-letters/replay', { endpointId: endpoint.id, dryRun: 'yes' });
      expect(bad.status).to.equal(400);
      expect(bad.json.error).to.include({ code: 'HERALD_INVALID_INPUT', field: 'dryRun' });
      expect((await f.api('POST', '/v1/dead-letters/replay', { dryRun: true })).json.error).to.include({ field: 'body' });
    });
  });

  describe('POST /v1/dead-letters/replay with ids', () => {
    it('replays the ids given, skipping one replayed already or unknown, and refuses an empty list or a mix with a filter', async () => {
      f = await startStatus();
      const { t } = f;
      let answer = 404;
      sink = await startServer(() => ({ status: answer }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish([1, 2].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await attemptsSeen(t, 2);
      await t.herald.idle();
      const letters = (await f.api('GET', '/v1/dead-letters')).json.data.map((d: { id: string }) => d.id) as string[];
      answer = 200;
      const first = await f.api('POST', '/v1/dead-letters/replay', { ids: [letters[0]] });
      expectOk(first, 202);
      expect(first.json).to.deep.equal({ replayed: 1, ids: [letters[0]], skipped: [] });
      const second = await f.api('POST', '/v1/dead-letters/replay', { ids: [...letters, 'dl_missing'] });
      expect(second.json).to.deep.equal({ replayed: 1, ids: [letters[1]], skipped: [letters[0], 'dl_missing'] });
      await attemptsSeen(t, 4);
      await t.herald.idle();

      expect((await f.api('POST', '/v1/dead-letters/replay', { ids: [] })).json.error).to.include({ field: 'ids' });
      expect((await f.api('POST', '/v1/dead-letters/replay', { ids: ['x'], endpointId: 'y' })).json.error).to.include({ field: 'endpointId' });
    });
  });
});
