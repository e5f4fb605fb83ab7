/**
 * The `herald attempt` span (SpanKind.CLIENT) around each HTTP attempt, and the `traceparent` the
 * consumer receives.
 *
 * The span is a child of the context its event stored at publish, so the producer's trace shows
 * every attempt of every delivery of its event; an event without one starts a trace of its own.
 * The request carries the attempt span's own context as `traceparent` (and `tracestate`), so the
 * consumer's server span is the attempt's child; only when there is a trace: an SDK recorded the
 * span, or the event carried a context (passed on as it is when no SDK is registered here).
 *
 * With no SDK and no stored context the request goes out untouched: no header, no attribute built,
 * no URL parsed (one no-op span made and dropped).
 */
import { context, INVALID_SPAN_CONTEXT, isSpanContextValid, SpanKind, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import type { SendRequest, SendResult } from '../delivery/sender.ts';
import type { DeliveryJob, Endpoint, Outcome } from '../model.ts';
import { describeOutcome } from '../policy/classify.ts';
import { failureKind } from '../policy/failure-kind.ts';
import { SpanAttribute, SpanName } from './span-names.ts';
import { contextOfTrace, formatTraceparent } from './trace-context.ts';
import { heraldTracer, recordFailure } from './tracer.ts';

/** Sends one attempt's request to `endpoint` (which says how to authenticate it). */
export type SendAttempt = (request: SendRequest, endpoint: Endpoint) => Promise<SendResult>;
/** Sends one attempt's request for `job` to `endpoint`, traced. */
export type SendJobAttempt = (request: SendRequest, endpoint: Endpoint, job: DeliveryJob) => Promise<SendResult>;

/**
 * `send` with each attempt in a `herald attempt` span; `enabled` false (`tracing.enabled` of
 * Herald's configuration): `send` as it is, no span and no `traceparent`.
 */
export function tracedSend(send: SendAttempt, enabled = true): SendJobAttempt {
  if (!enabled) return (request, endpoint) => send(request, endpoint);
  return (request, endpoint, job) => sendInSpan(send, request, endpoint, job);
}

/** Not `async` itself: the untraced paths hand back `send`'s own promise, with no extra turn. */
function sendInSpan(send: SendAttempt, request: SendRequest, endpoint: Endpoint, job: DeliveryJob): Promise<SendResult> {
  const parent = contextOfTrace(job.event.traceContext);
  const span = heraldTracer().startSpan(SpanName.ATTEMPT, { kind: SpanKind.CLIENT }, parent);
  const spanContext = span.spanContext();
  if (spanContext === INVALID_SPAN_CONTEXT || !isSpanContextValid(spanContext)) {
    span.end();
    return send(request, endpoint);
  }
  const tracestate = spanContext.traceState?.serialize();
  const headers = {
    ...request.headers,
    traceparent: formatTraceparent(spanContext),
    ...(tracestate === undefined || tracestate === '' ? {} : { tracestate }),
  };
  const traced: SendRequest = { ...request, headers };
  if (!span.isRecording()) {
    span.end();
    return send(traced, endpoint);
  }
  return sendRecorded(span, parent, send, traced, endpoint, job);
}

async function sendRecorded(span: Span, parent: Context, send: SendAttempt, request: SendRequest, endpoint: Endpoint, job: DeliveryJob): Promise<SendResult> {
  setRequestAttributes(span, request.url, job);
  try {
    // Active while it runs: an HTTP client instrumentation's span nests under the attempt's.
    const result = await context.with(trace.setSpan(parent, span), send, undefined, request, endpoint);
    setOutcomeAttributes(span, result.outcome);
    return result;
  } catch (error) {
    recordFailure(span, error);
    throw error;
  } finally {
    span.end();
  }
}

function setRequestAttributes(span: Span, url: string, job: DeliveryJob): void {
  const { delivery } = job;
  span.setAttributes({
    [SpanAttribute.HTTP_REQUEST_METHOD]: 'POST',
    [SpanAttribute.DELIVERY_ID]: delivery.id,
    [SpanAttribute.EVENT_ID]: delivery.eventId,
    [SpanAttribute.ENDPOINT_ID]: delivery.endpointId,
    [SpanAttribute.TENANT_ID]: delivery.tenantId,
    [SpanAttribute.EVENT_TYPE]: delivery.eventType,
    [SpanAttribute.ATTEMPT_NUMBER]: delivery.attempts + 1,
    [SpanAttribute.ATTEMPT_ROUND]: delivery.round,
  });
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return;
  }
  // The query string and user info may carry credentials: never recorded (as in the logs).
  span.setAttributes({
    [SpanAttribute.URL_FULL]: `${parsed.protocol}//${parsed.host}${parsed.pathname}`,
    [SpanAttribute.SERVER_ADDRESS]: parsed.hostname.replace(/^\[|\]$/g, ''),
    [SpanAttribute.SERVER_PORT]: parsed.port === '' ? (parsed.protocol === 'https:' ? 443 : 80) : Number(parsed.port),
  });
}

/** The status code of a response; for anything but a 2xx, the failure: ERROR status, its kind and description. */
function setOutcomeAttributes(span: Span, outcome: Outcome): void {
  if (outcome.kind === 'response') {
    span.setAttribute(SpanAttribute.HTTP_RESPONSE_STATUS_CODE, outcome.status);
    if (outcome.status >= 200 && outcome.status <= 299) return;
  }
  span.setAttributes({ [SpanAttribute.FAILURE_KIND]: failureKind(outcome), [SpanAttribute.ERROR_TYPE]: errorType(outcome) });
  // A redirect's `Location` may carry a query string: its status alone.
  const message = outcome.kind === 'response' ? `HTTP ${outcome.status}` : describeOutcome(outcome);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/** `error.type` as the HTTP conventions give it: the status code, or what failed. */
function errorType(outcome: Outcome): string {
  switch (outcome.kind) {
    case 'response':
      return String(outcome.status);
    case 'timeout':
      return 'timeout';
    case 'network':
      return outcome.code;
    case 'blocked':
      return 'blocked';
    case 'proxy':
      return 'proxy';
  }
}
