/**
 * Fairness: tenant `bulk` has 1 000 endpoints and 50 events queued for each
 * (50 000 events, beyond what the mailboxes take: most wait in the outbox),
 * answered after 200 ms (so it lasts the run: at most 1 280 answers/s); tenant `quiet` has one endpoint and publishes one
 * event every 200 ms for the run. Reported: `quiet`'s publish → first byte at
 * its sink (its first attempt's delay), p50/p99/max, against the same
 * publishes without `bulk`'s backlog. A round-robin of endpoints alone would
 * put `quiet`'s event behind the backlog in the outbox and behind 1 000
 * endpoints' waiters for a permit.
 */
import { openBenchHerald, percentile, preciseNow, progress, round, sleep, startSinkProcess, waitFor, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const BULK_DELAY_MS = 200;
const QUIET_EVERY_MS = 200;

interface Round {
  readonly delaysMs: number[];
  readonly missing: number;
  /** `bulk`'s events and deliveries not yet delivered when `quiet` stopped publishing. */
  readonly bulkLeftAtEnd: number;
}

async function measure(options: { endpoints: number; eventsPerEndpoint: number; seconds: number }): Promise<Round> {
  const { endpoints, eventsPerEndpoint, seconds } = options;
  const bulkSink = endpoints > 0 ? await startSinkProcess({ delayMs: BULK_DELAY_MS }) : undefined;
  const quietSink = await startSinkProcess({ record: 'ids' });
  const bench = await openBenchHerald();
  const { herald } = bench;
  try {
    const ids: string[] = [];
    for (let i = 0; i < endpoints; i++) {
      ids.push((await herald.createEndpoint({ tenantId: 'bulk', url: `${bulkSink!.url}/${i}` })).endpoint.id);
    }
    for (let n = 0; n < eventsPerEndpoint; n++) {
      await herald.publish(ids.map((endpointId) => ({ tenantId: 'bulk', endpointId, type: 'bulk.event', payload: { n } })));
    }
    await herald.createEndpoint({ tenantId: 'quiet', url: quietSink.url });
    await herald.start();
    // Let the backlog's delivery get under way: the mailboxes full, the outbox held.
    await sleep(1_000);

    const publishedAt = new Map<string, number>();
    const count = Math.floor((seconds * 1_000) / QUIET_EVERY_MS);
    for (let i = 0; i < count; i++) {
      const at = preciseNow();
      const [event] = await herald.publish({ tenantId: 'quiet', type: 'quiet.event', payload: { i } });
      publishedAt.set(event!.id, at);
      await sleep(Math.max(0, QUIET_EVERY_MS - (preciseNow() - at)));
    }
    const status = await herald.status();
    const bulkLeftAtEnd = (status.deliveries.pending ?? 0) + (status.deliveries.in_flight ?? 0) + status.unfannedEvents;

    const firstSeen = new Map<string, number>();
    await waitFor(async () => {
      const taken = await quietSink.take();
      taken.ids.forEach((id, i) => {
        if (!firstSeen.has(id)) firstSeen.set(id, taken.times[i]!);
      });
      return firstSeen.size >= publishedAt.size;
    }, 30_000, 200);
    const delaysMs: number[] = [];
    for (const [id, at] of publishedAt) {
      const seen = firstSeen.get(id);
      if (seen !== undefined) delaysMs.push(seen - at);
    }
    return { delaysMs, missing: publishedAt.size - delaysMs.length, bulkLeftAtEnd };
  } finally {
    await bench.close();
    await quietSink.close();
    await bulkSink?.close();
  }
}

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const endpoints = options.quick ? 200 : 1_000;
  const eventsPerEndpoint = options.quick ? 20 : 50;
  const seconds = options.quick ? 5 : 20;
  progress(`quiet tenant alone, ${seconds} s`);
  const alone = await measure({ endpoints: 0, eventsPerEndpoint: 0, seconds });
  progress(`quiet tenant beside ${endpoints} endpoints × ${eventsPerEndpoint} events, ${seconds} s`);
  const beside = await measure({ endpoints, eventsPerEndpoint, seconds });
  const figures = (r: Round) => ({
    p50Ms: round(percentile(r.delaysMs, 50)),
    p99Ms: round(percentile(r.delaysMs, 99)),
    maxMs: round(Math.max(...r.delaysMs)),
    samples: r.delaysMs.length,
  });
  const withBacklog = figures(beside);
  const withoutBacklog = figures(alone);
  const ratio = withBacklog.p99Ms / withoutBacklog.p99Ms;
  return {
    bulkEndpoints: endpoints,
    bulkEventsPerEndpoint: eventsPerEndpoint,
    bulkDelayMs: BULK_DELAY_MS,
    quietEveryMs: QUIET_EVERY_MS,
    // Not `seconds`: the runner records the scenario's own duration under that name.
    publishSeconds: seconds,
    withBacklog,
    withoutBacklog,
    bulkLeftAtEnd: beside.bulkLeftAtEnd,
    ratio: round(ratio, 2),
    missing: alone.missing + beside.missing,
    // The backlog must still be there at the end, or the run measured nothing.
    target: 'quiet p99 with the backlog <= 100 ms, backlog not drained',
    met: withBacklog.p99Ms <= 100 && beside.bulkLeftAtEnd > 0 && alone.missing + beside.missing === 0,
  };
}
