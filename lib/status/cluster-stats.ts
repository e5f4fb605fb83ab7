/**
 * The cluster's recent attempts per endpoint (`GET /v1/stats`; the dashboard's and the portal's
 * failure rates): every node's stored delivery minutes (`delivery-minutes.ts`) summed per endpoint
 * over the window, the last hour. Nothing is kept here: each request reads the store.
 *
 * The figures lag the attempts: a node writes its minutes at the end of each minute or
 * `minuteRecorder.flushIntervalMs` after an attempt (10 s by default), whichever comes first
 * (`minute-recorder.ts`), so an attempt shows here up to one flush after it ended, on every node.
 *
 * The minutes hold counts only, not errors: an endpoint's `lastFailureAt` and `lastError` come from
 * the failure groups (`lib/store/failure-groups.ts`), the latest failure that is still open
 * (a delivery waiting for its retry, or an open dead letter), and are `null` when none is, even
 * when the window counts failures that have since been delivered. Only the largest
 * {@link LAST_FAILURE_GROUPS} groups in scope are read: a store reads each group's sample by a
 * query of its own, and the pages ask for the stats every 5 s.
 */
import type { FailureGroup } from '../store/failure-groups.ts';
import { MINUTE_MS, minuteOf, type EndpointDeliveryTotals } from '../store/delivery-minutes.ts';
import type { EndpointRecent } from './endpoint-stats.ts';

/** The failure groups read for the endpoints' last failures, the largest first. */
export const LAST_FAILURE_GROUPS = 100;

/** The stats' window: the last hour, in whole minutes, the current one included. */
export const STATS_WINDOW_MS = 60 * MINUTE_MS;

export interface ClusterStats {
  /** Whose attempts: every node's. (`GET /v1/status`'s `recent` is this node's, `scope: 'node'`.) */
  readonly scope: 'cluster';
  readonly windowMs: number;
  /** The window's first minute, inclusive, epoch ms. */
  readonly from: number;
  /** The window's end, exclusive: the end of the current minute. */
  readonly to: number;
  /** Every endpoint in scope with an attempt in the window, by id. */
  readonly endpoints: readonly EndpointRecent[];
}

/** The minutes the window covers at `now`: `windowMs` of whole minutes, the last one holding `now`. */
export function statsRange(now: number, windowMs = STATS_WINDOW_MS): { readonly from: number; readonly to: number } {
  const to = minuteOf(now) + MINUTE_MS;
  return { from: to - windowMs, to };
}

/**
 * Each endpoint's figures: attempts, failures (attempts that did not deliver: a retry scheduled or
 * dead-lettered) and their rate, with the latest open failure of its groups.
 */
export function clusterStatsOf(
  range: { readonly from: number; readonly to: number },
  totals: readonly EndpointDeliveryTotals[],
  groups: readonly FailureGroup[],
): ClusterStats {
  const latest = new Map<string, FailureGroup>();
  for (const group of groups) {
    const seen = latest.get(group.endpointId);
    if (seen === undefined || group.lastSeen > seen.lastSeen) latest.set(group.endpointId, group);
  }
  const endpoints = totals
    .filter((t) => t.attempts > 0)
    .map((t): EndpointRecent => {
      const failures = t.attempts - t.delivered;
      const group = latest.get(t.endpointId);
      return {
        endpointId: t.endpointId,
        attempts: t.attempts,
        failures,
        failureRate: failures / t.attempts,
        lastFailureAt: group?.lastSeen ?? null,
        lastError: group?.sample?.summary ?? null,
      };
    });
  return { scope: 'cluster', windowMs: range.to - range.from, from: range.from, to: range.to, endpoints };
}
