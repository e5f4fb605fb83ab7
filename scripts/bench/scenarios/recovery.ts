/**
 * Recovery storm: 500 endpoints whose receiver fails (503) for a while, then
 * recovers. Requests per second at the sink in 1 s buckets from the moment
 * of recovery until every delivery has landed; the peak against the mean of
 * that window. The retry schedule and breaker are compressed so this fits in
 * a minute (PT1S … PT16S, cooldown 5 s; the shape, not the scale, is what
 * is measured): jitter (±20 %) and the per-endpoint breaker probes are what
 * should keep the recovery from arriving as one wall of requests.
 */
import { publish } from '../../../lib/producer/sqlite-publish.ts';
import { openBenchHerald, preciseNow, progress, round, sleep, startSinkProcess, waitFor, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const ENDPOINTS = 500;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const perEndpoint = options.quick ? 2 : 12;
  const failForMs = options.quick ? 6_000 : 15_000;
  const total = ENDPOINTS * perEndpoint;
  const sink = await startSinkProcess({ record: 'times', status: 503 });
  const bench = await openBenchHerald({ breaker: { cooldownMs: 5_000, windowMs: 10_000, volumeThreshold: 5 } });
  const { herald, producerDb } = bench;
  try {
    const ids: string[] = [];
    for (let i = 0; i < ENDPOINTS; i++) {
      const { endpoint } = await herald.createEndpoint({
        tenantId: 'bench',
        url: `${sink.url}/ep/${i}`,
        retry: { schedule: ['PT1S', 'PT2S', 'PT4S', 'PT8S', 'PT16S', 'PT16S', 'PT16S', 'PT16S'] },
      });
      ids.push(endpoint.id);
    }
    let delivered = 0;
    let dead = 0;
    herald.events.on('attempt', (e) => {
      if (!e.applied) return;
      if (e.settlement.kind === 'delivered') delivered++;
      if (e.settlement.kind === 'dead') dead++;
    });
    await herald.start();
    progress(`${total} events to ${ENDPOINTS} endpoints; the sink fails for ${failForMs / 1000} s`);
    for (let i = 0; i < perEndpoint; i++) {
      publish(producerDb, ids.map((endpointId) => ({ tenantId: 'bench', type: 'bench.event', endpointId, payload: { round: i } })));
      herald.signal();
      await sleep(0);
    }
    await sleep(failForMs);
    const failing = await sink.take();
    sink.configure({ status: 200 });
    // On the clock the sink stamps arrivals with (the machine's monotonic clock).
    const recoveredAt = preciseNow();
    progress('the sink recovers');
    const times: number[] = [];
    await waitFor(async () => {
      times.push(...(await sink.take()).times);
      return delivered + dead >= total;
    }, options.quick ? 20_000 : 90_000, 500);
    times.push(...(await sink.take()).times);
    const buckets: number[] = [];
    for (const t of times) {
      const b = Math.floor((t - recoveredAt) / 1000);
      if (b < 0) continue;
      while (buckets.length <= b) buckets.push(0);
      buckets[b]!++;
    }
    // The window: from recovery to the last bucket with a request.
    const mean = buckets.length === 0 ? 0 : buckets.reduce((a, b) => a + b, 0) / buckets.length;
    const peak = Math.max(0, ...buckets);
    return {
      endpoints: ENDPOINTS,
      deliveries: total,
      failSeconds: failForMs / 1000,
      requestsWhileFailing: failing.count,
      delivered,
      dead,
      recoverySeconds: buckets.length,
      bucketsPerSec: buckets,
      peakPerSec: peak,
      meanPerSec: round(mean, 1),
      peakToMean: round(mean === 0 ? 0 : peak / mean, 2),
      target: 'peak <= 3 x mean over the recovery window',
      met: mean > 0 && peak <= 3 * mean && delivered + dead >= total,
    };
  } finally {
    await bench.close();
    await sink.close();
  }
}
