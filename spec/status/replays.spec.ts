import { expect } from 'chai';
import { attemptsSeen, startServer, type TestServer } from '../support/harness.ts';
import { expectOk, startStatus, type StatusFixture } from './status-fixture.ts';

/** The replay jobs' poll (lib/dead-letters/replay-jobs.ts). */
const POLL_MS = 250;

describe('Status port: paced replay jobs (/v1/replays)', () => {
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await f?.close();
    await sink?.close();
    f = undefined;
    sink = undefined;
  });

  it('counts on a dry run, then replays chunk by chunk as the endpoint drains, new events going before the replays not yet released', async () => {
    f = await startStatus();
    const { t } = f;
    let answer = 404;
    sink = await startServer(() => ({ status: answer }));
    const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
    const dead = await t.herald.publish([1, 2, 3, 4, 5, 6].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
    await attemptsSeen(t, 6);
    await t.herald.idle();
    answer = 200;

    const dry = await f.api('POST', '/v1/replays', { endpointId: endpoint.id, dryRun: true });
    expectOk(dry, 200);
    expect(dry.json).to.deep.equal({ dryRun: true, wouldReplay: 6 });
    expect((await t.herald.listDeliveries({ endpointId: endpoint.id })).every((d) => d.status === 'dead')).to.equal(true);

    const started = await f.api('POST', '/v1/replays', { endpointId: endpoint.id, chunkSize: 2 });
    expectOk(started, 202);
    expect(started.json).to.include({ state: 'running', total: 6, replayed: 2, chunkSize: 2 });
    expect(started.json.id).to.match(/^rpl_[0-9a-f]{32}$/);
    await attemptsSeen(t, 8);
    await t.herald.idle();
    expect((await t.herald.listDeliveries({ endpointId: endpoint.id })).filter((d) => d.status === 'dead')).to.have.length(4);

    // A new event while four replays wait: it goes out before them.
    const [fresh] = await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { fresh: true } });
    await attemptsSeen(t, 9);
    for (let round = 0; round < 20 && (await f.api('GET', `/v1/replays/${started.json.id}`)).json.state === 'running'; round++) {
      t.clock.advance(POLL_MS);
      await t.herald.idle();
    }
    await attemptsSeen(t, 13);
    await t.herald.idle();
    const order = t.attempts.slice(6).map((a) => a.eventId);
    const held = dead.map((e) => e.id).filter((id) => !order.slice(0, 2).includes(id));
    expect(held).to.have.length(4);
    expect(order.indexOf(fresh!.id)).to.equal(2);
    expect(Math.min(...held.map((id) => order.indexOf(id)))).to.equal(3);
    expect((await t.herald.listDeliveries({ endpointId: endpoint.id })).map((d) => d.status)).to.deep.equal(Array(7).fill('delivered'));

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
