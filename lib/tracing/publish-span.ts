/**
 * The `herald publish` span around every publish path, and the trace context the events store.
 *
 * The span is a child of the producer's active context (`context.active()`: its request's span,
 * its job's). Its own span context is what the new events store (`OutboxEvent.traceContext`), so
 * that each attempt span, and through `traceparent` the consumer's, continues the producer's trace
 * below the publish. With no SDK registered the span is the API's no-op and has no valid context
 * (unless the active context carries a remote one, which is then passed on as it is): nothing is
 * stored, no attribute built.
 *
 * An event published again with a stored id keeps the context it was first stored with.
 */
import { context, SpanKind, trace, type Span } from '@opentelemetry/api';
import type { OutboxEvent, TraceContext } from '../model.ts';
import { SpanAttribute, SpanName } from './span-names.ts';
import { traceContextOf } from './trace-context.ts';
import { eventAttributes, heraldTracer, recordFailure } from './tracer.ts';

/** Where a publish came in (`herald.publish.path`). */
export const PublishPath = {
  SQLITE: 'sqlite',
  POSTGRES: 'postgres',
  MONGODB: 'mongodb',
  /** `POST /v1/events`, `herald publish`, `Herald.publish()`. */
  HERALD: 'herald',
} as const;
export type PublishPath = (typeof PublishPath)[keyof typeof PublishPath];

/** Writes the events, given the trace context to store with the new ones (`null`: none). */
export type PublishWrite<R> = (traceContext: TraceContext | null) => R;

function startPublish(): Span {
  return heraldTracer().startSpan(SpanName.PUBLISH, { kind: SpanKind.PRODUCER }, context.active());
}

function endPublish(span: Span, path: PublishPath, events: readonly OutboxEvent[]): void {
  if (span.isRecording()) {
    span.setAttributes(eventAttributes(events));
    span.setAttribute(SpanAttribute.PUBLISH_PATH, path);
  }
  span.end();
}

/** A synchronous publish (SQLite's: better-sqlite3 is synchronous) in a `herald publish` span. */
export function tracePublishSync(path: PublishPath, write: PublishWrite<OutboxEvent[]>): OutboxEvent[] {
  const span = startPublish();
  let events: OutboxEvent[];
  try {
    const stored = traceContextOf(span.spanContext());
    events = span.isRecording() ? context.with(trace.setSpan(context.active(), span), write, undefined, stored) : write(stored);
  } catch (error) {
    recordFailure(span, error);
    span.end();
    throw error;
  }
  endPublish(span, path, events);
  return events;
}

/**
 * An asynchronous publish in a `herald publish` span, active while it runs (a driver's own spans
 * nest under it). `enabled` false (`tracing.enabled` of Herald's configuration): no span, no context.
 */
export async function tracePublish(path: PublishPath, write: PublishWrite<Promise<OutboxEvent[]>>, enabled = true): Promise<OutboxEvent[]> {
  if (!enabled) return write(null);
  const span = startPublish();
  let events: OutboxEvent[];
  try {
    const stored = traceContextOf(span.spanContext());
    events = await (span.isRecording() ? context.with(trace.setSpan(context.active(), span), write, undefined, stored) : write(stored));
  } catch (error) {
    recordFailure(span, error);
    span.end();
    throw error;
  }
  endPublish(span, path, events);
  return events;
}
