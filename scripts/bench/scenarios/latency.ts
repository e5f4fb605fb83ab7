/**
 * Latency: a steady 1 000 events/s for 20 s (5 s with --quick) over 20
 * endpoints; for each event, the time from its producer's commit to the first
 * byte of its request at the sink (headers parsed), p50/p99/max.
 *
 * The producer publishes in its own transactions on its own connection in
 * this process, then calls `herald.signal()` (the in-process outbox path; a
 * producer in another process is seen within `engine.pollIntervalMs`).
 * A warm-up second at the same rate is not counted.
 */
import { publish } from '../../../lib/producer/sqlite-publish.ts';
import { openBenchHerald, payloadOf, percentile, preciseNow, progress, round, sleep, startSinkProcess, waitFor, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const ENDPOINTS = 20;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const rate = 1_000;
  const seconds = options.quick ? 3 : 20;
  const measured = await steadyLoad({ rate, seconds, warmupSeconds: 1, endpoints: ENDPOINTS, label: 'latency' });
  return {
    ratePerSec: rate,
    seconds,
    endpoints: ENDPOINTS,
    events: measured.latencies.length,
    p50Ms: round(percentile(measured.latencies, 50)),
    p99Ms: round(percentile(measured.latencies, 99)),
    maxMs: round(Math.max(...measured.latencies)),
    missing: measured.missing,
    target: 'p50 <= 10 ms, p99 <= 50 ms',
    met: percentile(measured.latencies, 50) <= 10 && percentile(measured.latencies, 99) <= 50 && measured.missing === 0,
  };
}

export interface SteadyLoad {
  readonly rate: number;
  readonly seconds: number;
  readonly warmupSeconds: number;
  readonly endpoints: number;
  readonly label: string;
  /** Also an endpoint on a second sink answering after this delay, taking `slowShare` of the events. */
  readonly slow?: { readonly delayMs: number; readonly share: number };
}

/** Publishes at `rate` for `seconds` (after a warm-up), returns commit → first byte latencies of the healthy endpoints' events. */
export async function steadyLoad(load: SteadyLoad): Promise<{ latencies: number[]; missing: number }> {
  const sink = await startSinkProcess({ record: 'ids' });
  const slowSink = load.slow === undefined ? undefined : await startSinkProcess({ record: 'count', delayMs: load.slow.delayMs });
  const bench = await openBenchHerald();
  const { herald, producerDb } = bench;
  try {
    const ids: string[] = [];
    for (let i = 0; i < load.endpoints; i++) {
      ids.push((await herald.createEndpoint({ tenantId: 'bench', url: `${sink.url}/ep/${i}` })).endpoint.id);
    }
    const slowId = slowSink === undefined ? undefined : (await herald.createEndpoint({ tenantId: 'bench', url: `${slowSink.url}/slow` })).endpoint.id;
    await herald.start();
    const body = payloadOf(1024, 0);
    const committedAt = new Map<string, number>();
    let n = 0;
    let slowCredit = 0;
    const publishOne = (count: boolean): void => {
      slowCredit += load.slow?.share ?? 0;
      if (slowId !== undefined && slowCredit >= 1) {
        slowCredit -= 1;
        publish(producerDb, { tenantId: 'bench', type: 'bench.event', endpointId: slowId, payload: body });
        return;
      }
      const [event] = publish(producerDb, { tenantId: 'bench', type: 'bench.event', endpointId: ids[n++ % ids.length]!, payload: body });
      if (count && event !== undefined) committedAt.set(event.id, preciseNow());
    };
    const pace = async (seconds: number, count: boolean): Promise<void> => {
      const started = performance.now();
      let published = 0;
      const total = Math.round(load.rate * seconds);
      let nextReport = started + 5_000;
      while (published < total && performance.now() - started < seconds * 1000 + 5_000) {
        const due = Math.min(total, Math.floor(((performance.now() - started) / 1000) * load.rate));
        while (published < due) {
          publishOne(count);
          published++;
        }
        herald.signal();
        if (count && performance.now() >= nextReport) {
          nextReport += 5_000;
          progress(`${load.label}: ${published}/${total} published`);
        }
        await sleep(2);
      }
    };
    progress(`${load.label}: warm-up ${load.warmupSeconds} s at ${load.rate}/s`);
    await pace(load.warmupSeconds, false);
    await sleep(500);
    await sink.take();
    progress(`${load.label}: ${load.seconds} s at ${load.rate}/s${load.slow === undefined ? '' : ` (one endpoint answers after ${load.slow.delayMs} ms)`}`);
    await pace(load.seconds, true);
    // Wait until the healthy endpoints' events have all arrived.
    const arrived = new Map<string, number>();
    await waitFor(async () => {
      const taken = await sink.take();
      for (let i = 0; i < taken.ids.length; i++) if (!arrived.has(taken.ids[i]!)) arrived.set(taken.ids[i]!, taken.times[i]!);
      let all = true;
      for (const id of committedAt.keys()) if (!arrived.has(id)) all = false;
      return all;
    }, 20_000, 250);
    const latencies: number[] = [];
    let missing = 0;
    for (const [id, at] of committedAt) {
      const seen = arrived.get(id);
      if (seen === undefined) missing++;
      else latencies.push(seen - at);
    }
    return { latencies, missing };
  } finally {
    // The slow sink first, so attempts waiting on it end now instead of after its delay.
    await slowSink?.close();
    await bench.close();
    await sink.close();
  }
}
