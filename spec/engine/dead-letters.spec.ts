import { expect } from 'chai';
import Database from 'better-sqlite3';
import { publish } from '../../lib/producer/sqlite-publish.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

describe('Dead letters, replay, at-most-once and the transactional producer (engine)', () => {
  let t: TestHerald;
  const servers: TestServer[] = [];

  afterEach(async () => {
    for (const server of servers.splice(0)) await server.close();
    await t?.close();
  });

  context('when dead letters are replayed', () => {
    it('replays one with the same webhook-id, then all of a filtered set, and nothing twice', async () => {
      t = await startHerald();
      let refused = true;
      const sinkA = await startServer(() => (refused ? { status: 404 } : { status: 200 }));
      const sinkB = await startServer(() => (refused ? { status: 404 } : { status: 200 }));
      servers.push(sinkA, sinkB);
      const a = await t.herald.createEndpoint({ tenantId: 'acme', url: sinkA.url, eventTypes: ['order.*'] });
      const b = await t.herald.createEndpoint({ tenantId: 'acme', url: sinkB.url, eventTypes: ['invoice.*'] });

      await t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'acme', type: 'order.placed', payload: { n } })));
      await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: {} });
      await attemptsSeen(t, 4);
      const letters = await t.herald.listDeadLetters({});
      expect(letters).to.have.length(4);
      expect(letters.every((l) => l.reason.startsWith('permanent: HTTP 404'))).to.equal(true);

      refused = false;
      const one = letters.find((l) => l.endpointId === a.endpoint.id);
      await t.herald.replayDeadLetter(one?.id ?? '');
      await sinkA.requests(4);
      expect(sinkA.received[3]?.headers['webhook-id']).to.equal(one?.eventId);
      await attemptsSeen(t, 5);
      expect((await t.herald.getDelivery(one?.deliveryId ?? '')).status).to.equal('delivered');
      const attempts = await t.herald.listAttempts(one?.deliveryId ?? '');
      expect(attempts.map((x) => [x.round, x.number])).to.deep.equal([[0, 1], [1, 1]]);

      const replayed = await t.herald.replayDeadLetters({ endpointId: a.endpoint.id });
      expect(replayed).to.have.length(2);
      await attemptsSeen(t, 7);
      expect(sinkB.received, 'the other endpoint was not replayed').to.have.length(1);
      expect(await t.herald.replayDeadLetters({ endpointId: a.endpoint.id })).to.deep.equal([]);
      expect((await t.herald.listDeliveries({ endpointId: a.endpoint.id })).map((d) => d.status)).to.deep.equal([
        'delivered',
        'delivered',
        'delivered',
      ]);
      expect((await t.herald.listDeadLetters({ endpointId: b.endpoint.id })).map((l) => l.replayedAt)).to.deep.equal([null]);
    });

    it('replays only the dead letters within since/until', async () => {
      t = await startHerald();
      let gone = true;
      const sink = await startServer(() => (gone ? { status: 422 } : { status: 200 }));
      servers.push(sink);
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { early: true } });
      await attemptsSeen(t, 1);
      t.clock.advance(3_600_000);
      const since = t.clock.now();
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { early: false } });
      await attemptsSeen(t, 2);

      gone = false;
      const replayed = await t.herald.replayDeadLetters({ since, until: since + 1 });
      expect(replayed).to.have.length(1);
      await attemptsSeen(t, 3);
      expect(JSON.parse(sink.received[2]?.body ?? '')).to.deep.equal({ early: false });
    });
  });

  context('when the endpoint is at-most-once', () => {
    it('makes one attempt and dead-letters the failure, never retrying it', async () => {
      t = await startHerald();
      const sink = await startServer(() => ({ status: 500 }));
      servers.push(sink);
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, mode: 'at-most-once' });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      const [attempt] = await attemptsSeen(t, 1);
      expect(attempt?.settlement.kind).to.equal('dead');
      t.clock.advance(2 * 24 * 3_600_000);
      await t.herald.idle();
      expect(sink.received).to.have.length(1);
      const [letter] = await t.herald.listDeadLetters({});
      expect(letter?.reason).to.equal('at-most-once: HTTP 500');
      expect(letter?.attempts).to.have.length(1);
    });
  });

  context('when a producer publishes inside its own SQLite transaction', () => {
    it('delivers nothing for a rolled-back transaction and delivers a committed one', async () => {
      t = await startHerald();
      const sink = await startServer(() => ({ status: 200 }));
      servers.push(sink);
      await t.herald.createEndpoint({ tenantId: 'crm', url: sink.url });
      const db = new Database(t.dbPath);
      try {
        db.exec('CREATE TABLE leads (id INTEGER PRIMARY KEY, stage TEXT)');
        const moveLead = db.transaction((stage: string, fail: boolean) => {
          db.prepare('INSERT OR REPLACE INTO leads (id, stage) VALUES (1, ?)').run(stage);
          publish(db, { tenantId: 'crm', type: 'lead.stage_changed', payload: { leadId: 1, stage } }, { clock: t.clock });
          if (fail) throw new Error('business rule failed');
        });

        expect(() => moveLead('lost', true)).to.throw('business rule failed');
        t.clock.advance(1_000); // the store's poll and the sweep both run
        await t.herald.idle();
        expect(await t.herald.listDeliveries({})).to.deep.equal([]);
        expect(sink.received).to.have.length(0);

        moveLead('won', false);
        t.clock.advance(100); // the other connection's commit is seen by the store's poll
        const [request] = await sink.requests(1);
        expect(JSON.parse(request?.body ?? '')).to.deep.equal({ leadId: 1, stage: 'won' });
        expect(db.prepare('SELECT stage FROM leads').get()).to.deep.equal({ stage: 'won' });
      } finally {
        db.close();
      }
    });
  });
});
