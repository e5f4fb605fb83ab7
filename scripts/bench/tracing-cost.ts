/**
 * `node --import tsx scripts/bench/tracing-cost.ts [deliveries] [rounds]`: what tracing costs the
 * attempt path, in µs per delivery, measured in one process on the engine's in-memory parts:
 * endpoint actors (mailbox, send permits, breaker, classification, retry decision, settle call,
 * engine events) whose `sign` and `settle` answer at once and whose `send` answers 200 at once,
 * wrapped by `tracedSend` (lib/tracing/attempt-span.ts) exactly as a node wraps its sender.
 * No HTTP, no store, no signing: what is left is the engine's own work, so the ratio is the
 * largest tracing can be (a real delivery adds a request and a store write to the same figure).
 *
 * Modes, each timed over `rounds` rounds of `deliveries` (default 20 000 × 15), interleaved so that
 * drift and GC fall on all alike; the median round's CPU time per delivery is reported, and the
 * median of each round's ratio to the `off` round next to it:
 *
 * - `off`: the switch off (`tracing.enabled: false`): `send` called as it is;
 * - `api`: tracing on, no SDK registered (Herald's default), events without a trace context;
 * - `api + stored context`: the same, events carrying a producer's context (passed on as
 *   `traceparent`, one header added);
 * - `sdk`: the official SDK registered (BasicTracerProvider, SimpleSpanProcessor, an in-memory
 *   exporter emptied after each round), events carrying a context: a recorded span per attempt.
 *
 * Figures are this machine's, under tsx (docs/OBSERVABILITY.md, "Traces", quotes a run).
 * `measureTracingCost` returns the same rows (the bench's `features` scenario runs it). It registers
 * a global tracer provider for the SDK modes and disables it at the end: run it alone, or after the
 * other measurements, in its process.
 */
import { EventEmitter } from 'node:events';
import { pathToFileURL } from 'node:url';
import { trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { ManualClock, seededRandom } from '../../lib/clock.ts';
import { resolveConfig } from '../../lib/config/config.ts';
import { EndpointActor, type ActorDeps, type SendResult } from '../../lib/engine/actor.ts';
import { BreakerFamily } from '../../lib/engine/breaker.ts';
import type { EmitEngineEvent, EngineEvents } from '../../lib/engine/engine-events.ts';
import { SendPermits } from '../../lib/engine/send-permits.ts';
import { Ticker } from '../../lib/engine/ticker.ts';
import { TickerWakeTimers } from '../../lib/engine/wake-timers.ts';
import { DeliveryMode, type DeliveryJob, type Endpoint, type TraceContext } from '../../lib/model.ts';
import { tracedSend } from '../../lib/tracing/attempt-span.ts';

const ENDPOINTS = 100;
const OK: SendResult = { outcome: { kind: 'response', status: 200, location: null, retryAfter: null, body: '' }, durationMs: 1 };
const STORED: TraceContext = { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' };

/** What each mode measures, as the CLI prints it; the `features` scenario picks rows by it. */
export const TracingMode = {
  off: 'off (tracing.enabled false)',
  api: 'api (no SDK)',
  apiStored: 'api (no SDK) + stored context',
  offWithSdk: 'off, SDK registered',
  sdk: 'sdk (a span recorded per attempt)',
} as const;
export type TracingMode = (typeof TracingMode)[keyof typeof TracingMode];

export interface TracingCostSizes {
  /** Deliveries per round and mode. */
  readonly deliveries: number;
  /** Interleaved rounds per mode, after one of warm-up. */
  readonly rounds: number;
}

export interface TracingCostRow {
  readonly mode: TracingMode;
  /** The median round's CPU µs per delivery. */
  readonly microsPerDelivery: number;
  /** The mode compared with: `off` without an SDK, `off, SDK registered` with one. */
  readonly baseline: TracingMode;
  /** The median of each round's ratio to the baseline's round next to it. */
  readonly ratio: number;
}

export interface TracingCostResult extends TracingCostSizes {
  readonly endpoints: number;
  readonly rows: readonly TracingCostRow[];
}

interface Mode {
  readonly name: TracingMode;
  readonly actors: readonly EndpointActor[];
  readonly traceContext: TraceContext | null;
  readonly times: number[];
}

const median = (values: readonly number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Every mode, the ones without an SDK first; throws if a span is missing. */
export async function measureTracingCost({ deliveries, rounds }: TracingCostSizes): Promise<TracingCostResult> {
  const config = resolveConfig({ logLevel: 'silent' });
  const clock = new ManualClock();

  let attempts = 0;
  let done: (() => void) | undefined;
  let wanted = 0;
  const events = new EventEmitter<EngineEvents>();
  events.on('attempt', () => {
    attempts++;
    if (attempts === wanted) done?.();
  });

  const endpoint = (n: number): Endpoint => ({
    id: `ep_${n}`, tenantId: 'bench', url: `https://hooks.example.com/ep/${n}?token=t`, description: '', eventTypes: [], retry: { preset: 'default' },
    timeoutMs: config.delivery.timeoutMs, mode: DeliveryMode.AT_LEAST_ONCE, ordering: 'none', concurrency: 8, status: 'enabled',
    disabledReason: null, failingSince: null, secrets: [], createdAt: 0, updatedAt: 0,
  });

  const actorsFor = (enabled: boolean): EndpointActor[] => {
    const deps: ActorDeps = {
      clock,
      random: seededRandom(1),
      permits: new SendPermits({ maxInFlight: 1_000_000, originDepth: 1_000_000 }),
      breakers: new BreakerFamily(clock, config.breaker),
      createTimers: (listener) => new TickerWakeTimers(new Ticker({ clock, tickMs: config.engine.tickMs }), listener),
      health: config.health,
      disableOnGone: false,
      emit: events.emit.bind(events) as EmitEngineEvent,
      sign: () => Promise.resolve({ 'webhook-id': 'evt' }),
      send: tracedSend(() => Promise.resolve(OK), enabled),
      settle: () => Promise.resolve(true),
      wake: () => {},
      listAttempts: () => Promise.resolve([]),
      disable: () => Promise.resolve(),
    };
    return Array.from({ length: ENDPOINTS }, (_, n) => new EndpointActor(endpoint(n), deps));
  };

  const job = (n: number, traceContext: TraceContext | null): DeliveryJob => {
    const at = clock.now();
    const endpointId = `ep_${n % ENDPOINTS}`;
    return {
      delivery: {
        id: `dlv_${n}`, eventId: `evt_${n}`, endpointId, tenantId: 'bench', eventType: 'bench.event', slot: 0, status: 'in_flight', attempts: 0,
        round: 0, nextAttemptAt: at, leaseEpoch: 1, lastError: null, createdAt: at, updatedAt: at, deliveredAt: null, sequence: null, orderingKey: null,
      },
      event: { id: `evt_${n}`, tenantId: 'bench', type: 'bench.event', payload: '{}', createdAt: at, endpointId: null, orderingKey: null, traceContext },
    };
  };

  /**
   * CPU µs per delivery of one round: `deliveries` jobs through the actors, until the last attempt is
   * told. CPU time (user + system) of this process rather than wall time: the machine may be shared.
   */
  const round = async (actors: readonly EndpointActor[], traceContext: TraceContext | null): Promise<number> => {
    const jobs = Array.from({ length: deliveries }, (_, n) => job(n, traceContext));
    attempts = 0;
    wanted = deliveries;
    const finished = new Promise<void>((resolve) => {
      done = resolve;
    });
    const started = process.cpuUsage();
    for (const j of jobs) actors[Number(j.delivery.endpointId.slice(3))]!.enqueue(j);
    await finished;
    const used = process.cpuUsage(started);
    return (used.user + used.system) / deliveries;
  };

  const measure = async (modes: readonly Mode[], afterRound: () => void = () => {}): Promise<void> => {
    for (const mode of modes) await round(mode.actors, mode.traceContext); // warm-up, dropped
    afterRound();
    for (let r = 0; r < rounds; r++) {
      for (const mode of modes) {
        mode.times.push(await round(mode.actors, mode.traceContext));
        afterRound();
      }
    }
  };

  const off: Mode = { name: TracingMode.off, actors: actorsFor(false), traceContext: null, times: [] };
  const api: Mode = { name: TracingMode.api, actors: actorsFor(true), traceContext: null, times: [] };
  const apiStored: Mode = { name: TracingMode.apiStored, actors: actorsFor(true), traceContext: STORED, times: [] };
  await measure([off, api, apiStored]);

  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  const offWithSdk: Mode = { name: TracingMode.offWithSdk, actors: off.actors, traceContext: STORED, times: [] };
  const sdk: Mode = { name: TracingMode.sdk, actors: api.actors, traceContext: STORED, times: [] };
  let spans = 0;
  try {
    await measure([offWithSdk, sdk], () => {
      spans += exporter.getFinishedSpans().length;
      exporter.reset();
    });
  } finally {
    await provider.shutdown();
    trace.disable();
  }
  if (spans !== (rounds + 1) * deliveries) throw new Error(`${spans} spans recorded, ${(rounds + 1) * deliveries} expected`);

  const rows = ([[off, off], [api, off], [apiStored, off], [offWithSdk, offWithSdk], [sdk, offWithSdk]] as const).map(([mode, base]) => ({
    mode: mode.name,
    microsPerDelivery: median(mode.times),
    baseline: base.name,
    ratio: median(mode.times.map((us, r) => us / base.times[r]!)),
  }));
  return { deliveries, rounds, endpoints: ENDPOINTS, rows };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const result = await measureTracingCost({ deliveries: Number(process.argv[2] ?? 20_000), rounds: Number(process.argv[3] ?? 15) });
  console.log(`tracing cost on the attempt path: ${result.deliveries} deliveries × ${result.rounds} rounds, ${result.endpoints} endpoints, median round`);
  console.log('  mode                                 CPU µs/delivery  ratio to off (median of the rounds\' ratios)');
  for (const row of result.rows) {
    console.log(`  ${row.mode.padEnd(36)} ${row.microsPerDelivery.toFixed(2).padStart(7)}          ×${row.ratio.toFixed(3)}`);
  }
}
