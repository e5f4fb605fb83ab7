/**
 * Traces end to end with the official SDK registered: a producer's span at publish, the stored
 * trace context, the fan-out and attempt spans, and the `traceparent` a real consumer on 127.0.0.1
 * receives. Then the same without an SDK, and with `tracing.enabled` false.
 */
import { expect } from 'chai';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { SpanAttribute, SpanName } from '../../lib/tracing/span-names.ts';
import { attemptsSeen, closedPort, startHerald, startServer, type TestHerald, type TestServer } from '../support/harness.ts';
import { registerSdk, traceparentParts, type TestSdk } from './test-sdk.ts';

describe('Traces (engine, real HTTP)', () => {
  let t: TestHerald | undefined;
  let sink: TestServer | undefined;
  let sdk: TestSdk | undefined;

  afterEach(async () => {
    await sink?.close();
    sink = undefined;
    await t?.close();
    t = undefined;
    await sdk?.close();
    sdk = undefined;
  });

  context('with an SDK registered, an event published inside a producer span', () => {
    it('stores the publish span\'s traceparent; the attempt span is its child with the ids, and the consumer\'s traceparent is the attempt\'s', async () => {
      sdk = registerSdk();
      t = await startHerald();
      sink = await startServer(() => ({ status: 204 }));
      // A query string may carry a token: it is never recorded.
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/hooks?token=s3cret` });
      const producer = sdk.tracer;
      const [event] = await producer.startActiveSpan('checkout', async (span) => {
        try {
          return await t!.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: { order: 7 } });
        } finally {
          span.end();
        }
      });
      const [attempt] = await attemptsSeen(t, 1);
      const [request] = await sink.requests(1);

      const [checkout] = sdk.spans('checkout');
      const [publish] = sdk.spans(SpanName.PUBLISH);
      const [attemptSpan] = sdk.spans(SpanName.ATTEMPT);
      const traceId = checkout!.spanContext().traceId;
      // The publish span continues the producer's, and is what the event stores.
      expect(publish!.spanContext().traceId).to.equal(traceId);
      expect(publish!.parentSpanContext?.spanId).to.equal(checkout!.spanContext().spanId);
      expect(publish!.kind).to.equal(SpanKind.PRODUCER);
      expect(publish!.attributes).to.include({
        [SpanAttribute.PUBLISH_PATH]: 'herald',
        [SpanAttribute.EVENT_ID]: event!.id,
        [SpanAttribute.EVENT_COUNT]: 1,
        [SpanAttribute.TENANT_ID]: 'acme',
        [SpanAttribute.EVENT_TYPE]: 'order.paid',
      });
      expect(event!.traceContext).to.deep.equal({ traceparent: `00-${traceId}-${publish!.spanContext().spanId}-01` });
      expect((await t.herald.getDeliveryWithPayload(attempt!.deliveryId)).traceContext).to.deep.equal(event!.traceContext);

      // The attempt continues the producer's trace below the publish.
      expect(attemptSpan!.spanContext().traceId).to.equal(traceId);
      expect(attemptSpan!.parentSpanContext?.spanId).to.equal(publish!.spanContext().spanId);
      expect(attemptSpan!.kind).to.equal(SpanKind.CLIENT);
      expect(attemptSpan!.status.code).to.equal(SpanStatusCode.UNSET);
      expect(attemptSpan!.attributes).to.deep.equal({
        [SpanAttribute.HTTP_REQUEST_METHOD]: 'POST',
        [SpanAttribute.URL_FULL]: `${sink.url}/hooks`,
        [SpanAttribute.SERVER_ADDRESS]: '127.0.0.1',
        [SpanAttribute.SERVER_PORT]: sink.port,
        [SpanAttribute.HTTP_RESPONSE_STATUS_CODE]: 204,
        [SpanAttribute.DELIVERY_ID]: attempt!.deliveryId,
        [SpanAttribute.EVENT_ID]: event!.id,
        [SpanAttribute.ENDPOINT_ID]: endpoint.id,
        [SpanAttribute.TENANT_ID]: 'acme',
        [SpanAttribute.EVENT_TYPE]: 'order.paid',
        [SpanAttribute.ATTEMPT_NUMBER]: 1,
        [SpanAttribute.ATTEMPT_ROUND]: 0,
      });

      // The consumer's server span would be the attempt's child.
      expect(traceparentParts(request!.headers.traceparent)).to.deep.equal({ traceId, parentId: attemptSpan!.spanContext().spanId, flags: '01' });
      expect(request!.headers).to.not.have.property('tracestate');
    });

    it('makes one fan-out span per batch, linked to the events\' traces, with the deliveries it wrote', async () => {
      sdk = registerSdk();
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.createEndpoint({ tenantId: 'acme', url: `${sink.url}/second` });
      const [event] = await sdk.tracer.startActiveSpan('checkout', async (span) => {
        try {
          return await t!.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: {} });
        } finally {
          span.end();
        }
      });
      await attemptsSeen(t, 2);
      const [fanOut] = sdk.spans(SpanName.FAN_OUT);
      const [publish] = sdk.spans(SpanName.PUBLISH);
      expect(fanOut!.parentSpanContext).to.equal(undefined);
      expect(fanOut!.links.map((link) => link.context.spanId)).to.deep.equal([publish!.spanContext().spanId]);
      expect(fanOut!.attributes).to.include({ [SpanAttribute.EVENT_COUNT]: 1, [SpanAttribute.EVENT_ID]: event!.id, [SpanAttribute.DELIVERY_COUNT]: 2 });
      expect(fanOut!.attributes[SpanAttribute.EVENT_IDS]).to.deep.equal([event!.id]);
      // Both attempts are children of the publish, whatever batch fanned them out.
      expect(sdk.spans(SpanName.ATTEMPT).map((span) => span.parentSpanContext?.spanId)).to.deep.equal([publish!.spanContext().spanId, publish!.spanContext().spanId]);
    });
  });

  context('with an SDK registered, a failed attempt', () => {
    it('has ERROR status, the HTTP status, the failure kind and error.type', async () => {
      sdk = registerSdk();
      t = await startHerald();
      sink = await startServer(() => ({ status: 503 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      await t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: {} });
      const [attempt] = await attemptsSeen(t, 1);
      expect(attempt!.settlement.kind).to.equal('retry');
      const [span] = sdk.spans(SpanName.ATTEMPT);
      expect(span!.status).to.deep.equal({ code: SpanStatusCode.ERROR, message: 'HTTP 503' });
      expect(span!.attributes).to.include({
        [SpanAttribute.HTTP_RESPONSE_STATUS_CODE]: 503,
        [SpanAttribute.FAILURE_KIND]: 'http-503',
        [SpanAttribute.ERROR_TYPE]: '503',
      });
      // Published outside any span: Herald's publish span starts the trace the attempt continues.
      const [publish] = sdk.spans(SpanName.PUBLISH);
      expect(publish!.parentSpanContext).to.equal(undefined);
      expect(span!.parentSpanContext?.spanId).to.equal(publish!.spanContext().spanId);
      const [request] = await sink.requests(1);
      expect(traceparentParts(request!.headers.traceparent)).to.deep.include({ traceId: span!.spanContext().traceId, parentId: span!.spanContext().spanId });
    });

    it('names a network failure by its code, with no status code', async () => {
      sdk = registerSdk();
      t = await startHerald();
      await t.herald.createEndpoint({ tenantId: 'acme', url: `http://127.0.0.1:${await closedPort()}/` });
      await t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: {} });
      await attemptsSeen(t, 1);
      const [span] = sdk.spans(SpanName.ATTEMPT);
      expect(span!.status.code).to.equal(SpanStatusCode.ERROR);
      expect(span!.status.message).to.match(/^ECONNREFUSED: /);
      expect(span!.attributes).to.include({ [SpanAttribute.FAILURE_KIND]: 'refused', [SpanAttribute.ERROR_TYPE]: 'ECONNREFUSED' });
      expect(span!.attributes).to.not.have.property(SpanAttribute.HTTP_RESPONSE_STATUS_CODE);
    });
  });

  context('with no SDK registered', () => {
    it('stores no trace context and sends no traceparent', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const [event] = await t.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: {} });
      expect(event!.traceContext).to.equal(null);
      expect((await t.herald.store.getEvent(event!.id))?.traceContext).to.equal(null);
      await attemptsSeen(t, 1);
      const [request] = await sink.requests(1);
      expect(request!.headers).to.not.have.property('traceparent');
      expect(request!.headers).to.not.have.property('tracestate');
    });

    it('passes on the trace context an event carries (a producer that traced it elsewhere) as it is', async () => {
      t = await startHerald();
      sink = await startServer(() => ({ status: 200 }));
      const { endpoint } = await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const traceContext = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', tracestate: 'vendor=a1' };
      // Written straight into the store, as a traced producer's process would.
      await t.herald.store.appendEvents([
        { id: 'evt_traced', tenantId: 'acme', type: 'a.b', payload: '{}', createdAt: t.clock.now(), endpointId: endpoint.id, orderingKey: null, traceContext },
      ]);
      t.clock.advance(t.herald.config.engine.sweepIntervalMs);
      await attemptsSeen(t, 1);
      const [request] = await sink.requests(1);
      expect(request!.headers).to.include({ traceparent: traceContext.traceparent, tracestate: 'vendor=a1' });
    });
  });

  context('with an SDK registered and tracing.enabled false', () => {
    it('makes no span, stores no trace context and sends no traceparent', async () => {
      sdk = registerSdk();
      t = await startHerald({ tracing: { enabled: false } });
      sink = await startServer(() => ({ status: 200 }));
      await t.herald.createEndpoint({ tenantId: 'acme', url: sink.url });
      const [event] = await sdk.tracer.startActiveSpan('checkout', async (span) => {
        try {
          return await t!.herald.publish({ tenantId: 'acme', type: 'order.paid', payload: {} });
        } finally {
          span.end();
        }
      });
      expect(event!.traceContext).to.equal(null);
      await attemptsSeen(t, 1);
      const [request] = await sink.requests(1);
      expect(request!.headers).to.not.have.property('traceparent');
      expect(sdk.spans().map((span) => span.name)).to.deep.equal(['checkout']);
    });
  });
});
