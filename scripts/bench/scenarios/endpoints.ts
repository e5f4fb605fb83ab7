/**
 * Endpoints: 10 000 endpoints with one event each, then idle. Peak RSS and
 * heap while delivering (sampled every 100 ms), settled RSS and heap after the
 * idle actors are evicted (`engine.actorIdleMs` shortened to 3 s so that
 * happens within the bench), and how many actors are still alive.
 *
 * Ten endpoints per tenant (1 000 tenants): fan-out reads a tenant's
 * endpoints for each batch of events, so one tenant holding all 10 000 would
 * measure that instead (see the README's Performance section).
 */
import { publish } from '../../../lib/producer/sqlite-publish.ts';
import { gc, memory, openBenchHerald, progress, round, sleep, startSinkProcess, waitFor, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const IDLE_MS = 3_000;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const count = options.quick ? 1_000 : 10_000;
  const sink = await startSinkProcess({ record: 'count' });
  gc();
  const atStart = memory();
  const bench = await openBenchHerald({ engine: { actorIdleMs: IDLE_MS } });
  const { herald, producerDb } = bench;
  try {
    progress(`creating ${count} endpoints`);
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push((await herald.createEndpoint({ tenantId: `t${Math.floor(i / 10)}`, url: `${sink.url}/ep/${i}` })).endpoint.id);
    let delivered = 0;
    herald.events.on('attempt', (e) => {
      if (e.applied && e.settlement.kind === 'delivered') delivered++;
    });
    await herald.start();
    gc();
    const beforeDelivery = memory();
    let peak = { ...beforeDelivery };
    const sampler = setInterval(() => {
      const now = memory();
      peak = {
        rssMB: Math.max(peak.rssMB, now.rssMB),
        heapUsedMB: Math.max(peak.heapUsedMB, now.heapUsedMB),
        heapTotalMB: Math.max(peak.heapTotalMB, now.heapTotalMB),
        externalMB: Math.max(peak.externalMB, now.externalMB),
      };
    }, 100);
    progress(`publishing one event to each of ${count} endpoints`);
    const started = performance.now();
    for (let i = 0; i < count; i += 1_000) {
      publish(producerDb, ids.slice(i, i + 1_000).map((endpointId, j) => ({ tenantId: `t${Math.floor((i + j) / 10)}`, type: 'bench.event', endpointId, payload: { hello: 'world' } })));
      herald.signal();
      await sleep(0);
    }
    const complete = await waitFor(() => delivered >= count, options.quick ? 30_000 : 120_000, 200);
    const deliverySeconds = (performance.now() - started) / 1000;
    const actorsAtPeak = (await herald.status()).actors.length;
    progress(`${delivered}/${count} delivered in ${deliverySeconds.toFixed(1)} s; waiting for idle eviction`);
    await sleep(IDLE_MS + 2_500);
    clearInterval(sampler);
    gc();
    const settled = memory();
    const actorsAfterEviction = (await herald.status()).actors.length;
    return {
      endpoints: count,
      delivered,
      deliverySeconds: round(deliverySeconds, 1),
      rssAtStartMB: atStart.rssMB,
      peakRssMB: peak.rssMB,
      peakHeapMB: peak.heapUsedMB,
      settledRssMB: settled.rssMB,
      settledHeapMB: settled.heapUsedMB,
      rssBeforeDeliveryMB: beforeDelivery.rssMB,
      heapTotalMB: { peak: peak.heapTotalMB, settled: settled.heapTotalMB },
      externalMB: { peak: peak.externalMB, settled: settled.externalMB },
      actorsAtPeak,
      actorsAfterEviction,
      target: '<= 150 MB RSS',
      met: peak.rssMB <= 150 && complete,
    };
  } finally {
    await bench.close();
    await sink.close();
  }
}
