import { expect } from 'chai';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { expectOk, startStatus, type StatusFixture } from './status-fixture.ts';

describe('Status port: paced replay jobs (/v1/replays)', () => {
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await f?.close();
    await sink?.close();
    f = undefined;
    sink = undefined;
  });

  it('counts on a dry run, then keeps at most 2 × the concurrency of replays live, new events going before the replays not yet released', async () => {
    f = await startStatus();
    const { t } = f;
    let answer: 404 | 200 | 'hold' = 404;
    sink = await startServer(() => (answer === 'hold' ? 'hold' : { status: answer }));
    const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 1 });
    const dead = await t.herald.publish([1, 2, 3, 4, 5, 6].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
    await attemptsSeen(t, 6);
    await t.herald.idle();

    const dry = await f.api('POST', '/v1/replays', { endpointId: endpoint.id, dryRun: true });
    expectOk(dry, 200);
    expect(dry.json).to.deep.equal({ dryRun: true, wouldReplay: 6 });
    expect((await t.herald.listDeliveries({ endpointId: endpoint.id })).every((d) => d.status === 'dead')).to.equal(true);

    // The endpoint is slow: it holds every request until the test answers it.
    answer = 'hold';
    const started = await f.api('POST', '/v1/replays', { endpointId: endpoint.id, chunkSize: 2 });
    expectOk(started, 202);
    expect(started.json).to.include({ state: 'running', total: 6, replayed: 2, chunkSize: 2 });
    expect(started.json.id).to.match(/^rpl_[0-9a-f]{32}$/);
    expect(started.json).to.not.have.any.keys('cursor', 'owner', 'leaseUntil');
    await sink.requests(7);
    expect((await t.herald.listDeliveries({ endpointId: endpoint.id })).filter((d) => d.status === 'dead')).to.have.length(4);

    // A new event while two replays are live: it goes out right after them, before the four not yet released.
    t.clock.advance(1);
    const [fresh] = await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { fresh: true } });
    t.clock.advance(1);
    for (let sent = 7; sent <= 13; sent++) {
      await sink.requests(sent);
      const live = (await t.herald.store.countLiveReplays([endpoint.id]))[endpoint.id] ?? 0;
      expect(live, 'never more than 2 × 1 replays live').to.be.at.most(2);
      sink.held.shift()?.respond(200);
      // The job looks again after the settle, once the settle gap (25 ms) has passed on its clock.
      await attemptsSeen(t, sent);
      t.clock.advance(25);
      await t.herald.idle();
    }
    await attemptsSeen(t, 13);
    await t.herald.idle();
    const order = sink.received.slice(6).map((r) => JSON.parse(r.body) as { n?: number; fresh?: boolean });
    expect(order.findIndex((payload) => payload.fresh === true)).to.equal(2);
    expect(order.filter((payload) => payload.n !== undefined).map((payload) => payload.n).sort()).to.deep.equal([1, 2, 3, 4, 5, 6]);
    expect((await t.herald.listDeliveries({ endpointId: endpoint.id })).map((d) => d.status)).to.deep.equal(Array(7).fill('delivered'));
    expect(dead).to.have.length(6);
    expect(fresh).to.not.equal(undefined);

    const done = await f.api('GET', `/v1/replays/${started.json.id}`);
    expect(done.json).to.include({ state: 'done', total: 6, replayed: 6 });
    expect((await f.api('GET', '/v1/replays')).json.data.map((j: { id: string }) => j.id)).to.deep.equal([started.json.id]);
    expect((await f.api('DELETE', `/v1/replays/${started.json.id}`)).json.state).to.equal('done');
    expect((await f.api('POST', '/v1/replays', { endpointId: endpoint.id, dryRun: true })).json.wouldReplay).to.equal(0);
  });

  it('refuses a bad body and answers 404 for an unknown job', async () => {
    f = await startStatus();
    const missing = await f.api('DELETE', '/v1/replays/rpl_missing');
    expect(missing.status).to.equal(404);
    expect(missing.json.error).to.include({ code: 'HERALD_NOT_FOUND', field: 'replayId' });
    expect((await f.api('GET', '/v1/replays/rpl_missing')).status).to.equal(404);
    for (const [body, field] of [
      [{ endpointId: 'ep_1', chunkSize: 0 }, 'chunkSize'],
      [{ endpointId: 'ep_1', chunkSize: '10' }, 'chunkSize'],
      [{ endpointId: 'ep_1', dryRun: 'yes' }, 'dryRun'],
      [{ chunkSize: 10 }, 'body'],
      [{ endpointId: 'ep_1', state: 'new' }, 'state'],
    ] as const) {
      const reply = await f.api('POST', '/v1/replays', body);
      expect(reply.status, JSON.stringify(body)).to.equal(400);
      expect(reply.json.error, JSON.stringify(body)).to.include({ code: 'HERALD_INVALID_INPUT', field });
    }
    expect((await f.api('POST', '/v1/dead-letters/replay', { endpointId: 'ep_1', chunkSize: 10 })).json.error).to.include({ field: 'chunkSize' });
    expect((await f.api('GET', '/v1/replays', undefined, null)).status).to.equal(401);
  });
});
