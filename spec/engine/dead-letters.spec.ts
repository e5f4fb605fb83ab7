import { expect } from 'chai';
import Database from 'better-sqlite3';
import { resolveConfig } from '../../lib/config/config.ts';
import type { UnreviewedDeadLettersEvent } from '../../lib/engine/engine-events.ts';
import { ConflictError, NotFoundError, ValidationError } from '../../lib/errors.ts';
import { Herald } from '../../lib/herald.ts';
import { publish } from '../../lib/producer/sqlite-publish.ts';
import { attemptsSeen, nextEvent, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

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

  context('when operators triage dead letters', () => {
    it('acknowledges one with a note and who, discards others in bulk (skipping unknown ones), and a filter replay leaves the discarded out', async () => {
      t = await startHerald();
      let answer = 404;
      const sink = await startServer(() => ({ status: answer }));
      servers.push(sink);
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish([1, 2, 3].map((n) => ({ tenantId: 'acme', type: 'a.b', payload: { n } })));
      await attemptsSeen(t, 3);
      await t.herald.idle();
      const [newest, middle, oldest] = await t.herald.listDeadLetters({ state: 'new' });
      if (newest === undefined || middle === undefined || oldest === undefined) expect.fail('three dead letters');
      t.clock.advance(90_000);

      const acknowledged = await t.herald.triageDeadLetter(oldest.id, 'acknowledged', { note: 'consumer deploys a fix at 18:00', by: 'alice' });
      expect(acknowledged).to.deep.include({
        id: oldest.id,
        ageMs: t.clock.now() - oldest.createdAt,
        triage: { state: 'acknowledged', note: 'consumer deploys a fix at 18:00', by: 'alice', at: t.clock.now() },
      });
      const invalid = await t.herald.triageDeadLetter(oldest.id, 'acknowledged', { note: '', by: 'alice' }).catch((e: unknown) => e);
      expect(invalid).to.be.instanceOf(ValidationError).and.include({ field: 'note' });
      expect(await t.herald.triageDeadLetters('discarded', { ids: [middle.id, 'dl_missing'], note: 'a test event', by: 'bob' })).to.deep.equal({
        applied: [middle.id],
        skipped: [{ id: 'dl_missing', reason: 'unknown' }],
      });
      expect((await t.herald.listDeadLetters({})).map((l) => l.id)).to.deep.equal([newest.id, oldest.id]);

      answer = 200;
      expect((await t.herald.replayDeadLetters({ endpointId: endpoint.id })).sort()).to.deep.equal([newest.id, oldest.id].sort());
      await attemptsSeen(t, 5);
      expect((await t.herald.getDeadLetter(middle.id)).triage.state).to.equal('discarded');
      expect((await t.herald.getDeadLetter(oldest.id)).triage).to.deep.include({ state: 'replayed', by: 'alice' });

      const conflict = await t.herald.triageDeadLetter(oldest.id, 'discarded', { note: 'too late', by: 'bob' }).catch((e: unknown) => e);
      expect(conflict).to.be.instanceOf(ConflictError);
      expect((conflict as Error).message).to.include('was replayed already');
      const missing = await t.herald.triageDeadLetter('dl_missing', 'acknowledged', { note: 'n', by: 'b' }).catch((e: unknown) => e);
      expect(missing).to.be.instanceOf(NotFoundError).and.include({ field: 'deadLetterId' });

      // Named by id, a discarded one is replayed all the same: an explicit decision overrides the discard.
      await t.herald.replayDeadLetter(middle.id);
      await attemptsSeen(t, 6);
      expect(sink.received.map((r) => JSON.parse(r.body).n).slice(3).sort()).to.deep.equal([1, 2, 3]);
    });
  });

  context('when a dead letter waits for review longer than deadLetters.reviewWithinMs', () => {
    it('emits deadletters.unreviewed once per crossing, on the check timer; again only after a review and a new one aging past the limit', async () => {
      const limit = 60_000;
      // A lease longer than the test, so advancing the clock in one step never lapses it.
      t = await startHerald({ deadLetters: { reviewWithinMs: limit, checkIntervalMs: 1_000 }, engine: { leaseMs: 600_000 } });
      const sink = await startServer(() => ({ status: 404 }));
      servers.push(sink);
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const alerts: UnreviewedDeadLettersEvent[] = [];
      t.herald.events.on('operational', (e) => {
        if (e.type === 'deadletters.unreviewed') alerts.push(e);
      });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 1 } });
      await attemptsSeen(t, 1);
      await t.herald.idle();
      const [first] = await t.herald.listDeadLetters({});
      if (first === undefined) expect.fail('a dead letter');

      t.clock.advanceTo(first.createdAt + limit);
      await t.herald.reviewDeadLetters();
      expect(alerts, 'at the limit, not over it').to.deep.equal([]);
      const alert = nextEvent(t.herald.events, 'operational', (e) => e.type === 'deadletters.unreviewed');
      t.clock.advance(1_000);
      expect(await alert).to.deep.include({ count: 1, oldestAgeMs: limit + 1_000, oldestCreatedAt: first.createdAt, reviewWithinMs: limit });

      t.clock.advance(30_000);
      await t.herald.reviewDeadLetters();
      expect(alerts).to.have.length(1);
      expect((await t.herald.status()).deadLetters).to.deep.equal({
        unreviewed: 1,
        oldestUnreviewedAt: first.createdAt,
        oldestUnreviewedAgeMs: limit + 31_000,
        reviewWithinMs: limit,
      });

      await t.herald.triageDeadLetter(first.id, 'acknowledged', { note: 'seen', by: 'alice' });
      await t.herald.reviewDeadLetters();
      expect((await t.herald.status()).deadLetters).to.include({ unreviewed: 0, oldestUnreviewedAt: null, oldestUnreviewedAgeMs: 0 });

      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: { n: 2 } });
      await attemptsSeen(t, 2);
      await t.herald.idle();
      t.clock.advance(limit);
      await t.herald.reviewDeadLetters();
      expect(alerts).to.have.length(1);
      t.clock.advance(1);
      await t.herald.reviewDeadLetters();
      expect(alerts).to.have.length(2);
      expect(alerts[1]).to.include({ count: 1, oldestAgeMs: limit + 1 });
    });

    it('is checked only by the node that leases slot 0, so a cluster alerts once', async () => {
      const deadLetters = { reviewWithinMs: 60_000, checkIntervalMs: 1_000 };
      t = await startHerald({ deadLetters, engine: { leaseMs: 600_000 } });
      const sink = await startServer(() => ({ status: 404 }));
      servers.push(sink);
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t, 1);
      await t.herald.idle();
      const heard: string[] = [];
      t.herald.events.on('operational', (e) => heard.push(`first ${e.type}`));
      // A second node on the same data, holding no lease (slot 0 is the first one's).
      const other = await Herald.open(resolveConfig({ store: `sqlite:${t.dbPath}`, dataDir: t.dir, logLevel: 'silent', deadLetters }), { clock: t.clock });
      try {
        other.events.on('operational', (e) => heard.push(e.type));
        t.clock.advance(61_000);
        await other.reviewDeadLetters();
        await t.herald.reviewDeadLetters();
        expect(heard).to.deep.equal(['first deadletters.unreviewed']);
        expect((await other.status()).deadLetters.unreviewed, 'it still sees the backlog').to.equal(1);
      } finally {
        await other.close();
      }
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
