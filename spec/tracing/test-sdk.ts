/**
 * The official OpenTelemetry SDK, registered for one test as an application would register it
 * (a tracer provider exporting to memory, an AsyncLocalStorage context manager) and unregistered
 * after it, so that the other specs run with the API's no-op tracer as before.
 */
import { context, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

export interface TestSdk {
  /** A tracer of the "application" (the producer). */
  readonly tracer: Tracer;
  /** Finished spans, of one name when given. */
  spans(name?: string): ReadableSpan[];
  close(): Promise<void>;
}

export function registerSdk(): TestSdk {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  if (!context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())) throw new Error('a context manager is registered already');
  if (!trace.setGlobalTracerProvider(provider)) throw new Error('a tracer provider is registered already');
  return {
    tracer: trace.getTracer('producer-app'),
    spans: (name) => exporter.getFinishedSpans().filter((span) => name === undefined || span.name === name),
    async close() {
      trace.disable();
      context.disable();
      await provider.shutdown();
    },
  };
}

/** The parts of a `traceparent`. */
export function traceparentParts(traceparent: string | string[] | undefined): { traceId: string; parentId: string; flags: string } {
  const [, traceId = '', parentId = '', flags = ''] = String(traceparent).split('-');
  return { traceId, parentId, flags };
}
