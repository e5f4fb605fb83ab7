import { expect } from 'chai';
import { LATENCY_BUCKETS, latencyBucketOf, MINUTE_MS, type DeliveryMinute } from '../../lib/store/delivery-minutes.ts';
import { seriesOf, seriesRange, seriesRequestOf } from '../../lib/status/delivery-series.ts';
import { validationErrorOf } from '../support/validation-error.ts';

const T0 = Date.UTC(2026, 0, 1, 12, 0);

function minute(at: number, counts: Partial<DeliveryMinute> = {}, durationMs = 40): DeliveryMinute {
  const latency = new Array<number>(LATENCY_BUCKETS).fill(0);
  latency[latencyBucketOf(durationMs)] = counts.attempts ?? 0;
  return { minute: at, attempts: 0, delivered: 0, retriesScheduled: 0, deadLettered: 0, firstAttempts: 0, firstAttemptSuccesses: 0, latency, ...counts };
}

describe('Delivery series', () => {
  describe('seriesRequestOf', () => {
    it('reads an endpoint id or all, and a window (1h by default)', () => {
      expect(seriesRequestOf(new URLSearchParams('endpointId=all'))).to.deep.equal({ endpointId: 'all', window: '1h' });
      expect(seriesRequestOf(new URLSearchParams('endpointId=ep_1&window=24h'))).to.deep.equal({ endpointId: 'ep_1', window: '24h' });
    });

    it('refuses a missing endpointId, an unknown window or parameter, naming it and the rule', () => {
      const missing = validationErrorOf(() => seriesRequestOf(new URLSearchParams('window=1h')));
      expect(missing.field).to.equal('endpointId');
      expect(missing.rule).to.include('required').and.include('all');
      const window = validationErrorOf(() => seriesRequestOf(new URLSearchParams('endpointId=all&window=7d')));
      expect(window.field).to.equal('window');
      expect(window.rule).to.include('1h, 24h').and.include('"7d"');
      const unknown = validationErrorOf(() => seriesRequestOf(new URLSearchParams('endpointId=all&since=1')));
      expect(unknown.field).to.equal('since');
      expect(unknown.rule).to.include('endpointId, window');
    });
  });

  describe('seriesRange', () => {
    it('covers the last hour in minutes, and the last day in 10-minute steps, the last step holding now', () => {
      const now = T0 + 25 * MINUTE_MS + 30_000;
      expect(seriesRange('1h', now)).to.deep.equal({ from: T0 + 26 * MINUTE_MS - 60 * MINUTE_MS, to: T0 + 26 * MINUTE_MS, stepMs: MINUTE_MS });
      expect(seriesRange('24h', now)).to.deep.equal({ from: T0 + 30 * MINUTE_MS - 24 * 60 * MINUTE_MS, to: T0 + 30 * MINUTE_MS, stepMs: 10 * MINUTE_MS });
    });
  });

  describe('seriesOf', () => {
    it('gives every step of the window a point, zeros where nothing happened', () => {
      const series = seriesOf({ endpointId: 'all', window: '1h' }, T0, []);
      expect(series.points).to.have.length(60);
      expect(series.points.at(-1)).to.deep.equal({
        at: T0, attempts: 0, delivered: 0, retriesScheduled: 0, deadLettered: 0, firstAttempts: 0,
        firstAttemptSuccessRatio: null, latencyP50Ms: null, latencyP95Ms: null,
      });
      expect(series.points[0]?.at).to.equal(T0 - 59 * MINUTE_MS);
    });

    it('rolls minutes up into 10-minute points for 24 h: 144 points, counts added, ratio and percentiles over the step', () => {
      const now = T0 + 5 * MINUTE_MS;
      const series = seriesOf({ endpointId: 'ep_1', window: '24h' }, now, [
        minute(T0, { attempts: 10, delivered: 8, retriesScheduled: 2, firstAttempts: 10, firstAttemptSuccesses: 8 }, 40),
        minute(T0 + 4 * MINUTE_MS, { attempts: 10, delivered: 9, deadLettered: 1, firstAttempts: 10, firstAttemptSuccesses: 9 }, 900),
        // Outside the window: left out.
        minute(T0 - 25 * 60 * MINUTE_MS, { attempts: 99, delivered: 99 }),
      ]);
      expect(series).to.include({ endpointId: 'ep_1', window: '24h', stepMs: 10 * MINUTE_MS, to: T0 + 10 * MINUTE_MS });
      expect(series.points).to.have.length(144);
      expect(series.points.reduce((n, p) => n + p.attempts, 0)).to.equal(20);
      const last = series.points.at(-1);
      expect(last).to.include({ at: T0, attempts: 20, delivered: 17, retriesScheduled: 2, deadLettered: 1, firstAttempts: 20 });
      expect(last?.firstAttemptSuccessRatio).to.equal(17 / 20);
      expect(last?.latencyP50Ms).to.equal(50);
      expect(last?.latencyP95Ms).to.equal(1_200);
    });
  });
});
