import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { verify } from '../../lib/signing/verify.ts';
import { attemptsSeen, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';

describe('webhook-sequence (engine, real HTTP)', () => {
  let t: TestHerald | undefined;
  let sink: TestServer | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
    t = undefined;
  });

  context('when events are delivered to two endpoints', () => {
    it('numbers each endpoint\'s requests 1, 2, … in a signed header that verify() returns and standardwebhooks ignores', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      const a = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/a` });
      const b = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/b`, eventTypes: ['order.*'] });
      await t.herald.publish({ tenantId: 'acme', type: 'invoice.paid', payload: { n: 1 } });
      await t.herald.publish({ tenantId: 'acme', type: 'order.placed', payload: { n: 2 } });
      await t.herald.publish({ tenantId: 'acme', type: 'order.placed', payload: { n: 3 } });
      const received = await sink.requests(5);
      const sequences = (path: string) =>
        received.filter((r) => r.path === path).map((r) => [JSON.parse(r.body).n, r.headers['webhook-sequence']]).sort((x, y) => x[0] - y[0]);
      expect(sequences('/a')).to.deep.equal([[1, '1'], [2, '2'], [3, '3']]);
      expect(sequences('/b')).to.deep.equal([[2, '1'], [3, '2']]);
      for (const request of received) {
        const secret = request.path === '/a' ? a.secret : b.secret;
        const headers = request.headers as Record<string, string>;
        expect(() => new Webhook(secret).verify(request.body, headers)).to.not.throw();
        const verified = verify({ payload: request.body, headers, secret, sequence: 'required', nowSec: Math.floor(t.clock.now() / 1000) });
        expect(verified.sequence).to.equal(Number(headers['webhook-sequence']));
        expect(headers['webhook-sequence-signature']).to.match(/^v1,[A-Za-z0-9+/]+=*$/);
      }
    });
  });

  context('when a delivery is retried, dead-lettered and replayed', () => {
    it('sends the number of its first attempt on the retry and the replay, so the replay fills the gap', async () => {
      t = await startHerald();
      const answers = [503, 404, 200, 200];
      sink = await startServer((_, index) => ({ status: answers[index] ?? 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'lead.created', payload: { n: 1 } });

      const [first] = await attemptsSeen(t, 1);
      if (first?.settlement.kind !== 'retry') expect.fail(`expected a retry, got ${first?.settlement.kind}`);
      t.clock.advanceTo(first.settlement.nextAttemptAt);
      const [, second] = await attemptsSeen(t, 2);
      expect(second?.settlement.kind).to.equal('dead');
      // The next event is numbered 2 while number 1 is dead-lettered: the consumer sees a gap.
      await t.herald.publish({ tenantId: 'acme', type: 'lead.created', payload: { n: 2 } });
      await attemptsSeen(t, 3);
      const gap = await t.herald.listEndpointEvents(endpoint.id, { after: 0, limit: 10 });
      expect(gap.data.map((d) => [d.sequence, d.status])).to.deep.equal([[1, 'dead'], [2, 'delivered']]);

      const [letter] = await t.herald.listDeadLetters({ endpointId: endpoint.id });
      await t.herald.replayDeadLetter(letter?.id ?? '');
      await attemptsSeen(t, 4);
      const received = await sink.requests(4);
      expect(received.map((r) => [JSON.parse(r.body).n, r.headers['webhook-sequence']])).to.deep.equal([[1, '1'], [1, '1'], [2, '2'], [1, '1']]);
      const filled = await t.herald.listEndpointEvents(endpoint.id, { after: 0, limit: 10 });
      expect(filled.data.map((d) => [d.sequence, d.status])).to.deep.equal([[1, 'delivered'], [2, 'delivered']]);
    });
  });

  context('when a test event is sent to an endpoint', () => {
    it('numbers it like any other delivery', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'lead.created', payload: { n: 1 } });
      const { deliveryId } = await t.herald.sendTestEvent(endpoint.id);
      const received = await sink.requests(2);
      expect(received.map((r) => r.headers['webhook-sequence']).sort()).to.deep.equal(['1', '2']);
      expect((await t.herald.getDelivery(deliveryId)).sequence).to.equal(2);
    });
  });
});
