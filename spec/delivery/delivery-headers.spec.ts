import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { deliveryHeaders } from '../../lib/delivery/delivery-headers.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

describe('deliveryHeaders', () => {
  it('holds the three Standard Webhooks headers and an idempotency-key equal to webhook-id', () => {
    expect(deliveryHeaders('evt_1', 1_767_225_600, { signature: 'v1,abc', sequenceSignature: null })).to.deep.equal({
      'webhook-id': 'evt_1',
      'webhook-timestamp': '1767225600',
      'webhook-signature': 'v1,abc',
      'idempotency-key': 'evt_1',
    });
  });

  it('adds webhook-sequence and its signature for a delivery with a sequence number, and only then', () => {
    expect(deliveryHeaders('evt_1', 1_767_225_600, { signature: 'v1,abc', sequenceSignature: 'v1,def' }, 42)).to.deep.equal({
      'webhook-id': 'evt_1',
      'webhook-timestamp': '1767225600',
      'webhook-signature': 'v1,abc',
      'idempotency-key': 'evt_1',
      'webhook-sequence': '42',
      'webhook-sequence-signature': 'v1,def',
    });
    // A delivery from before the numbering: no sequence headers.
    expect(deliveryHeaders('evt_1', 1_767_225_600, { signature: 'v1,abc', sequenceSignature: null }, null)).to.not.have.property('webhook-sequence');
  });
});

describe('Idempotency-Key (engine, real HTTP)', () => {
  let t: TestHerald | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
    t = undefined;
  });

  context('when an event is retried, dead-lettered and replayed', () => {
    it('sends Idempotency-Key equal to webhook-id, the event id, on the first attempt, the retry and the replay', async () => {
      t = await startHerald();
      // 503 (retried), then 404 (dead-lettered at once), then 200 for the replay.
      const answers = [503, 404, 200];
      sink = await startServer((_, index) => ({ status: answers[index] ?? 200 }));
      const { endpoint, secret } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const [event] = await t.herald.publish({ tenantId: 'acme', type: 'lead.stage_changed', payload: { leadId: 42 } });

      const [first] = await attemptsSeen(t, 1);
      if (first?.settlement.kind !== 'retry') expect.fail(`expected a retry, got ${first?.settlement.kind}`);
      t.clock.advanceTo(first.settlement.nextAttemptAt);
      const [, second] = await attemptsSeen(t, 2);
      expect(second?.settlement.kind).to.equal('dead');

      const [letter] = await t.herald.listDeadLetters({ endpointId: endpoint.id });
      await t.herald.replayDeadLetter(letter?.id ?? '');
      const [, , third] = await attemptsSeen(t, 3);
      expect(third?.settlement.kind).to.equal('delivered');

      const received = await sink.requests(3);
      expect(received.map((r) => r.headers['webhook-id'])).to.deep.equal([event?.id, event?.id, event?.id]);
      expect(received.map((r) => r.headers['idempotency-key'])).to.deep.equal([event?.id, event?.id, event?.id]);
      // The extra header does not disturb Standard Webhooks verification of any of them.
      for (const request of received) {
        expect(() => new Webhook(secret).verify(request.body, request.headers as Record<string, string>)).to.not.throw();
      }
    });
  });
});
