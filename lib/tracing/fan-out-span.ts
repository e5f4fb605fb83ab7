/**
 * The `herald fan-out` span: one per fan-out batch (up to 100 events read from the outbox and their
 * deliveries written in one store call), not one per event: a batch holds events of many traces,
 * so the span starts a trace of its own and links to each event's stored context, and its cost is
 * paid once per batch. Made only when the SDK records it (nothing is built otherwise).
 */
import { context, trace, type Link } from '@opentelemetry/api';
import type { OutboxEvent } from '../model.ts';
import { SpanAttribute, SpanName } from './span-names.ts';
import { contextOfTrace } from './trace-context.ts';
import { eventAttributes, heraldTracer, recordFailure } from './tracer.ts';

/**
 * Runs one fan-out batch of `events` in a `herald fan-out` span; `fanOut` answers how many
 * deliveries it wrote and how many of them it claimed. `enabled` false: no span.
 */
export async function traceFanOut(
  events: readonly OutboxEvent[],
  fanOut: () => Promise<{ readonly written: number; readonly claimed: number }>,
  enabled = true,
): Promise<{ readonly written: number; readonly claimed: number }> {
  if (!enabled) return fanOut();
  const span = heraldTracer().startSpan(SpanName.FAN_OUT, { root: true });
  if (!span.isRecording()) {
    span.end();
    return fanOut();
  }
  span.addLinks(linksOf(events));
  span.setAttributes(eventAttributes(events));
  try {
    const result = await context.with(trace.setSpan(context.active(), span), fanOut);
    span.setAttributes({ [SpanAttribute.DELIVERY_COUNT]: result.written, [SpanAttribute.DELIVERY_CLAIMED]: result.claimed });
    return result;
  } catch (error) {
    recordFailure(span, error);
    throw error;
  } finally {
    span.end();
  }
}

function linksOf(events: readonly OutboxEvent[]): Link[] {
  const links: Link[] = [];
  for (const event of events) {
    if (event.traceContext === null || event.traceContext === undefined) continue;
    const spanContext = trace.getSpanContext(contextOfTrace(event.traceContext));
    if (spanContext !== undefined) links.push({ context: spanContext });
  }
  return links;
}

