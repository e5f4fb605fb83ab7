/**
 * Peers: the throughput scenario's workload (50 000 signed 1 KiB events over
 * 100 endpoint paths of the sink, undici `Pool` of 16 connections) through
 * BullMQ on Redis and graphile-worker on PostgreSQL, each from an empty store,
 * each worker in its own process, the producer in this (the scenario's)
 * process. The run ends when the sink has seen every id. Herald's figures
 * come from the throughput scenario of the same bench run (see run.ts).
 *
 * A peer whose server is missing is skipped with one line.
 */
import { progress, startSinkProcess, type ScenarioOptions, type ScenarioResult } from '../harness.ts';
import { runBullmq, type PeerOutcome } from './bullmq-scenario.ts';
import { runGraphile } from './graphile-scenario.ts';
import { BODY_BYTES, ENDPOINTS, workload } from './peer-kit.ts';

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const events = options.quick ? 2_000 : 50_000;
  const timeoutMs = options.quick ? 20_000 : 120_000;
  const jobs = workload(events);
  const sink = await startSinkProcess({ record: 'ids' });
  try {
    const peers: Record<string, PeerOutcome> = {};
    for (const [name, runPeer] of [['bullmq', runBullmq], ['graphile-worker', runGraphile]] as const) {
      try {
        peers[name] = await runPeer(sink, jobs, timeoutMs);
      } catch (error) {
        peers[name] = { error: error instanceof Error ? (error.stack ?? error.message) : String(error) };
      }
      const outcome = peers[name]!;
      if (outcome.skipped !== undefined) progress(`${name}: skipped — ${outcome.skipped}`);
      else if (outcome.error !== undefined) progress(`${name}: FAILED — ${outcome.error.split('\n')[0]}`);
    }
    return { events, endpoints: ENDPOINTS, bodyBytes: BODY_BYTES, producer: 'the scenario process (its CPU includes polling the sink)', peers };
  } finally {
    await sink.close();
  }
}
