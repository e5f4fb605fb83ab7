/**
 * Isolation: 20 healthy endpoints plus one that answers after 8 s (on its own
 * sink, as a slow customer would be), 10 % of the events going to the slow
 * one; the healthy endpoints' commit → first byte p99, against the same load
 * without the slow endpoint. Each side runs twice, alternating, and each
 * side's p99 is taken over the latencies of all its rounds together (a
 * shared machine is noisy; one round's p99 rests on a few dozen samples).
 */
import { percentile, progress, round, type ScenarioOptions, type ScenarioResult } from '../harness.ts';
import { steadyLoad } from '../in-process-load.ts';

export async function run(options: ScenarioOptions): Promise<ScenarioResult> {
  const seconds = options.quick ? 3 : 15;
  const rate = 200;
  const rounds = options.quick ? 1 : 2;
  const withSlow: number[] = [];
  const without: number[] = [];
  const pooled = { withSlow: [] as number[], without: [] as number[] };
  let missing = 0;
  for (let r = 0; r < rounds; r++) {
    progress(`round ${r + 1}/${rounds}: without the slow endpoint`);
    const a = await steadyLoad({ rate, seconds, warmupSeconds: 1, endpoints: 20, label: 'isolation (healthy only)' });
    without.push(percentile(a.latencies, 99));
    pooled.without.push(...a.latencies);
    progress(`round ${r + 1}/${rounds}: with the slow endpoint`);
    const b = await steadyLoad({ rate, seconds, warmupSeconds: 1, endpoints: 20, label: 'isolation (with slow)', slow: { delayMs: 8_000, share: 0.1 } });
    withSlow.push(percentile(b.latencies, 99));
    pooled.withSlow.push(...b.latencies);
    missing += a.missing + b.missing;
  }
  const p99 = (xs: number[]): number => percentile(xs, 99);
  const p50 = (xs: number[]): number => percentile(xs, 50);
  const ratio = p99(pooled.withSlow) / p99(pooled.without);
  return {
    ratePerSec: rate,
    seconds,
    rounds,
    healthyP99WithSlowMs: round(p99(pooled.withSlow)),
    healthyP99WithoutMs: round(p99(pooled.without)),
    healthyP50WithSlowMs: round(p50(pooled.withSlow)),
    healthyP50WithoutMs: round(p50(pooled.without)),
    p99Runs: { withSlow: withSlow.map((x) => round(x)), without: without.map((x) => round(x)) },
    ratio: round(ratio, 3),
    missing,
    target: 'healthy p99 ratio <= 1.2',
    met: ratio <= 1.2 && missing === 0,
  };
}
