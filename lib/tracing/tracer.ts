/**
 * Herald's tracer, through the OpenTelemetry API only: Herald bundles no SDK. An application that
 * registers one (a `TracerProvider` and, for the producer's context to reach `publish()`, a
 * context manager) gets Herald's spans; without one every span is the API's no-op, and the code
 * around it skips its work (attributes are built only when `span.isRecording()`, checked once per
 * span), so tracing costs next to nothing.
 *
 * The tracer is asked of the provider registered now, and asked again only when that changes:
 * `trace.disable()` followed by a new registration (tests do this) gets the new provider's tracer,
 * never a stale one.
 */
import { readFileSync } from 'node:fs';
import { SpanStatusCode, trace, type AttributeValue, type Span, type Tracer, type TracerProvider } from '@opentelemetry/api';
import type { OutboxEvent } from '../model.ts';
import { MAX_LISTED_IDS, SpanAttribute } from './span-names.ts';

/** The instrumentation scope's name: `trace.getTracer('herald', version)`. */
export const TRACER_NAME = 'herald';

let provider: TracerProvider | undefined;
let tracer: Tracer | undefined;

/** The tracer of the provider registered now (the API's no-op one when none is). */
export function heraldTracer(): Tracer {
  const current = trace.getTracerProvider();
  if (current !== provider || tracer === undefined) {
    provider = current;
    tracer = current.getTracer(TRACER_NAME, heraldVersion());
  }
  return tracer;
}

let version: string | undefined;

/** Herald's version, from its package.json (lib/ and dist/ both sit one folder below it). */
function heraldVersion(): string | undefined {
  if (version !== undefined) return version;
  try {
    const parsed = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    version = typeof parsed.version === 'string' ? parsed.version : '';
  } catch {
    version = '';
  }
  return version === '' ? undefined : version;
}

/** Marks a span failed with an error thrown through it. */
export function recordFailure(span: Span, error: unknown): void {
  if (!span.isRecording()) return;
  if (error instanceof Error) span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}

/**
 * The attributes a batch of events shares: their count and ids (the first {@link MAX_LISTED_IDS}),
 * the id of a lone event, and the tenant and type when every event has the same.
 */
export function eventAttributes(events: readonly OutboxEvent[]): Record<string, AttributeValue> {
  const attributes: Record<string, AttributeValue> = { [SpanAttribute.EVENT_COUNT]: events.length };
  const first = events[0];
  if (first === undefined) return attributes;
  attributes[SpanAttribute.EVENT_IDS] = events.slice(0, MAX_LISTED_IDS).map((e) => e.id);
  if (events.length === 1) attributes[SpanAttribute.EVENT_ID] = first.id;
  if (events.every((e) => e.tenantId === first.tenantId)) attributes[SpanAttribute.TENANT_ID] = first.tenantId;
  if (events.every((e) => e.type === first.type)) attributes[SpanAttribute.EVENT_TYPE] = first.type;
  return attributes;
}
