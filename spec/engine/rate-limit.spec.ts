import { expect } from 'chai';
import type { AttemptEvent } from '../../lib/engine/engine-events.ts';
import { planDeliveries } from '../../lib/engine/fanout.ts';
import { attemptsSeen, nextEvent, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

/** Attempts per simulated second since `t0`, in order. */
function perSecond(attempts: readonly AttemptEvent[], t0: number): number[] {
  const counts: number[] = [];
  for (const a of attempts) {
    const second = Math.floor((a.startedAt - t0) / 1_000);
    while (counts.length <= second) counts.push(0);
    counts[second] = (counts[second] ?? 0) + 1;
  }
  return counts;
}

/** Lets the engine act on the time given: its pump done, every request in flight answered and its attempt seen. */
async function answered(t: TestHerald): Promise<void> {
  for (;;) {
    await t.herald.idle();
    const before = t.attempts.length;
    if ((await t.herald.status()).inFlight === 0) return;
    await attemptsSeen(t, before + 1);
  }
}

describe('Rate limit per endpoint (engine, end to end on SQLite)', () => {
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

  context('when a limited endpoint and an unlimited one share a backlog', () => {
    it('sends the limited one its burst, then exactly perSecond a second; the other is not slowed', async () => {
      // Few in-flight permits for the node: a delivery waiting for a token must not hold one.
      t = await startHerald({ delivery: { maxInFlight: 4 } });
      sink = await startServer(() => ({ status: 200 }));
      const fast = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/fast` })).endpoint;
      const limited = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/limited`, concurrency: 8, rateLimit: { perSecond: 4, burst: 2 } }))
        .endpoint;
      expect(limited.rateLimit).to.deep.equal({ perSecond: 4, burst: 2 });
      expect(fast.rateLimit).to.equal(null);
      const t0 = t.clock.now();
      const ofLimited = (a: AttemptEvent): boolean => a.endpointId === limited.id;
      await t.herald.publish(events(20));

      // Every delivery of the unlimited endpoint goes out with the clock standing still.
      const fastAttempts = await attemptsSeen(t, 20, (a) => a.endpointId === fast.id);
      expect(fastAttempts.every((a) => a.startedAt === t0 && a.settlement.kind === 'delivered')).to.equal(true);
      await attemptsSeen(t, 2, ofLimited);
      await t.herald.idle();
      expect(t.attempts.filter(ofLimited), 'the burst, nothing more while time stands still').to.have.length(2);

      // Then one token every 250 ms, each used the moment it comes.
      for (let n = 3; n <= 20; n++) {
        t.clock.advance(250);
        await attemptsSeen(t, n, ofLimited);
      }
      const limitedAttempts = t.attempts.filter(ofLimited);
      expect(limitedAttempts.map((a) => a.startedAt - t0)).to.deep.equal([0, 0, ...Array.from({ length: 18 }, (_, i) => 250 * (i + 1))]);
      expect(perSecond(limitedAttempts, t0)).to.deep.equal([5, 4, 4, 4, 3]);
      expect(limitedAttempts.every((a) => a.settlement.kind === 'delivered')).to.equal(true);
      expect(t.attempts.filter((a) => a.endpointId === fast.id), 'the fast endpoint got no more attempts').to.have.length(20);
    });

    it('claims only what it can send within a second, and counts the deliveries waiting for a token as queued', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 16, rateLimit: { perSecond: 2, burst: 2 } });
      await t.herald.publish(events(50));
      await attemptsSeen(t, 2);
      await t.herald.idle();
      // 2 sent at once; the tokens of the next second (at 500 and 1000 ms) have a delivery waiting each.
      const claimed = await t.herald.listDeliveries({ endpointId: endpoint.id, status: 'in_flight' });
      expect(claimed).to.have.length(2);
      const actor = (await t.herald.status()).actors.find((a) => a.endpointId === endpoint.id);
      expect(actor).to.include({ queued: 2, running: 0 });
      expect(await t.herald.listDeliveries({ endpointId: endpoint.id, status: 'pending', limit: 1000 })).to.have.length(46);
    });
  });

  context('when the endpoint allows more tokens than requests at once', () => {
    it('still sends no more than its concurrency at once: a request needs a slot and a token', async () => {
      t = await startHerald();
      sink = await startServer(() => 'hold');
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, concurrency: 2, rateLimit: { perSecond: 100, burst: 100 } });
      await t.herald.publish(events(6));
      await sink.requests(2);
      await t.herald.idle();
      expect(sink.received).to.have.length(2);
      for (const held of sink.held.splice(0)) held.respond(200);
      await sink.requests(4);
      await attemptsSeen(t, 2);
      expect(sink.received).to.have.length(4);
      for (const held of sink.held.splice(0)) held.respond(200);
      await sink.requests(6);
      for (const held of sink.held.splice(0)) held.respond(200);
      await attemptsSeen(t, 6);
    });
  });

  context('when a delivery is retried, then dies and is replayed', () => {
    it('takes a token for the retry and for the replay as for a first attempt', async () => {
      t = await startHerald();
      const answers = [503, 400, 200];
      sink = await startServer((_, index) => ({ status: answers[index] ?? 200 }));
      // One token every 2 s; the retry falls due after about 1 s.
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, retry: { schedule: ['PT1S', 'PT1S'] }, rateLimit: { perSecond: 0.5 } });
      const t0 = t.clock.now();
      await t.herald.publish(events(1));
      await attemptsSeen(t, 1);
      t.clock.advance(1_900);
      await t.herald.idle();
      expect(t.attempts, 'the retry is due, its token is not').to.have.length(1);
      t.clock.advance(100);
      await attemptsSeen(t, 2);
      expect(t.attempts[1]?.settlement.kind).to.equal('dead');

      // Replayed at once, sent when the next token comes (it waits in the store until then).
      const [letter] = await t.herald.listDeadLetters({});
      await t.herald.replayDeadLetter(letter?.id ?? '');
      await t.herald.idle();
      expect(t.attempts).to.have.length(2);
      t.clock.advance(2_000);
      await attemptsSeen(t, 3);
      expect(t.attempts.map((a) => a.startedAt - t0)).to.deep.equal([0, 2_000, 4_000]);
      expect(t.attempts[2]?.settlement.kind).to.equal('delivered');
    });
  });

  context('when the next token is more than a second away', () => {
    it('gives the delivery back to the store, due when its token is, and sends it then', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, rateLimit: { perSecond: 0.1 } });
      expect(endpoint.rateLimit).to.deep.equal({ perSecond: 0.1, burst: 1 });
      const t0 = t.clock.now();
      const released: Array<{ until: number; why: string }> = [];
      t.herald.events.on('released', (e) => released.push({ until: e.until, why: e.why }));
      await t.herald.publish(events(3));
      await attemptsSeen(t, 1);
      await t.herald.idle();
      expect(released, 'the two claimed with the first, not held for 10 and 20 s').to.deep.equal([
        { until: t0 + 10_000, why: 'rate limit' },
        { until: t0 + 10_000, why: 'rate limit' },
      ]);
      const pending = await t.herald.listDeliveries({ endpointId: endpoint.id, status: 'pending' });
      expect(pending.map((d) => [d.nextAttemptAt, d.attempts])).to.deep.equal([
        [t0 + 10_000, 0],
        [t0 + 10_000, 0],
      ]);

      t.clock.advance(9_999);
      await t.herald.idle();
      expect(t.attempts).to.have.length(1);
      // Due at 10 s: the wake-up comes at the next tick of the timer wheel (engine.tickMs, 100 ms).
      t.clock.advance(101);
      await attemptsSeen(t, 2);
      // The third is claimed once its token is within a second, and sent when it comes.
      t.clock.advance(10_000);
      await attemptsSeen(t, 3);
      expect(t.attempts.map((a) => a.startedAt - t0)).to.deep.equal([0, 10_100, 20_100]);
    });
  });

  context('when a slow endpoint has a backlog', () => {
    it('sends at its rate, claiming about what it sends instead of a discovery share it would give back', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, rateLimit: { perSecond: 0.5 } });
      let givenBack = 0;
      t.herald.events.on('released', (e) => {
        if (e.why === 'rate limit') givenBack += 1;
      });
      const t0 = t.clock.now();
      await t.herald.publish(events(40));
      await attemptsSeen(t, 1);
      for (let n = 2; n <= 11; n++) {
        t.clock.advance(2_000);
        await attemptsSeen(t, n);
      }
      expect(t.attempts.map((a) => a.startedAt - t0)).to.deep.equal(Array.from({ length: 11 }, (_, i) => i * 2_000));
      // The new actor's first claim and its first discovery (8 each, 1 kept); a discovery's share
      // every sweep would give back 7 per attempt.
      expect(givenBack).to.be.at.most(14);
    });
  });

  context('when a crashed node left more deliveries in flight than a discovery takes', () => {
    it('picks them all up: the first discoveries, then one every 30 s, look for them', async () => {
      t = await startHerald({}, { start: false });
      sink = await startServer(() => ({ status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, rateLimit: { perSecond: 2 } });
      // A node that fanned out 20 events, claimed every delivery and vanished: they stay in flight under its epoch.
      const { store, slotCount } = t.herald;
      const now = t.clock.now();
      const slots = Array.from({ length: slotCount }, (_, i) => i);
      const published = await t.herald.publish(events(20));
      await store.acquireLeases({ owner: 'node_gone', slots, now, leaseMs: 60_000 });
      const endpoints = await store.listEndpoints({ tenantId: 'acme' });
      await store.recordFanOuts(published.map((e) => ({ eventId: e.id, deliveries: planDeliveries(e, endpoints, slotCount, now) })), now);
      const orphans = await store.claimDue({ owner: 'node_gone', now, limit: 100, perEndpointLimit: 100, skipEndpointIds: [] });
      expect(orphans).to.have.length(20);
      await store.releaseLeases('node_gone', slots);

      await t.herald.start();
      await answered(t);
      const t0 = t.clock.now();
      for (let step = 0; step < 100 && t.attempts.length < 20; step++) {
        t.clock.advance(500);
        await answered(t);
      }
      expect(t.attempts).to.have.length(20);
      const times = t.attempts.map((a) => a.startedAt - t0);
      // The first discoveries take 8 each (a share of engine.claimPerEndpoint), sent at the rate;
      // the last 4 are found by the discovery 30 s after the actor's first, and sent at the rate.
      expect(times.slice(0, 16)).to.deep.equal([0, 0, ...Array.from({ length: 14 }, (_, i) => 500 * (i + 1))]);
      const found = times[16]!;
      expect(found).to.be.within(30_000, 32_000);
      expect(times.slice(16)).to.deep.equal([found, found, found + 500, found + 1_000]);
      expect(t.attempts.every((a) => a.settlement.kind === 'delivered')).to.equal(true);
      expect(new Set(t.attempts.map((a) => a.deliveryId)).size).to.equal(20);
    });
  });

  context('when the limit is changed on a running actor', () => {
    it('sends at the new rate at once, and without a limit once it is lifted', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, rateLimit: { perSecond: 1, burst: 1 } });
      const t0 = t.clock.now();
      await t.herald.publish(events(12));
      await attemptsSeen(t, 1);
      t.clock.advance(1_000);
      await attemptsSeen(t, 2);
      t.clock.advance(500);
      await t.herald.idle();
      expect(t.attempts).to.have.length(2);

      // Half a token held at 1.5 s: at 10/s the next comes 50 ms later, then one every 100 ms.
      const patched = await t.herald.updateEndpoint(endpoint.id, { rateLimit: { perSecond: 10, burst: 1 } });
      expect(patched.rateLimit).to.deep.equal({ perSecond: 10, burst: 1 });
      t.clock.advance(50);
      await attemptsSeen(t, 3);
      t.clock.advance(100);
      await attemptsSeen(t, 4);
      await t.herald.idle();
      expect(t.attempts.map((a) => a.startedAt - t0)).to.deep.equal([0, 1_000, 1_550, 1_650]);
      // Claimed deliveries not sent yet wait for their tokens; the others were given back to the store.
      const waiting = await t.herald.listDeliveries({ endpointId: endpoint.id, status: 'in_flight' });
      const givenBack = await t.herald.listDeliveries({ endpointId: endpoint.id, status: 'pending' });
      expect(waiting.length).to.be.greaterThan(0);
      expect(waiting.length + givenBack.length).to.equal(8);

      // Lifted: those waiting for a token go at once, with the clock standing still.
      const lifted = await t.herald.updateEndpoint(endpoint.id, { rateLimit: null });
      expect(lifted.rateLimit).to.equal(null);
      await attemptsSeen(t, 4 + waiting.length);
      expect(t.attempts.slice(4).every((a) => a.startedAt - t0 === 1_650)).to.equal(true);

      // Those given back go when due (their token's time under the old limit), all at once, at the
      // timer wheel's first tick from then (engine.tickMs, 100 ms).
      const dueTimes = [...new Set(givenBack.map((d) => d.nextAttemptAt))].sort((a, b) => a - b);
      let sent = t.attempts.length;
      for (const at of dueTimes) {
        t.clock.advanceTo(at + 100);
        sent += givenBack.filter((d) => d.nextAttemptAt === at).length;
        await attemptsSeen(t, sent);
      }
      expect(sent).to.equal(12);
      const due = new Map(givenBack.map((d) => [d.id, d.nextAttemptAt]));
      for (const a of t.attempts.filter((x) => due.has(x.deliveryId))) {
        expect(a.startedAt - (due.get(a.deliveryId) ?? 0)).to.be.within(0, 100);
      }
      expect((await t.herald.getEndpoint(endpoint.id)).rateLimit).to.equal(null);
    });
  });

  context('when the node closes while deliveries wait for a token', () => {
    it('gives them back at once instead of waiting for their tokens', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url, rateLimit: { perSecond: 1, burst: 1 } });
      await t.herald.publish(events(2));
      await attemptsSeen(t, 1);
      await t.herald.idle();
      const shutdown = nextEvent(t.herald.events, 'released', (e) => e.why === 'shutdown');
      const closing = t.close();
      t = undefined;
      expect((await shutdown).why).to.equal('shutdown');
      await closing;
    });
  });
});
