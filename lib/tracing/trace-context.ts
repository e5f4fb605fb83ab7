/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) to and from the OpenTelemetry API's
 * `SpanContext`, written here rather than through a registered propagator: Herald depends on the
 * API only, and an application may register none. What an event stores (`OutboxEvent.traceContext`)
 * and what a consumer receives (`traceparent`, `tracestate`) are made here.
 *
 *   traceparent = version "-" trace-id "-" parent-id "-" trace-flags
 *                 00        32 hex        16 hex        2 hex
 *
 * A value Herald cannot read (another version's extra fields aside) is no trace: a stored context
 * never fails a delivery.
 */
import { createTraceState, isSpanContextValid, ROOT_CONTEXT, trace, type Context, type SpanContext } from '@opentelemetry/api';
import type { TraceContext } from '../model.ts';

/** The version of the format Herald writes. */
const VERSION = '00';
/** Version `ff` is forbidden; a later version may append fields after the four of version 00. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The `traceparent` value of a span context: `00-<trace id>-<span id>-<flags>`. */
export function formatTraceparent(spanContext: SpanContext): string {
  const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, '0');
  return `${VERSION}-${spanContext.traceId}-${spanContext.spanId}-${flags}`;
}

/**
 * The span context a `traceparent` (and `tracestate`) names, marked remote; `undefined` for a
 * malformed value, version `ff`, an all-zero id, or a version-00 value with extra fields.
 */
export function parseTraceparent(traceparent: string, tracestate?: string): SpanContext | undefined {
  const match = TRACEPARENT.exec(traceparent.trim());
  if (match === null) return undefined;
  const [, version, traceId = '', spanId = '', flags = ''] = match;
  if (version === 'ff' || (version === VERSION && match[5] !== undefined)) return undefined;
  const spanContext: SpanContext = {
    traceId,
    spanId,
    traceFlags: Number.parseInt(flags, 16),
    isRemote: true,
    ...(tracestate === undefined || tracestate === '' ? {} : { traceState: createTraceState(tracestate) }),
  };
  return isSpanContextValid(spanContext) ? spanContext : undefined;
}

/** What an event stores of a span context: its `traceparent`, and `tracestate` when not empty; `null` for no valid trace. */
export function traceContextOf(spanContext: SpanContext): TraceContext | null {
  if (!isSpanContextValid(spanContext)) return null;
  const traceparent = formatTraceparent(spanContext);
  const tracestate = spanContext.traceState?.serialize();
  return tracestate === undefined || tracestate === '' ? { traceparent } : { traceparent, tracestate };
}

/** The context whose span is the stored trace's (the parent of what starts in it); the root context for none. */
export function contextOfTrace(traceContext: TraceContext | null | undefined): Context {
  if (traceContext === null || traceContext === undefined) return ROOT_CONTEXT;
  const spanContext = parseTraceparent(traceContext.traceparent, traceContext.tracestate);
  return spanContext === undefined ? ROOT_CONTEXT : trace.setSpanContext(ROOT_CONTEXT, spanContext);
}

/** The trace id of a stored context (32 hex), for people to search their tracing backend with; `null` for none. */
export function traceIdOf(traceContext: TraceContext | null | undefined): string | null {
  if (traceContext === null || traceContext === undefined) return null;
  return parseTraceparent(traceContext.traceparent)?.traceId ?? null;
}

