import { expect } from 'chai';
import { EventEmitter, once } from 'node:events';
import { Writable } from 'node:stream';
import { ManualClock } from '../../lib/clock.ts';
import { configFromEnv, resolveConfig } from '../../lib/config/config.ts';
import type { EngineEvents, OperationalEvent } from '../../lib/engine/engine-events.ts';
import { createLogger, logEngineEvents } from '../../lib/logging.ts';
import { generateSecret } from '../../lib/signing/secret.ts';
import { verify } from '../../lib/signing/verify.ts';
import { MetricName } from '../../lib/status/metric-names.ts';
import { OperatorWebhook, type OperatorMessage } from '../../lib/status/operator-webhook.ts';
import { attemptsSeen, nextEvent, startServer, type TestServer } from '../support/harness.ts';
import { sample, startStatus, type StatusFixture } from '../api/status-fixture.ts';

const HOUR = 3_600_000;

const EVENT = { type: 'endpoint.failing', endpointId: 'ep_1', tenantId: 'acme', at: 1_000, windowMs: HOUR, detail: 'more than 10 failures within 1 h' } satisfies OperationalEvent;

/** Resolves at the webhook's next report of a finished send. */
function nextSend(webhook: OperatorWebhook): Promise<void> {
  const names = ['delivered', 'retrying', 'failed'] as const;
  return new Promise((resolve) => {
    const done = (): void => {
      for (const name of names) webhook.off(name, done);
      resolve();
    };
    for (const name of names) webhook.on(name, done);
  });
}

describe('OperatorWebhook', () => {
  let sink: TestServer | undefined;
  let webhook: OperatorWebhook | undefined;

  afterEach(async () => {
    await webhook?.close();
    webhook = undefined;
    await sink?.close();
    sink = undefined;
  });

  context('when the sink fails once, then answers 200', () => {
    it('retries after the backoff on the injected clock, with the same webhook-id, signed so verify() accepts it', async () => {
      const clock = new ManualClock(Date.now());
      const secret = generateSecret();
      const receivedAt: number[] = [];
      sink = await startServer((_, index) => {
        receivedAt.push(clock.now());
        return { status: index === 0 ? 503 : 200 };
      });
      webhook = new OperatorWebhook({ url: `${sink.url}/ops`, secret, backoffMs: 2_000, node: 'node_1' }, clock);
      const retrying = once(webhook, 'retrying');
      webhook.notify(EVENT);
      const [retry] = (await retrying) as [{ attempt: number; at: number; error: string }];
      expect(retry).to.include({ attempt: 1, error: 'HTTP 503', at: clock.now() + 2_000 });

      clock.advance(1_999);
      expect(sink.received).to.have.length(1);
      const delivered = once(webhook, 'delivered');
      clock.advance(1);
      const [done] = (await delivered) as [{ attempts: number; message: OperatorMessage }];
      expect(done.attempts).to.equal(2);

      const [first, second] = sink.received;
      expect(first?.headers['webhook-id']).to.equal(second?.headers['webhook-id']).and.equal(done.message.id);
      expect(JSON.parse(second?.body ?? '')).to.deep.equal({ id: done.message.id, node: 'node_1', ...EVENT });
      expect(second?.headers['user-agent']).to.equal('Herald-Operator/0.1');
      sink.received.forEach((request, i) => {
        const nowSec = Math.floor((receivedAt[i] ?? 0) / 1000);
        expect(() => verify({ payload: request.body, headers: request.headers, secret, nowSec })).to.not.throw();
        expect(() => verify({ payload: request.body, headers: request.headers, secret: generateSecret(), nowSec })).to.throw();
      });
      expect(webhook.queued).to.equal(0);
    });
  });

  context('when the sink never answers well', () => {
    it('gives up after maxAttempts, times out a hung request on the clock, and drops the oldest beyond maxQueued', async () => {
      const clock = new ManualClock(Date.now());
      sink = await startServer((_, index) => (index === 0 ? 'hold' : { status: 500 }));
      webhook = new OperatorWebhook({ url: sink.url, secret: generateSecret(), maxAttempts: 2, backoffMs: 100, timeoutMs: 1_000, maxQueued: 1 }, clock);
      const failures: string[] = [];
      const dropped: string[] = [];
      webhook.on('failed', (e) => failures.push(e.error));
      webhook.on('dropped', (e) => dropped.push(e.message.type));

      webhook.notify(EVENT);
      await sink.requests(1);
      const timedOut = once(webhook, 'retrying');
      clock.advance(1_000);
      expect(((await timedOut) as [{ error: string }])[0].error).to.equal('timeout after 1 s');
      const failed = once(webhook, 'failed');
      clock.advance(100);
      await failed;
      expect(failures).to.deep.equal(['HTTP 500']);
      expect(sink.received).to.have.length(2);

      // Two at once with room for one: the first is dropped, and sending never throws into the caller.
      webhook.notify({ ...EVENT, type: 'endpoint.disabled', reason: 'failing' });
      webhook.notify({ ...EVENT, type: 'delivery.exhausted' });
      expect(dropped).to.deep.equal(['endpoint.disabled']);
      expect(webhook.queued).to.equal(1);
      await nextSend(webhook);
    });
  });

  context('when closed with a retry waiting', () => {
    it('cancels it and sends nothing more', async () => {
      const clock = new ManualClock(Date.now());
      sink = await startServer(() => ({ status: 500 }));
      webhook = new OperatorWebhook({ url: sink.url, secret: generateSecret(), backoffMs: 100 }, clock);
      const retrying = once(webhook, 'retrying');
      webhook.notify(EVENT);
      await retrying;
      await webhook.close();
      clock.advance(10_000);
      expect(sink.received).to.have.length(1);
      expect(webhook.queued).to.equal(0);
      webhook.notify(EVENT);
      expect(webhook.queued).to.equal(0);
    });
  });

  context('when configured', () => {
    it('reads operator.* from the environment, and refuses a URL without a secret or a bad secret, naming the key and hiding the secret', () => {
      const secret = generateSecret();
      const config = resolveConfig(configFromEnv({ HERALD_OPERATOR_WEBHOOK_URL: 'https://ops.example/herald', HERALD_OPERATOR_SECRET: secret }));
      expect(config.operator).to.deep.equal({ webhookUrl: 'https://ops.example/herald', secret, maxAttempts: 5, backoffMs: 1_000, timeoutMs: 5_000 });
      expect(() => resolveConfig({ operator: { webhookUrl: 'https://ops.example/herald' } })).to.throw(/operator\.secret.*must be set/);
      expect(() => resolveConfig({ operator: { webhookUrl: 'mailto:ops@example.com', secret } })).to.throw(/operator\.webhookUrl/);
      let message = '';
      try {
        resolveConfig({ operator: { webhookUrl: 'https://ops.example/herald', secret: 'not-a-secret-at-all' } });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).to.include('operator.secret').and.not.include('not-a-secret-at-all');
      expect(() => resolveConfig({ logFormat: 'xml' as never })).to.throw(/logFormat/);
    });
  });

  context('when the options are invalid', () => {
    it('names the option', () => {
      const clock = new ManualClock();
      expect(() => new OperatorWebhook({ url: 'ftp://x', secret: generateSecret() }, clock)).to.throw(/operator\.webhookUrl/);
      expect(() => new OperatorWebhook({ url: 'http://x', secret: 'plain' }, clock)).to.throw(/operator\.secret/);
      expect(() => new OperatorWebhook({ url: 'http://x', secret: generateSecret(), maxAttempts: 0 }, clock)).to.throw(/operator\.maxAttempts/);
    });
  });
});

/** The JSON lines the engine's events are logged as (`logEngineEvents`), as they are written. */
function engineLogLines(herald: { readonly events: EventEmitter<EngineEvents> }): string[] {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  logEngineEvents(herald, createLogger('info', { format: 'json', destination }));
  return lines;
}

describe('Operational events (engine → log, metrics, operator webhook)', () => {
  let f: StatusFixture | undefined;
  let sink: TestServer | undefined;
  let opsSink: TestServer | undefined;
  let webhook: OperatorWebhook | undefined;

  afterEach(async () => {
    await webhook?.close();
    webhook = undefined;
    await f?.close();
    f = undefined;
    await sink?.close();
    sink = undefined;
    await opsSink?.close();
    opsSink = undefined;
  });

  context('when one endpoint fails until disabled, one fails then recovers, and one answers 410 (disabled at once)', () => {
    it('emits each transition once, and logs, counts and POSTs each one, signed', async () => {
      f = await startStatus({
        health: { disableAfterMs: 2.5 * HOUR, failingThreshold: 2, failingWindowMs: 24 * HOUR },
        breaker: { volumeThreshold: 1_000 },
      });
      const { t } = f;
      const secret = generateSecret();
      const lines = engineLogLines(t.herald);
      // The webhook's own clock: the engine's jumps by hours would time out its requests in flight.
      const opsClock = new ManualClock(t.clock.now());
      const receivedAt: number[] = [];
      opsSink = await startServer((_, index) => {
        receivedAt.push(opsClock.now());
        return { status: index === 0 ? 503 : 200 };
      });
      webhook = new OperatorWebhook({ url: opsSink.url, secret, node: t.herald.nodeId }, opsClock).attach(t.herald.events);
      f.server.metrics.observeOperatorWebhook(webhook);

      const calls = new Map<string, number>();
      sink = await startServer((request) => {
        const n = calls.get(request.path) ?? 0;
        calls.set(request.path, n + 1);
        if (request.path === '/c') return { status: 410 };
        if (request.path === '/b') return { status: n < 3 ? 500 : 200 };
        return { status: 500 };
      });
      const schedule = { schedule: ['PT1H', 'PT1H', 'PT1H', 'PT1H', 'PT1H', 'PT1H'] };
      const ids: Record<string, string> = {};
      for (const name of ['a', 'b', 'c']) {
        ids[name] = (await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/${name}`, retry: schedule })).endpoint.id;
      }
      const operational: OperationalEvent[] = [];
      t.herald.events.on('operational', (e) => operational.push(e));
      const expected = [
        ['endpoint.failing', ids.a],
        ['endpoint.disabled', ids.a],
        ['endpoint.failing', ids.b],
        ['endpoint.recovered', ids.b],
        ['delivery.exhausted', ids.c],
        ['endpoint.disabled', ids.c],
      ] as const;
      const arrivals = expected.map(([type, endpointId]) =>
        nextEvent(t.herald.events, 'operational', (e) => e.type === type && e.endpointId === endpointId),
      );

      await t.herald.publish(['a', 'b', 'c'].map((name) => ({ tenantId: 'acme', type: 'a.b', payload: { name }, endpointId: ids[name] })));
      // Step the clock from one due retry to the next until every transition has happened.
      const settled = async (): Promise<void> => {
        for (;;) {
          const next = nextEvent(t.herald.events, 'attempt');
          await t.herald.idle();
          if ((await t.herald.store.countDeliveries()).in_flight === 0) return;
          await next;
        }
      };
      await attemptsSeen(t, 3);
      for (let round = 0; round < 20; round++) {
        await settled();
        const due = await t.herald.store.nextDueAt();
        if (due === undefined) break;
        const made = t.attempts.length;
        t.clock.advanceTo(due);
        await attemptsSeen(t, made + 1);
      }
      await Promise.all(arrivals);
      await t.herald.idle();

      const seen = operational.map((e) => `${e.type} ${'endpointId' in e ? e.endpointId : '-'}`).sort();
      expect(seen).to.deep.equal(expected.map(([type, id]) => `${type} ${id}`).sort());

      // The operator sink gets each one (the first after a retry).
      while (webhook.queued > 0) {
        const sent = nextSend(webhook);
        opsClock.advance(1_000);
        await sent;
      }
      const byId = new Map(opsSink.received.map((request) => [request.headers['webhook-id'], JSON.parse(request.body) as OperatorMessage]));
      expect(opsSink.received).to.have.length(7);
      const posted = [...byId.values()];
      expect(posted.map((m) => `${m.type} ${'endpointId' in m ? m.endpointId : '-'}`).sort()).to.deep.equal(seen);
      // Why each endpoint was disabled reaches the operator as data, not only as prose.
      const disabledWhy = posted.flatMap((m) => (m.type === 'endpoint.disabled' ? [`${m.endpointId} ${m.reason}`] : [])).sort();
      expect(disabledWhy).to.deep.equal([`${ids.a} failing`, `${ids.c} gone`].sort());
      expect(posted.every((m) => m.node === t.herald.nodeId && 'tenantId' in m && m.tenantId === 'acme')).to.equal(true);
      opsSink.received.forEach((request, i) => {
        const nowSec = Math.floor((receivedAt[i] ?? 0) / 1000);
        expect(() => verify({ payload: request.body, headers: request.headers, secret, nowSec }), `request ${i}`).to.not.throw();
      });

      const metrics = (await f.api('GET', '/metrics', undefined, null)).text;
      expect(sample(metrics, MetricName.OPERATIONAL_EVENTS, { type: 'endpoint.failing' })).to.equal(2);
      expect(sample(metrics, MetricName.OPERATIONAL_EVENTS, { type: 'endpoint.disabled' })).to.equal(2);
      for (const type of ['endpoint.recovered', 'delivery.exhausted']) {
        expect(sample(metrics, MetricName.OPERATIONAL_EVENTS, { type }), type).to.equal(1);
      }
      expect(sample(metrics, MetricName.OPERATOR_WEBHOOK, { outcome: 'delivered' })).to.equal(6);

      const logged = lines.map((line) => JSON.parse(line) as { level: number; operational?: string; endpointId?: string; component?: string });
      const warnings = logged.filter((l) => l.operational !== undefined);
      expect(warnings.map((l) => `${l.operational} ${l.endpointId}`).sort()).to.deep.equal(seen);
      expect(warnings.every((l) => l.level === 40 && l.component === 'engine')).to.equal(true);
    });
  });

  context('when a dead letter stays unreviewed past deadLetters.reviewWithinMs', () => {
    it('logs deadletters.unreviewed once, counts it, POSTs it signed with the count and age, and exposes the backlog as gauges', async () => {
      const limit = 60_000;
      f = await startStatus({ deadLetters: { reviewWithinMs: limit, checkIntervalMs: 1_000 }, engine: { leaseMs: 600_000 } });
      const { t } = f;
      const secret = generateSecret();
      const lines = engineLogLines(t.herald);
      const opsClock = new ManualClock(t.clock.now());
      opsSink = await startServer(() => ({ status: 200 }));
      webhook = new OperatorWebhook({ url: opsSink.url, secret, node: t.herald.nodeId }, opsClock).attach(t.herald.events);
      f.server.metrics.observeOperatorWebhook(webhook);
      sink = await startServer(() => ({ status: 422 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'a.b', payload: {} });
      await attemptsSeen(t, 1);
      await t.herald.idle();
      const [letter] = await t.herald.listDeadLetters({});
      const gauges = async () => {
        const text = (await f!.api('GET', '/metrics', undefined, null)).text;
        return [sample(text, MetricName.DEAD_LETTERS_UNREVIEWED), sample(text, MetricName.OLDEST_UNREVIEWED_DEAD_LETTER)];
      };
      expect(await gauges()).to.deep.equal([1, (t.clock.now() - (letter?.createdAt ?? 0)) / 1000]);

      const ops = webhook;
      const sent = new Promise<void>((resolve) => {
        ops.on('delivered', ({ message }) => {
          if (message.type === 'deadletters.unreviewed') resolve();
        });
      });
      t.clock.advance(limit + 1_000);
      await sent;
      t.clock.advance(5_000);
      await t.herald.reviewDeadLetters();

      // The other message is the dead letter's own delivery.exhausted.
      const posted = opsSink.received.filter((r) => (JSON.parse(r.body) as OperatorMessage).type === 'deadletters.unreviewed');
      expect(posted).to.have.length(1);
      const [request] = posted;
      const message = JSON.parse(request?.body ?? '') as OperatorMessage;
      expect(message).to.deep.include({
        type: 'deadletters.unreviewed',
        node: t.herald.nodeId,
        count: 1,
        oldestAgeMs: limit + 1_000,
        oldestCreatedAt: letter?.createdAt,
        reviewWithinMs: limit,
      });
      expect(message.id).to.equal(request?.headers['webhook-id']);
      expect(() => verify({ payload: request?.body ?? '', headers: request?.headers ?? {}, secret, nowSec: Math.floor(opsClock.now() / 1000) })).to.not.throw();

      const text = (await f.api('GET', '/metrics', undefined, null)).text;
      expect(sample(text, MetricName.OPERATIONAL_EVENTS, { type: 'deadletters.unreviewed' })).to.equal(1);
      expect(await gauges()).to.deep.equal([1, (limit + 6_000) / 1000]);
      const logged = lines.map((line) => JSON.parse(line) as { level: number; operational?: string; count?: number; oldestAgeMs?: number; msg: string });
      const warnings = logged.filter((l) => l.operational === 'deadletters.unreviewed');
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.include({ level: 40, count: 1, oldestAgeMs: limit + 1_000 });
      expect(warnings[0]?.msg).to.equal('deadletters.unreviewed: 1 dead letter(s) wait for review; the oldest has waited 1 min 1 s (review within 1 min)');

      await t.herald.triageDeadLetter(letter?.id ?? '', 'discarded', { note: 'a test event', by: 'ops' });
      expect(await gauges(), 'no dead letter waits for review').to.deep.equal([0, 0]);
    });
  });

  context('when the engine emits without a listener for the operator', () => {
    it('does not need one (the webhook is optional)', () => {
      const events = new EventEmitter<EngineEvents>();
      expect(() => events.emit('operational', EVENT)).to.not.throw();
    });
  });
});
