/**
 * Replay: dead letters replayed while new events keep arriving. 100 000 dead
 * letters (2 000 with --quick) on 10 endpoints, in two halves: the first is
 * replayed as a paced replay job (`POST /v1/replays`, chunks of 100, each
 * endpoint kept under 2 × its replays' share of its concurrency), the
 * second by the one-call bulk replay (`POST /v1/dead-letters/replay`, every
 * match due at once), as the baseline. Before, and during each replay, new
 * events go to the same endpoints at 200/s; for each, the time from its
 * producer's commit to the first byte of its request at the sink. The sink
 * answers after 5 ms, so the endpoints take time to drain a backlog.
 * Reported: the new events' p50/p99 without a replay, during the paced job and
 * during the bulk replay, and each replay's rate (dead letters delivered per
 * second, from its start until the sink has seen them all), and the load
 * average; and, in its progress lines, how busy the main thread was in each
 * phase (a saturated event loop would explain a latency by itself). About 2 minutes on 2 quiet cores (making the dead letters takes a
 * minute); on a loaded machine it can reach the scenario's 7-minute limit.
 */
import { loadavg } from 'node:os';
import { monitorEventLoopDelay, performance as perf } from 'node:perf_hooks';
import { publish } from '../../../lib/producer/sqlite-publish.ts';
import { openBenchHerald, payloadOf, percentile, preciseNow, progress, round, sleep, startSinkProcess, waitFor, type ScenarioOptions, type ScenarioResult } from '../harness.ts';

const ENDPOINTS = 10;
const RATE = 200;
const SINK_DELAY_MS = 5;

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const deadLetters = options.quick ? 2_000 : 100_000;
  const half = deadLetters / 2;
  const sink = await startSinkProcess({ record: 'ids', status: 404 });
  const bench = await openBenchHerald();
  const { herald, producerDb } = bench;
  try {
    const ids: string[] = [];
    for (let i = 0; i < ENDPOINTS; i++) ids.push((await herald.createEndpoint({ tenantId: 'bench', url: `${sink.url}/ep/${i}` })).endpoint.id);
    await herald.start();
    const body = payloadOf(1024, 0);
    const publishBacklog = async (count: number): Promise<void> => {
      for (let n = 0; n < count; n += 500) {
        publish(producerDb, Array.from({ length: Math.min(500, count - n) }, (_, i) => ({ tenantId: 'bench', type: 'bench.old', endpointId: ids[(n + i) % ENDPOINTS]!, payload: body })));
        herald.signal();
      }
      const target = ((await herald.store.countDeliveries()).dead ?? 0) + count;
      await waitFor(async () => ((await herald.store.countDeliveries()).dead ?? 0) >= target, 300_000, 250);
    };
    progress(`replay: ${deadLetters} dead letters on ${ENDPOINTS} endpoints`);
    await publishBacklog(half);
    await sleep(5);
    const between = Date.now();
    await sleep(5);
    await publishBacklog(half);
    sink.configure({ status: 200, delayMs: SINK_DELAY_MS });
    await sink.take();

    let n = 0;
    /** Publishes new events at RATE until `done()`; returns commit → first byte latencies and the seconds the old ones took. */
    const phase = async (label: string, done: () => boolean | Promise<boolean>, oldExpected: number): Promise<{ latencies: number[]; missing: number; oldSeconds: number }> => {
      const committedAt = new Map<string, number>();
      const eluBefore = perf.eventLoopUtilization();
      const loopDelay = monitorEventLoopDelay({ resolution: 1 });
      loopDelay.enable();
      const arrived = new Map<string, number>();
      let oldSeen = 0;
      const started = performance.now();
      let oldDoneAt = oldExpected === 0 ? started : undefined;
      let published = 0;
      const drain = async (): Promise<void> => {
        const taken = await sink.take();
        for (let i = 0; i < taken.ids.length; i++) {
          const id = taken.ids[i]!;
          if (committedAt.has(id)) arrived.set(id, taken.times[i]!);
          else oldSeen++;
        }
        if (oldDoneAt === undefined && oldSeen >= oldExpected) oldDoneAt = performance.now();
      };
      let nextReport = started + 5_000;
      while (!(await done()) || oldDoneAt === undefined) {
        const due = Math.floor(((performance.now() - started) / 1000) * RATE);
        while (published < due) {
          const [event] = publish(producerDb, { tenantId: 'bench', type: 'bench.new', endpointId: ids[n++ % ENDPOINTS]!, payload: body });
          if (event !== undefined) committedAt.set(event.id, preciseNow());
          published++;
        }
        herald.signal();
        await drain();
        if (performance.now() >= nextReport) {
          nextReport += 5_000;
          progress(`replay: ${label}: ${published} new published, ${oldSeen}/${oldExpected} replayed seen`);
        }
        if (performance.now() - started > 300_000) throw new Error(`${label}: not finished after 300 s`);
        await sleep(5);
      }
      await waitFor(async () => {
        await drain();
        return arrived.size === committedAt.size;
      }, 20_000, 100);
      const latencies = [...arrived].map(([id, at]) => at - committedAt.get(id)!);
      loopDelay.disable();
      const busy = perf.eventLoopUtilization(eluBefore).utilization;
      progress(`replay: ${label}: main thread busy ${round(busy * 100, 0)} %, its loop delay p50/p99 ${round(loopDelay.percentile(50) / 1e6)}/${round(loopDelay.percentile(99) / 1e6)} ms`);
      return { latencies, missing: committedAt.size - arrived.size, oldSeconds: ((oldDoneAt ?? performance.now()) - started) / 1000 };
    };

    progress(`replay: ${RATE}/s new events, no replay, ${options.quick ? 3 : 10} s`);
    const quietUntil = performance.now() + (options.quick ? 3_000 : 10_000);
    const quiet = await phase('no replay', () => performance.now() >= quietUntil, 0);

    progress(`replay: paced job over ${half} dead letters (chunks of 100)`);
    const job = await herald.startReplay({ tenantId: 'bench', until: between }, { chunkSize: 100 });
    const paced = await phase('paced job', async () => (await herald.getReplay(job.id)).state !== 'running', half);
    const pacedJob = await herald.getReplay(job.id);

    progress(`replay: bulk replay of ${half} dead letters in one call`);
    let bulkDone = false;
    void herald.replayDeadLetters({ tenantId: 'bench', since: between }).then(() => (bulkDone = true));
    const bulk = await phase('bulk replay', () => bulkDone, half);

    const stats = (m: { latencies: number[]; missing: number }) => ({
      events: m.latencies.length,
      p50Ms: round(percentile(m.latencies, 50)),
      p99Ms: round(percentile(m.latencies, 99)),
      maxMs: round(Math.max(...m.latencies)),
      missing: m.missing,
    });
    return {
      deadLetters,
      endpoints: ENDPOINTS,
      newEventsPerSec: RATE,
      sinkDelayMs: SINK_DELAY_MS,
      withoutReplay: stats(quiet),
      pacedJob: { ...stats(paced), replayed: pacedJob.replayed, state: pacedJob.state, seconds: round(paced.oldSeconds, 1), replayedPerSec: round(half / paced.oldSeconds, 0) },
      bulkReplay: { ...stats(bulk), seconds: round(bulk.oldSeconds, 1), replayedPerSec: round(half / bulk.oldSeconds, 0) },
      loadAverage1m: round(loadavg()[0] ?? 0, 2),
      target: 'report',
    };
  } finally {
    await bench.close();
    await sink.close();
  }
}
