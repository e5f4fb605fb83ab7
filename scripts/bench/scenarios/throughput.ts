/**
 * Throughput: N events over 100 endpoints (addressed directly), signing on,
 * the sink answering 200 at once, Herald as users run it: the compiled
 * `herald start` service on SQLite with default settings (the store on its
 * own thread, group-committing), the events coming from a producer in its own
 * process publishing 1 000 per transaction with the compiled package. The
 * sink counts distinct `webhook-id`s; delivered/s runs from the producer's
 * first transaction to the last new id's arrival. Each run starts a fresh
 * service and warms it up (not measured) before the measured events (see
 * peers/peer-round.ts); CPU per delivered event is read from /proc for the
 * service (all its threads) and the producer.
 *
 * Herald runs once more with the store on the main thread
 * (`engine.storeThread: false`), so what the thread buys is a ratio measured
 * in the same run.
 *
 * Baseline, in the same run: a raw undici Pool in its own process posting the
 * same bodies to the same sink paths with the same connection budget (16, all
 * endpoints share the sink's origin) and 256 requests in flight. Run before
 * and after Herald; the mean is the baseline, so drift of a noisy machine hits
 * both sides.
 */
import { progress, round, startSinkProcess, type ScenarioOptions, type ScenarioResult } from '../harness.ts';
import { ensureBuilt } from '../herald-service.ts';
import { heraldSystem } from '../peers/herald-system.ts';
import { BODY_BYTES, Cleanup, ENDPOINTS } from '../peers/peer-kit.ts';
import { runRound, type PeerSystem, type RoundResult } from '../peers/peer-round.ts';
import { rawSystem } from '../peers/raw-system.ts';

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const events = options.quick ? 2_000 : 50_000;
  const warmup = options.quick ? 1_000 : 5_000;
  const timeoutMs = options.quick ? 25_000 : 300_000;
  ensureBuilt();
  const cleanup = new Cleanup();
  try {
    const sink = await startSinkProcess({ record: 'ids' });
    cleanup.add('sink', () => undefined, () => sink.close());
    let rounds = 0;
    const measure = async (system: PeerSystem): Promise<RoundResult> => {
      progress(`${system.name}: ${events} events after a warm-up of ${warmup}`);
      return runRound(system, { sink, bodies: events + warmup, cleanup, roundId: `throughput_${++rounds}` }, { events, warmup, timeoutMs });
    };
    const before = await measure(rawSystem('baseline'));
    const herald = await measure(heraldSystem({ name: 'Herald', store: 'sqlite' }));
    const mainThread = await measure(heraldSystem({ name: 'Herald, store on the main thread', store: 'sqlite', config: { engine: { storeThread: false } } }));
    const after = await measure(rawSystem('baseline again'));
    const baselinePerSec = (before.deliveredPerSec + after.deliveredPerSec) / 2;
    return {
      events,
      warmup,
      endpoints: ENDPOINTS,
      bodyBytes: BODY_BYTES,
      herald: 'node dist/cli/main.js start --store sqlite:… (default settings), producer process publish() 1 000 per transaction',
      eventsPerSec: herald.deliveredPerSec,
      baselinePerSec: round(baselinePerSec, 0),
      ratio: round(herald.deliveredPerSec / baselinePerSec, 3),
      baselineRuns: [before.deliveredPerSec, after.deliveredPerSec],
      delivered: herald.distinct,
      heraldCpuMicrosPerEvent: herald.cpuUsPerEvent.worker,
      producerCpuMicrosPerEvent: herald.cpuUsPerEvent.producer,
      baselineCpuMicrosPerEvent: before.cpuUsPerEvent.worker,
      mainThreadStore: {
        eventsPerSec: mainThread.deliveredPerSec,
        heraldCpuMicrosPerEvent: mainThread.cpuUsPerEvent.worker,
        delivered: mainThread.distinct,
      },
      storeThreadSpeedup: round(herald.deliveredPerSec / mainThread.deliveredPerSec, 2),
      sinkRequests: herald.requests,
      duplicates: herald.duplicates,
      seconds: herald.seconds,
      complete: herald.complete && mainThread.complete,
      target: 'ratio >= 0.5',
      met: herald.deliveredPerSec / baselinePerSec >= 0.5 && herald.complete,
    };
  } finally {
    await cleanup.run();
    cleanup.dispose();
  }
}
