/**
 * Adaptive concurrency: one endpoint (concurrency 64) whose consumer copes
 * with a number of requests at once that changes over time — 50, then 10,
 * then 200 — each held 100 ms; a request beyond that is answered 503 at once
 * (the sink's `capacity`). Run twice on a fresh Herald with the same backlog:
 * the concurrency fixed at 64, then adaptive (`{initial: 1}`, up to 64).
 *
 * Per phase, from the sink's side: utilisation (the mean of requests held
 * over the phase, against what Herald could use: the sink's capacity, at most
 * the endpoint's 64), overshoot (requests refused with 503 / all requests),
 * delivered/s (requests accepted), Herald's mean limit (sampled from
 * `/v1/status` every 250 ms), and how soon Herald's requests in flight (its
 * `running`, sampled with the limit) first reach 90 % of what it could use
 * after the capacity changed: how fast it follows a jump. The breaker is set out of reach, so that what is
 * compared is the concurrency alone: most of the fixed run's requests are
 * refused, above the default breaker's 50 %.
 * Refused deliveries retry after 1 s; the backlog outlasts every phase.
 */
import { publish } from '../../../lib/producer/sqlite-publish.ts';
import { openBenchHerald, progress, round, sleep, startSinkProcess, waitFor, type ScenarioOptions, type ScenarioResult, type SinkProcess } from '../harness.ts';

const MAX_CONCURRENCY = 64;
const HOLD_MS = 100;
/** The sink's capacity in each phase: requests it takes at once. */
const CAPACITY_PHASES = [50, 10, 200] as const;
const LIMIT_SAMPLE_MS = 250;
/** The share of what Herald could use that counts as having followed a change of capacity. */
const FOLLOWED_SHARE = 0.9;
/** How soon after a rise of capacity Herald should be there (one more per round trip took 5–6 s at a load of 5). */
const FOLLOW_RISE_WITHIN_S = 4;
/** More than the phases can deliver, so that work is queued throughout. */
const BACKLOG_MARGIN = 1.5;

interface PhaseResult {
  readonly capacity: number;
  readonly seconds: number;
  readonly meanHeld: number;
  readonly utilisation: number;
  readonly overshoot: number;
  readonly deliveredPerSec: number;
  readonly refused: number;
  readonly meanLimit: number;
  /** Herald's side, sampled with the limit: attempts under way, and deliveries waiting in the mailbox. */
  readonly meanRunning: number;
  readonly meanQueued: number;
  /** Seconds from the phase's start to the first sample with `running` at 90 % of what Herald could use; null: never. */
  readonly secondsTo90: number | null;
}

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const phaseMs = options.quick ? 3_000 : 8_000;
  const deliverable = CAPACITY_PHASES.reduce((sum, c) => sum + (Math.min(c, MAX_CONCURRENCY) * phaseMs) / HOLD_MS, 0);
  const events = Math.ceil((deliverable * BACKLOG_MARGIN) / 1_000) * 1_000;
  const sink = await startSinkProcess({ delayMs: HOLD_MS });
  try {
    const fixed = await runMode(sink, 'fixed', events, phaseMs);
    const adaptive = await runMode(sink, 'adaptive', events, phaseMs);
    const belowMax = CAPACITY_PHASES.map((c, i) => [c, i] as const).filter(([c]) => c < MAX_CONCURRENCY);
    const rises = CAPACITY_PHASES.map((c, i) => [c, i] as const).filter(([c, i]) => i > 0 && c > CAPACITY_PHASES[i - 1]!);
    return {
      maxConcurrency: MAX_CONCURRENCY,
      holdMs: HOLD_MS,
      phaseSeconds: phaseMs / 1_000,
      events,
      fixed: fixed.phases,
      adaptive: adaptive.phases,
      backlogLeft: { fixed: fixed.backlogLeft, adaptive: adaptive.backlogLeft },
      target:
        'adaptive: less overshoot than fixed where the capacity is below 64, utilisation >= 0.5 in every phase, ' +
        `and running at 90 % of what it can use within ${FOLLOW_RISE_WITHIN_S} s of a rise of capacity`,
      met:
        fixed.backlogLeft > 0 &&
        adaptive.backlogLeft > 0 &&
        belowMax.every(([, i]) => adaptive.phases[i]!.overshoot < fixed.phases[i]!.overshoot) &&
        adaptive.phases.every((p) => p.utilisation >= 0.5) &&
        rises.every(([, i]) => (adaptive.phases[i]!.secondsTo90 ?? Infinity) <= FOLLOW_RISE_WITHIN_S),
    };
  } finally {
    await sink.close();
  }
}

async function runMode(
  sink: SinkProcess,
  mode: 'fixed' | 'adaptive',
  events: number,
  phaseMs: number,
): Promise<{ phases: PhaseResult[]; backlogLeft: number }> {
  const bench = await openBenchHerald({
    delivery: { maxInFlight: 256, connectionsPerOrigin: 128 },
    breaker: { errorThresholdPercentage: 100, volumeThreshold: 100_000 },
  });
  const { herald, producerDb } = bench;
  try {
    // Disabled until the backlog is fanned out, so that the phases measure delivery, not fan-out.
    const { endpoint } = await herald.createEndpoint({
      tenantId: 'bench',
      url: `${sink.url}/adaptive`,
      concurrency: MAX_CONCURRENCY,
      retry: { initial: 'PT1S', multiplier: 1, max: 'PT1S', attempts: 50 },
      ...(mode === 'adaptive' ? { adaptiveConcurrency: { initial: 1 } } : {}),
    });
    for (let i = 0; i < events; i += 1_000) {
      const batch = Array.from({ length: Math.min(1_000, events - i) }, (_, k) => ({
        tenantId: 'bench',
        type: 'bench.event',
        endpointId: endpoint.id,
        payload: { n: i + k },
      }));
      publish(producerDb, batch);
    }
    await herald.disableEndpoint(endpoint.id);
    await herald.start();
    await waitFor(async () => (await herald.status()).unfannedEvents === 0, 60_000, 100);
    sink.configure({ capacity: CAPACITY_PHASES[0] });
    await herald.enableEndpoint(endpoint.id);
    const phases: PhaseResult[] = [];
    for (const capacity of CAPACITY_PHASES) {
      sink.configure({ capacity });
      await sink.take();
      const limits: number[] = [];
      const running: number[] = [];
      const queued: number[] = [];
      const startedAt = Date.now();
      const endAt = startedAt + phaseMs;
      const usable = Math.min(capacity, MAX_CONCURRENCY);
      let secondsTo90: number | null = null;
      while (Date.now() < endAt) {
        await sleep(LIMIT_SAMPLE_MS);
        const actor = (await herald.status()).actors.find((a) => a.endpointId === endpoint.id);
        if (actor === undefined) continue;
        limits.push(actor.concurrencyLimit);
        running.push(actor.running);
        queued.push(actor.queued);
        if (secondsTo90 === null && actor.running >= FOLLOWED_SHARE * usable) secondsTo90 = round((Date.now() - startedAt) / 1_000, 2);
      }
      const { load } = await sink.take();
      const meanHeld = load.heldMs / load.spanMs;
      const phase: PhaseResult = {
        capacity,
        seconds: round(load.spanMs / 1_000, 1),
        meanHeld: round(meanHeld, 1),
        utilisation: round(meanHeld / usable, 2),
        overshoot: round(load.refused / Math.max(1, load.accepted + load.refused), 3),
        deliveredPerSec: Math.round(load.accepted / (load.spanMs / 1_000)),
        refused: load.refused,
        meanLimit: mean(limits),
        meanRunning: mean(running),
        meanQueued: mean(queued),
        secondsTo90,
      };
      phases.push(phase);
      progress(
        `${mode}, capacity ${capacity}: utilisation ${phase.utilisation}, overshoot ${phase.overshoot}, ${phase.deliveredPerSec} delivered/s, ` +
          `mean limit ${phase.meanLimit}, running ${phase.meanRunning}, queued ${phase.meanQueued}, ` +
          `running at 90 % of ${usable} after ${phase.secondsTo90 ?? 'never'} s`,
      );
    }
    const status = await herald.status();
    // Pending deliveries, and events not fanned out yet (they wait there while the mailbox is full).
    const backlogLeft = (status.deliveries.pending ?? 0) + status.unfannedEvents;
    return { phases, backlogLeft };
  } finally {
    sink.configure({ capacity: null });
    await bench.close();
  }
}

function mean(values: readonly number[]): number {
  return round(values.reduce((a, b) => a + b, 0) / Math.max(1, values.length), 1);
}
