import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

describe('Paced replay jobs across a restart (engine)', () => {
  let dir: string;
  let sink: TestServer | undefined;
  const heralds: TestHerald[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'herald-replay-restart-'));
  });
  afterEach(async () => {
    for (const t of heralds.splice(0)) await t.close();
    await sink?.close();
    sink = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  context('when the node running a job closes mid-job and a new one opens on the same data', () => {
    it('the new node resumes the job from the store and it ends with every dead letter replayed exactly once', async () => {
      let answer: 404 | 200 | 'hold' = 404;
      sink = await startServer(() => (answer === 'hold' ? 'hold' : { status: answer }));
      const first = await startHerald({}, { dir });
      const { endpoint } = await first.herald.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 1 });
      const events = await first.herald.publish(Array.from({ length: 8 }, (_, n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await attemptsSeen(first, 8);
      await first.herald.idle();

      answer = 200;
      const job = await first.herald.startReplay({ endpointId: endpoint.id }, { chunkSize: 4 });
      expect(job).to.include({ state: 'running', total: 8, replayed: 2 });
      // Closed mid-job: its replays in flight settle, queued ones are given back, the job goes back to the store.
      await first.close();

      const second = await startHerald({}, { dir });
      heralds.push(second);
      expect(await second.herald.getReplay(job.id), 'read from the store by the new node').to.include({ state: 'running', total: 8 });
      // The new node takes the job at its first poll and sends what the first one had not delivered;
      // its looks follow the settles, at most one per 25 ms of its clock.
      for (let round = 0; round < 40; round++) {
        second.clock.advance(25);
        await second.herald.idle();
        if ((await second.herald.getReplay(job.id)).state !== 'running') break;
        const live = (await second.herald.store.countLiveReplays([endpoint.id]))[endpoint.id] ?? 0;
        if (live > 0) await attemptsSeen(second, second.attempts.length + 1);
      }
      expect(await second.herald.getReplay(job.id)).to.include({ state: 'done', total: 8, replayed: 8 });
      // Done: every dead letter released; the last ones settle after.
      await attemptsSeen(second, 8 - (first.attempts.length - 8));
      await second.herald.idle();
      const replays = sink.received.slice(8).map((request) => request.headers['webhook-id']);
      expect(replays.slice().sort(), 'each dead letter sent once more, no more').to.deep.equal(events.map((event) => event.id).sort());
      const deliveries = await second.herald.listDeliveries({ endpointId: endpoint.id });
      expect(deliveries.map((d) => [d.status, d.round])).to.deep.equal(Array(8).fill(['delivered', 1]));
      expect((await second.herald.listReplays()).map((listed) => listed.id)).to.deep.equal([job.id]);
    });
  });
});
