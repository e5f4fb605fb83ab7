/**
 * Cluster: throughput with 2 processes on one SQLite file against 1. Not
 * measured yet: slot sharing between processes is the cluster issue, still
 * in progress (a second process on the same file waits for the first one's
 * leases), so two processes would measure one. Reported as "not yet".
 */
import type { ScenarioOptions, ScenarioResult } from '../harness.ts';

export async function run(_options: ScenarioOptions): Promise<ScenarioResult> {
  return { status: 'not yet', reason: 'slot sharing between processes (the cluster issue) is in progress', met: null };
}
