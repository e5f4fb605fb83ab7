import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { EndpointActor, type ActorDeps, type SendResult } from '../../lib/engine/actor.ts';
import { BreakerFamily } from '../../lib/engine/breaker.ts';
import { SendPermits } from '../../lib/engine/send-permits.ts';
import { defaultConfig } from '../../lib/config/config.ts';
import type { DeliveryJob, Endpoint } from '../../lib/model.ts';

const OK: SendResult = { outcome: { kind: 'response', status: 200, location: null, retryAfter: null, body: '' }, durationMs: 1 };

function endpoint(now: number, concurrency: number): Endpoint {
  return {
    id: 'ep_1', tenantId: 'acme', url: 'https://hooks.example.com/ep_1', description: '', eventTypes: ['*'], retry: { preset: 'default' },
    timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency, status: 'enabled', disabledReason: null, failingSince: null,
    secrets: [], createdAt: now, updatedAt: now,
  };
}

function job(name: string, round: number, now: number): DeliveryJob {
  return {
    delivery: {
      id: `dlv_${name}`, eventId: `evt_${name}`, endpointId: 'ep_1', tenantId: 'acme', eventType: 'a.b', slot: 0, status: 'in_flight',
      attempts: 0, round, nextAttemptAt: now, leaseEpoch: 1, lastError: null, createdAt: now, updatedAt: now, deliveredAt: null,
      sequence: null, orderingKey: null,
    },
    event: { id: `evt_${name}`, tenantId: 'acme', type: 'a.b', payload: JSON.stringify({ name }), createdAt: now, endpointId: null, orderingKey: null },
  };
}

/** An actor's deps whose sends wait for `answers` to be called, recording what was sent and given back. */
function harness(clock: ManualClock) {
  const config = defaultConfig();
  const breakers = new BreakerFamily(clock, config.breaker);
  const sent: string[] = [];
  const answers: Array<() => void> = [];
  const givenBack: string[] = [];
  const deps: ActorDeps = {
    clock,
    random: () => 0.5,
    permits: new SendPermits({ maxInFlight: 100, originDepth: 32 }),
    breakers,
    createTimers: () => ({ schedule: () => {}, size: 0, close: () => {} }),
    health: config.health,
    disableOnGone: false,
    emit: () => {},
    sign: async () => ({}),
    send: (request) => {
      sent.push((JSON.parse(request.body) as { name: string }).name);
      return new Promise<SendResult>((resolve) => answers.push(() => resolve(OK)));
    },
    settle: async (settlement) => {
      if (settlement.kind === 'release') givenBack.push(settlement.deliveryId.slice('dlv_'.length));
      return true;
    },
    wake: () => {},
    listAttempts: async () => [],
    disable: async () => {},
  };
  return { deps, sent, answers, givenBack, close: () => breakers.close() };
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('EndpointActor mailbox lanes', () => {
  context('when an endpoint at concurrency 1 has replays queued and a new event arrives', () => {
    it('sends the new event before the queued replays, and the replays in their order', async () => {
      const clock = new ManualClock();
      const { deps, sent, answers, close } = harness(clock);
      const actor = new EndpointActor(endpoint(clock.now(), 1), deps);

      for (const name of ['replay-1', 'replay-2', 'replay-3']) actor.enqueue(job(name, 1, clock.now()));
      await settle();
      expect(sent, 'one at a time: the first replay is out, two wait').to.deep.equal(['replay-1']);
      actor.enqueue(job('new', 0, clock.now()));
      for (let i = 0; i < 4; i++) {
        answers.shift()?.();
        await settle();
      }
      expect(sent).to.deep.equal(['replay-1', 'new', 'replay-2', 'replay-3']);
      await actor.close();
      close();
    });
  });

  context('when an endpoint at concurrency 4 has more replays than slots', () => {
    it('keeps a slot free of replays, so a new event goes out at once; closing gives back the replays still waiting', async () => {
      const clock = new ManualClock();
      const { deps, sent, answers, givenBack, close } = harness(clock);
      const actor = new EndpointActor(endpoint(clock.now(), 4), deps);

      for (let i = 1; i <= 6; i++) actor.enqueue(job(`replay-${i}`, 1, clock.now()));
      await settle();
      expect(sent, 'three of the four slots').to.deep.equal(['replay-1', 'replay-2', 'replay-3']);
      expect([actor.running, actor.queued]).to.deep.equal([3, 3]);
      expect(actor.capacity(clock.now()), 'room to claim new events: 2 × 4 less the 6 held').to.equal(2);

      actor.enqueue(job('new', 0, clock.now()));
      await settle();
      expect(sent, 'with every replay still out').to.deep.equal(['replay-1', 'replay-2', 'replay-3', 'new']);

      answers.shift()!();
      await settle();
      expect(sent.at(-1), 'a replay that finishes lets the next one in').to.equal('replay-4');

      const closed = actor.close();
      await settle();
      expect(givenBack).to.deep.equal(['replay-5', 'replay-6']);
      for (const answer of answers.splice(0)) answer();
      await closed;
      close();
    });
  });
});
