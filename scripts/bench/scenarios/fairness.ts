/**
 * Fairness, as users run Herald: the compiled service (`herald start` on
 * SQLite, default settings; scripts/bench/herald-service.ts) and producers in
 * processes of their own (scripts/bench/open-loop-producer.ts).
 *
 * Tenant `bulk` has 1 000 endpoints and 50 events queued for each (50 000
 * events, published by a producer process in transactions of 1 000 while the
 * service runs: most wait in the outbox), answered after 200 ms (so it lasts
 * the run: at most 1 280 answers/s); tenant `quiet` has one endpoint on its own
 * sink, and its producer process publishes one event every 200 ms for the run
 * on an open-loop timetable. Reported: `quiet`'s commit → first byte at its
 * sink (its first attempt's delay), p50/p99/max, against the same publishes
 * without `bulk`'s backlog. A round-robin of endpoints alone would put
 * `quiet`'s event behind the backlog in the outbox and behind 1 000
 * endpoints' waiters for a permit.
 */
import { Arrivals } from '../arrivals.ts';
import { progress, round, sleep, startSinkProcess, type ScenarioOptions, type ScenarioResult } from '../harness.ts';
import { startHeraldService } from '../herald-service.ts';
import { startOpenLoopProducer } from '../open-loop-load.ts';
import { Cleanup } from '../peers/peer-kit.ts';

const BULK_DELAY_MS = 200;
const QUIET_EVERY_MS = 200;
const BACKLOG_BATCH = 1_000;
const BODY_BYTES = 256;
const DRAIN_LIMIT_MS = 30_000;

interface Round {
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly samples: number;
  readonly missing: number;
  readonly duplicates: number;
  /** `bulk`'s events and deliveries not yet delivered when `quiet` stopped publishing. */
  readonly bulkLeftAtEnd: number;
}

interface Status {
  readonly deliveries: Readonly<Record<string, number>>;
  readonly unfannedEvents: number;
}

async function measure(options: { endpoints: number; eventsPerEndpoint: number; seconds: number }): Promise<Round> {
  const { endpoints, eventsPerEndpoint, seconds } = options;
  const cleanup = new Cleanup();
  try {
    const bulkSink = endpoints > 0 ? await startSinkProcess({ delayMs: BULK_DELAY_MS }) : undefined;
    if (bulkSink !== undefined) cleanup.add('bulk sink', () => undefined, () => bulkSink.close());
    const quietSink = await startSinkProcess({ record: 'ids' });
    cleanup.add('quiet sink', () => undefined, () => quietSink.close());
    const service = await startHeraldService({ store: 'sqlite' });
    cleanup.add(`herald ${service.pid}`, () => process.kill(service.pid, 'SIGKILL'), () => service.close());
    const store = { kind: 'sqlite', path: service.sqlitePath! } as const;

    await service.createEndpoints('quiet', [quietSink.url]);
    if (bulkSink !== undefined) {
      const ids = await service.createEndpoints('bulk', Array.from({ length: endpoints }, (_, i) => `${bulkSink.url}/${i}`));
      const backlog = await startOpenLoopProducer(
        { store, tenantId: 'bulk', endpointIds: ids, bodyBytes: BODY_BYTES, schedule: { kind: 'backlog', events: endpoints * eventsPerEndpoint, batch: BACKLOG_BATCH } },
        cleanup,
      );
      await backlog.start().done;
      await backlog.close();
      // Let the backlog's delivery get under way: the mailboxes full, the outbox held.
      await sleep(1_000);
    }

    const quiet = await startOpenLoopProducer(
      { store, tenantId: 'quiet', endpointIds: [], bodyBytes: BODY_BYTES, schedule: { kind: 'open-loop', rate: 1_000 / QUIET_EVERY_MS, seconds, warmupSeconds: 0, tickMs: QUIET_EVERY_MS } },
      cleanup,
    );
    const arrivals = new Arrivals(quietSink);
    const produced = await quiet.start().done;
    const status = await service.api<Status>('GET', '/v1/status');
    const bulkLeftAtEnd = (status.deliveries.pending ?? 0) + (status.deliveries.in_flight ?? 0) + status.unfannedEvents;
    await arrivals.untilAll(produced.ids, DRAIN_LIMIT_MS);
    const latencies = arrivals.latencies(produced.ids, produced.committedAt);
    return {
      p50Ms: latencies.p50Ms,
      p99Ms: latencies.p99Ms,
      maxMs: latencies.maxMs,
      samples: latencies.events - latencies.missing,
      missing: latencies.missing,
      duplicates: latencies.duplicates,
      bulkLeftAtEnd,
    };
  } finally {
    await cleanup.run();
    cleanup.dispose();
  }
}

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const endpoints = options.quick ? 200 : 1_000;
  const eventsPerEndpoint = options.quick ? 20 : 50;
  const seconds = options.quick ? 5 : 20;
  progress(`quiet tenant alone, ${seconds} s (compiled service, producer processes)`);
  const alone = await measure({ endpoints: 0, eventsPerEndpoint: 0, seconds });
  progress(`quiet tenant beside ${endpoints} endpoints × ${eventsPerEndpoint} events, ${seconds} s`);
  const beside = await measure({ endpoints, eventsPerEndpoint, seconds });
  const { bulkLeftAtEnd, ...withBacklog } = beside;
  const { bulkLeftAtEnd: _none, ...withoutBacklog } = alone;
  return {
    bulkEndpoints: endpoints,
    bulkEventsPerEndpoint: eventsPerEndpoint,
    bulkDelayMs: BULK_DELAY_MS,
    quietEveryMs: QUIET_EVERY_MS,
    // Not `seconds`: the runner records the scenario's own duration under that name.
    publishSeconds: seconds,
    withBacklog,
    withoutBacklog,
    bulkLeftAtEnd,
    ratio: round(withBacklog.p99Ms / withoutBacklog.p99Ms, 2),
    missing: alone.missing + beside.missing,
    duplicates: alone.duplicates + beside.duplicates,
    // The backlog must still be there at the end, or the run measured nothing.
    target: 'quiet p99 with the backlog <= 100 ms, backlog not drained',
    met: withBacklog.p99Ms <= 100 && bulkLeftAtEnd > 0 && alone.missing + beside.missing === 0,
  };
}
