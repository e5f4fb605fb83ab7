/**
 * Endpoints: the compiled service (`herald start`, scripts/bench/herald-service.ts)
 * with 10 000 endpoints on the sink and one event each, published by this
 * process (outside the service) through the compiled package's `publish` on
 * its own SQLite connection, then idle. Reported: the service's peak RSS
 * (VmRSS of its process sampled every 100 ms, and the kernel's VmHWM), its
 * main thread's heap (`heap-reporter.mjs`, preloaded, every 100 ms), its RSS
 * and heap once the idle actors are evicted (`engine.actorIdleMs` shortened to
 * 3 s so that happens within the bench), and how many actors are alive.
 *
 * Ten endpoints per tenant (1 000 tenants): fan-out reads a tenant's
 * endpoints for each batch of events, so one tenant holding all 10 000 would
 * measure that instead (see the README's Performance section).
 */
import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startHeraldService } from '../herald-service.ts';
import { MB, progress, round, sleep, startSinkProcess, waitFor, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const IDLE_MS = 3_000;
const SAMPLE_MS = 100;
const PUBLISH_BATCH = 1_000;
const HEAP_REPORTER = fileURLToPath(new URL('../heap-reporter.mjs', import.meta.url));
const DIST_INDEX = pathToFileURL(fileURLToPath(new URL('../../../dist/index.js', import.meta.url))).href;

interface Memory {
  readonly rssMB: number;
  readonly hwmMB: number;
  readonly heapUsedMB: number;
  readonly heapTotalMB: number;
  readonly externalMB: number;
}

/** VmRSS and VmHWM of `pid` (the service has no child processes: its store and signing run on threads). */
function processMemory(pid: number): { rssMB: number; hwmMB: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kB = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(status)?.[1] ?? 0);
  return { rssMB: round((kB('VmRSS') * 1024) / MB, 1), hwmMB: round((kB('VmHWM') * 1024) / MB, 1) };
}

function heap(folder: string): { heapUsedMB: number; heapTotalMB: number; externalMB: number } {
  try {
    const figures = JSON.parse(readFileSync(join(folder, 'heap-0.json'), 'utf8')) as { heapUsed: number; heapTotal: number; external: number };
    return { heapUsedMB: round(figures.heapUsed / MB, 1), heapTotalMB: round(figures.heapTotal / MB, 1), externalMB: round(figures.external / MB, 1) };
  } catch {
    return { heapUsedMB: 0, heapTotalMB: 0, externalMB: 0 }; // not written yet, or caught mid-write
  }
}

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const count = options.quick ? 1_000 : 10_000;
  const sink = await startSinkProcess({ record: 'count' });
  const service = await startHeraldService({ store: 'sqlite', config: { engine: { actorIdleMs: IDLE_MS } }, nodeFlags: ['--import', HEAP_REPORTER] });
  const folder = dirname(service.sqlitePath!);
  const read = (): Memory => ({ ...processMemory(service.pid), ...heap(folder) });
  const { publish } = (await import(DIST_INDEX)) as typeof import('../../../lib/index.ts');
  const producerDb = new Database(service.sqlitePath!);
  producerDb.pragma('busy_timeout = 5000');
  try {
    const atStart = read();
    progress(`creating ${count} endpoints`);
    const ids: string[] = [];
    for (let tenant = 0; tenant * 10 < count; tenant++) {
      const urls = Array.from({ length: Math.min(10, count - tenant * 10) }, (_, j) => `${sink.url}/ep/${tenant * 10 + j}`);
      ids.push(...(await service.createEndpoints(`t${tenant}`, urls)));
    }
    await sleep(1_000);
    const beforeDelivery = read();
    let peak = beforeDelivery;
    const sampler = setInterval(() => {
      const now = read();
      peak = {
        rssMB: Math.max(peak.rssMB, now.rssMB),
        hwmMB: Math.max(peak.hwmMB, now.hwmMB),
        heapUsedMB: Math.max(peak.heapUsedMB, now.heapUsedMB),
        heapTotalMB: Math.max(peak.heapTotalMB, now.heapTotalMB),
        externalMB: Math.max(peak.externalMB, now.externalMB),
      };
    }, SAMPLE_MS);
    progress(`publishing one event to each of ${count} endpoints`);
    const started = performance.now();
    for (let i = 0; i < count; i += PUBLISH_BATCH) {
      publish(producerDb, ids.slice(i, i + PUBLISH_BATCH).map((endpointId, j) => ({ tenantId: `t${Math.floor((i + j) / 10)}`, type: 'bench.event', endpointId, payload: { hello: 'world' } })));
      await sleep(0);
    }
    let delivered = 0;
    const complete = await waitFor(async () => (delivered += (await sink.take()).count) >= count, options.quick ? 30_000 : 120_000, 200);
    const deliverySeconds = (performance.now() - started) / 1000;
    const actorsAtPeak = (await service.api<{ actors: unknown[] }>('GET', '/v1/status')).actors.length;
    progress(`${delivered}/${count} delivered in ${deliverySeconds.toFixed(1)} s; waiting for idle eviction`);
    await sleep(IDLE_MS + 2_500);
    clearInterval(sampler);
    const settled = read();
    const actorsAfterEviction = (await service.api<{ actors: unknown[] }>('GET', '/v1/status')).actors.length;
    return {
      endpoints: count,
      delivered,
      deliverySeconds: round(deliverySeconds, 1),
      rssAtStartMB: atStart.rssMB,
      rssBeforeDeliveryMB: beforeDelivery.rssMB,
      peakRssMB: Math.max(peak.rssMB, peak.hwmMB),
      peakHeapMB: peak.heapUsedMB,
      settledRssMB: settled.rssMB,
      settledHeapMB: settled.heapUsedMB,
      heapTotalMB: { peak: peak.heapTotalMB, settled: settled.heapTotalMB },
      externalMB: { peak: peak.externalMB, settled: settled.externalMB },
      actorsAtPeak,
      actorsAfterEviction,
      target: '<= 150 MB RSS (the compiled service)',
      met: Math.max(peak.rssMB, peak.hwmMB) <= 150 && complete,
    };
  } finally {
    producerDb.close();
    await service.close();
    await sink.close();
  }
}
