/**
 * Throughput: N events over 100 endpoints (addressed directly), signing on,
 * the SQLite store, the sink answering 200 at once. Delivered events/s from
 * the first publish to the last settle. The events come from a producer in
 * its own process, publishing in its own transactions on its own connection
 * (the outbox pattern), so the Herald process's figures are Herald's alone:
 * its CPU per delivered event (all its threads) is reported beside the
 * producer's.
 *
 * Herald runs as configured by default (the SQLite store on its own thread,
 * group-committing), then once more with the store on the main thread
 * (`engine.storeThread: false`), so what the thread buys is a ratio measured
 * in the same run.
 *
 * Baseline, in the same run: a raw undici Pool posting the same bodies to the
 * same sink paths with the same connection budget (Herald's
 * `connectionsPerOrigin`, all endpoints share the sink's origin) and the same
 * requests in flight (`maxInFlight`). Run before and after Herald; the mean is
 * the baseline, so drift of a noisy machine hits both sides.
 */
import { Pool } from 'undici';
import type { ConfigOverrides } from '../../../lib/config/config.ts';
import { clockTicksPerSecond, mainThreadTicks, threadTicks } from '../peers/peer-kit.ts';
import {
  openBenchHerald,
  payloadOf,
  progress,
  round,
  startProducerProcess,
  startSinkProcess,
  waitFor,
  type ScenarioOptions,
  type ScenarioResult,
} from '../harness.ts';

const ENDPOINTS = 100;
const BODY_BYTES = 1024;
const PUBLISH_BATCH = 1_000;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const events = options.quick ? 2_000 : 50_000;
  const timeoutMs = options.quick ? 25_000 : 300_000;
  const sink = await startSinkProcess({ record: 'count' });
  try {
    const bodies = Array.from({ length: events }, (_, n) => JSON.stringify(payloadOf(BODY_BYTES, n)));
    const paths = Array.from({ length: ENDPOINTS }, (_, i) => `/ep/${i}`);

    progress(`baseline: raw undici Pool, ${events} POSTs (after a warm-up)`);
    await baseline(sink.url, paths, bodies.slice(0, 2_000), 16, 256);
    const before = await baseline(sink.url, paths, bodies, 16, 256);
    await sink.take();

    progress(`Herald: ${events} events over ${ENDPOINTS} endpoints`);
    const herald = await heraldRun(sink.url, paths, events, timeoutMs);
    const taken = await sink.take();

    progress('Herald with the store on the main thread (engine.storeThread: false)');
    const mainThread = await heraldRun(sink.url, paths, events, timeoutMs, { engine: { storeThread: false } });
    await sink.take();

    progress('baseline again');
    const after = await baseline(sink.url, paths, bodies, 16, 256);
    const baselinePerSec = (before + after) / 2;
    return {
      events,
      endpoints: ENDPOINTS,
      bodyBytes: BODY_BYTES,
      eventsPerSec: round(herald.eventsPerSec, 0),
      baselinePerSec: round(baselinePerSec, 0),
      ratio: round(herald.eventsPerSec / baselinePerSec, 3),
      baselineRuns: [round(before, 0), round(after, 0)],
      delivered: herald.delivered,
      heraldCpuMicrosPerEvent: round(herald.heraldCpuMicros / herald.delivered, 0),
      mainThreadCpuMicrosPerEvent: round(herald.mainThreadCpuMicros / herald.delivered, 0),
      mainThreadStore: {
        eventsPerSec: round(mainThread.eventsPerSec, 0),
        heraldCpuMicrosPerEvent: round(mainThread.heraldCpuMicros / mainThread.delivered, 0),
        delivered: mainThread.delivered,
      },
      storeThreadSpeedup: round(herald.eventsPerSec / mainThread.eventsPerSec, 2),
      producerCpuMicrosPerEvent: round(herald.producerCpuMicros / herald.delivered, 0),
      sinkRequests: taken.count,
      seconds: round(herald.seconds, 2),
      complete: herald.delivered === events && mainThread.delivered === events,
      target: 'ratio >= 0.5',
      met: herald.eventsPerSec / baselinePerSec >= 0.5 && herald.delivered === events,
    };
  } finally {
    await sink.close();
  }
}

/** Posts every body once, keeping `inFlight` requests out; returns requests/s. */
export async function baseline(origin: string, paths: readonly string[], bodies: readonly string[], connections: number, inFlight: number): Promise<number> {
  const pool = new Pool(origin, { connections, pipelining: 1 });
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < bodies.length) {
      const n = next++;
      const { body } = await pool.request({
        path: paths[n % paths.length]!,
        method: 'POST',
        headers: { 'content-type': 'application/json', 'webhook-id': `evt_${n}` },
        body: bodies[n]!,
      });
      await body.dump();
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: inFlight }, worker));
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  return bodies.length / seconds;
}

export async function heraldRun(origin: string, paths: readonly string[], events: number, timeoutMs: number, overrides: ConfigOverrides = {}) {
  const bench = await openBenchHerald(overrides);
  const { herald } = bench;
  try {
    const ids: string[] = [];
    for (const path of paths) {
      const { endpoint } = await herald.createEndpoint({ tenantId: 'bench', url: `${origin}${path}` });
      ids.push(endpoint.id);
    }
    let delivered = 0;
    let lastSettle = 0;
    let cpuAtEnd: NodeJS.CpuUsage | undefined;
    let mainTicksAtEnd: number | undefined;
    let threadTicksAtEnd: Map<number, number> | undefined;
    herald.events.on('attempt', (e) => {
      if (e.applied && e.settlement.kind === 'delivered' && ++delivered === events) {
        lastSettle = performance.now();
        cpuAtEnd = process.cpuUsage(cpuAtStart);
        mainTicksAtEnd = mainThreadTicks(process.pid);
        threadTicksAtEnd = threadTicks(process.pid);
      }
    });
    await herald.start();
    const producer = await startProducerProcess({ dbPath: bench.dbPath, endpointIds: ids, events, bodyBytes: BODY_BYTES, batch: PUBLISH_BATCH });
    // process.cpuUsage covers every thread of this process: the engine, the signing pool, the HTTP client.
    const cpuAtStart = process.cpuUsage();
    // The thread that runs the engine and speaks HTTP, alone (the store and signing threads excluded).
    const mainTicksAtStart = mainThreadTicks(process.pid);
    // Each thread alone, by OS thread id (`cpu-account.ts` tells which is which).
    const threadTicksAtStart = threadTicks(process.pid);
    const started = performance.now();
    try {
      const producerCpuMicros = await producer.publish();
      let reported = 0;
      await waitFor(() => {
        if (delivered - reported >= events / 5) {
          reported = delivered;
          progress(`Herald: ${delivered}/${events} delivered`);
        }
        return delivered >= events;
      }, timeoutMs, 100);
      const end = lastSettle > 0 ? lastSettle : performance.now();
      const cpu = cpuAtEnd ?? process.cpuUsage(cpuAtStart);
      const mainThreadCpuMicros = (((mainTicksAtEnd ?? mainThreadTicks(process.pid)) - mainTicksAtStart) * 1e6) / clockTicksPerSecond();
      const seconds = (end - started) / 1000;
      const threadCpuMicros = new Map<number, number>();
      for (const [tid, ticks] of threadTicksAtEnd ?? threadTicks(process.pid)) {
        threadCpuMicros.set(tid, ((ticks - (threadTicksAtStart.get(tid) ?? 0)) * 1e6) / clockTicksPerSecond());
      }
      return { eventsPerSec: delivered / seconds, seconds, delivered, heraldCpuMicros: cpu.user + cpu.system, mainThreadCpuMicros, threadCpuMicros, producerCpuMicros, windowStartedAt: started, windowEndedAt: end };
    } finally {
      await producer.close();
    }
  } finally {
    await bench.close();
  }
}
