import { expect } from 'chai';
import { ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { contextOfTrace, formatTraceparent, parseTraceparent, traceContextOf, traceIdOf } from '../../lib/tracing/trace-context.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN_ID = '00f067aa0ba902b7';

describe('W3C trace context', () => {
  it('formats a span context as traceparent 00-<trace id>-<span id>-<flags> and parses it back, remote', () => {
    const traceparent = formatTraceparent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.SAMPLED });
    expect(traceparent).to.equal(`00-${TRACE_ID}-${SPAN_ID}-01`);
    expect(parseTraceparent(traceparent)).to.deep.equal({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: 1, isRemote: true });
    expect(formatTraceparent({ traceId: TRACE_ID, spanId: SPAN_ID, traceFlags: TraceFlags.NONE })).to.equal(`00-${TRACE_ID}-${SPAN_ID}-00`);
  });

  it('keeps tracestate with the context, and leaves it out when empty', () => {
    const parsed = parseTraceparent(`00-${TRACE_ID}-${SPAN_ID}-01`, 'vendor=a1,other=b2');
    expect(parsed?.traceState?.serialize()).to.equal('vendor=a1,other=b2');
    expect(traceContextOf(parsed!)).to.deep.equal({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01`, tracestate: 'vendor=a1,other=b2' });
    expect(traceContextOf(parseTraceparent(`00-${TRACE_ID}-${SPAN_ID}-01`, '')!)).to.deep.equal({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` });
  });

  it('reads a later version\'s extra fields, and refuses what it cannot continue', () => {
    expect(parseTraceparent(`01-${TRACE_ID}-${SPAN_ID}-01-later`)?.traceId).to.equal(TRACE_ID);
    for (const bad of [
      `00-${TRACE_ID}-${SPAN_ID}-01-extra`, // version 00 has exactly four fields
      `ff-${TRACE_ID}-${SPAN_ID}-01`, // version ff is forbidden
      `00-${'0'.repeat(32)}-${SPAN_ID}-01`, // all-zero trace id
      `00-${TRACE_ID}-${'0'.repeat(16)}-01`, // all-zero span id
      `00-${TRACE_ID.toUpperCase()}-${SPAN_ID}-01`, // upper-case hex
      `00-${TRACE_ID}-${SPAN_ID}`,
      'not a traceparent',
    ]) {
      expect(parseTraceparent(bad), bad).to.equal(undefined);
    }
  });

  it('stores nothing for an invalid span context (the no-op tracer\'s)', () => {
    expect(traceContextOf(trace.wrapSpanContext({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 }).spanContext())).to.equal(null);
  });

  it('makes the stored context the parent of what starts in it; none (or an unreadable one) is the root context', () => {
    const parent = trace.getSpanContext(contextOfTrace({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` }));
    expect(parent).to.include({ traceId: TRACE_ID, spanId: SPAN_ID, isRemote: true });
    expect(contextOfTrace(null)).to.equal(ROOT_CONTEXT);
    expect(contextOfTrace({ traceparent: 'garbage' })).to.equal(ROOT_CONTEXT);
  });

  it('gives the trace id of a stored context, null for none', () => {
    expect(traceIdOf({ traceparent: `00-${TRACE_ID}-${SPAN_ID}-01` })).to.equal(TRACE_ID);
    expect(traceIdOf(null)).to.equal(null);
    expect(traceIdOf({ traceparent: 'garbage' })).to.equal(null);
  });
});
