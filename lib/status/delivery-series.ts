/**
 * The delivery charts' data: a window of the last hour (a point a minute) or the last 24 hours (a
 * point per 10 minutes, so the answer stays at 144 points), read from the stored delivery minutes
 * (`delivery-minutes.ts`) and never from the attempt log. Minutes without attempts are points of
 * zeros, so every window has all its points, the last one the step still running.
 */
import { ValidationError } from '../errors.ts';
import {
  addCounts,
  emptyCounts,
  latencyPercentile,
  MINUTE_MS,
  minuteOf,
  type DeliveryMinute,
  type MutableCounts,
} from '../store/delivery-minutes.ts';

export const SERIES_WINDOWS = Object.freeze({
  '1h': { spanMs: 60 * MINUTE_MS, stepMs: MINUTE_MS },
  '24h': { spanMs: 24 * 60 * MINUTE_MS, stepMs: 10 * MINUTE_MS },
} as const);
export type SeriesWindow = keyof typeof SERIES_WINDOWS;

/** What the chart of every endpoint together is asked for with. */
export const ALL_ENDPOINTS = 'all';

/** A series asked for: one endpoint's, or `all` the asker may see. */
export interface SeriesRequest {
  readonly endpointId: string;
  readonly window: SeriesWindow;
}

/** One point of a series: the counts of its step, starting at `at`. */
export interface SeriesPoint {
  readonly at: number;
  readonly attempts: number;
  readonly delivered: number;
  readonly retriesScheduled: number;
  readonly deadLettered: number;
  readonly firstAttempts: number;
  /** First attempts that delivered / first attempts; `null` without a first attempt. */
  readonly firstAttemptSuccessRatio: number | null;
  /** Attempt duration percentiles, from the histogram (see `delivery-minutes.ts` for the error bound); `null` without attempts. */
  readonly latencyP50Ms: number | null;
  readonly latencyP95Ms: number | null;
}

export interface DeliverySeries {
  readonly endpointId: string;
  readonly window: SeriesWindow;
  readonly stepMs: number;
  /** The first point's start. */
  readonly from: number;
  /** The end of the last point (the current step's end). */
  readonly to: number;
  readonly points: readonly SeriesPoint[];
}

const PARAMETERS = ['endpointId', 'window', 'tenantId'] as const;

/**
 * Reads `endpointId` (an endpoint id, or `all`) and `window` (`1h`, the default, or `24h`).
 * @throws ValidationError (`HERALD_INVALID_INPUT`) naming the parameter and its rule.
 */
export function seriesRequestOf(query: URLSearchParams): SeriesRequest {
  for (const key of query.keys()) {
    if (!(PARAMETERS as readonly string[]).includes(key)) {
      throw new ValidationError(key, `is not a known parameter (allowed: ${PARAMETERS.join(', ')})`);
    }
  }
  const endpointId = query.get('endpointId');
  if (endpointId === null || endpointId.trim() === '') {
    throw new ValidationError('endpointId', `is required: an endpoint id, or ${ALL_ENDPOINTS} for every endpoint`);
  }
  const window = query.get('window') ?? '1h';
  if (!Object.hasOwn(SERIES_WINDOWS, window)) {
    throw new ValidationError('window', `must be one of ${Object.keys(SERIES_WINDOWS).join(', ')} (got ${JSON.stringify(window)})`);
  }
  return { endpointId, window: window as SeriesWindow };
}

/** The minutes a window covers at `now`: whole steps, the last one holding `now`. */
export function seriesRange(window: SeriesWindow, now: number): { readonly from: number; readonly to: number; readonly stepMs: number } {
  const { spanMs, stepMs } = SERIES_WINDOWS[window];
  const to = minuteOf(now) - (minuteOf(now) % stepMs) + stepMs;
  return { from: to - spanMs, to, stepMs };
}

/** Rolls the minutes (summed over the endpoints already, in any order) up into the window's points. */
export function seriesOf(request: SeriesRequest, now: number, minutes: readonly DeliveryMinute[]): DeliverySeries {
  const { from, to, stepMs } = seriesRange(request.window, now);
  const steps: MutableCounts[] = Array.from({ length: (to - from) / stepMs }, () => emptyCounts());
  for (const minute of minutes) {
    if (minute.minute < from || minute.minute >= to) continue;
    const step = steps[Math.floor((minute.minute - from) / stepMs)];
    if (step !== undefined) addCounts(step, minute);
  }
  const points = steps.map((c, i): SeriesPoint => ({
    at: from + i * stepMs,
    attempts: c.attempts,
    delivered: c.delivered,
    retriesScheduled: c.retriesScheduled,
    deadLettered: c.deadLettered,
    firstAttempts: c.firstAttempts,
    firstAttemptSuccessRatio: c.firstAttempts === 0 ? null : c.firstAttemptSuccesses / c.firstAttempts,
    latencyP50Ms: latencyPercentile(c.latency, 0.5),
    latencyP95Ms: latencyPercentile(c.latency, 0.95),
  }));
  return { endpointId: request.endpointId, window: request.window, stepMs, from, to, points };
}
