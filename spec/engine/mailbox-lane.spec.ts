import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import { EndpointActor, type ActorDeps, type SendResult } from '../../lib/engine/actor.ts';
import { BreakerFamily } from '../../lib/engine/breaker.ts';
import { SendPermits } from '../../lib/engine/send-permits.ts';
import { defaultConfig } from '../../lib/config/config.ts';
import type { DeliveryJob, Endpoint } from '../../lib/model.ts';

const OK: SendResult = { outcome: { kind: 'response', status: 200, location: null, retryAfter: null, body: '' }, durationMs: 1 };

function endpoint(now: number): Endpoint {
  return {
    id: 'ep_1', tenantId: 'acme', url: 'https://hooks.example.com/ep_1', description: '', eventTypes: ['*'], retry: { preset: 'default' },
    timeoutMs: 10_000, mode: 'at-least-once', ordering: 'none', concurrency: 1, status: 'enabled', disabledReason: null, failingSince: null,
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

describe('EndpointActor mailbox lanes', () => {
  context('when an endpoint at concurrency 1 has replays queued and a new event arrives', () => {
    it('sends the new event before the queued replays, and the replays in their order', async () => {
      const clock = new ManualClock();
      const config = defaultConfig();
      const breakers = new BreakerFamily(clock, config.breaker);
      const sent: string[] = [];
      const answers: Array<() => void> = [];
      const deps: ActorDeps = {
        clock,
        random: () => 0.5,
        limiter: new SendPermits({ maxInFlight: 100, originDepth: 2 }),
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
        settle: async () => true,
        wake: () => {},
        listAttempts: async () => [],
        disable: async () => {},
      };
      const actor = new EndpointActor(endpoint(clock.now()), deps);
      const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

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
      breakers.close();
    });
  });
});
