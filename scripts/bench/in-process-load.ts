/**
 * A steady load on an in-process Herald (under tsx): the producer publishes
 * in its own transactions on its own connection in this process, then calls
 * `herald.signal()` (the in-process outbox path). For the isolation scenario,
 * which reaches inside; the latency scenario measures the compiled service
 * with a producer process instead (scenarios/latency.ts).
 */
import { publish } from '../../lib/producer/sqlite-publish.ts';
import { openBenchHerald, payloadOf, preciseNow, progress, sleep, startSinkProcess, waitFor } from './harness.ts';

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
