import { EventEmitter } from 'node:events';
import { expect } from 'chai';
import { ManualClock } from '../../lib/clock.ts';
import type { AttemptEvent, EngineEvents } from '../../lib/engine/engine-events.ts';
import { ErrorCode, isHeraldError } from '../../lib/errors.ts';
import { LATENCY_BUCKETS, latencyBucketOf, MINUTE_MS, type DeliveryMinuteIncrement } from '../../lib/store/delivery-minutes.ts';
import { DeliveryMinuteRecorder, MINUTE_RECORDER_DEFAULTS, type MinuteRecorderOptions } from '../../lib/status/minute-recorder.ts';
import type { Settlement } from '../../lib/store/port.ts';

const T0 = Date.UTC(2026, 0, 1, 12, 0);
const SECOND = 1_000;

type Kind = 'delivered' | 'retry' | 'dead';

function attemptEvent(endpointId: string, kind: Kind, options: { at?: number; durationMs?: number; attempt?: number; applied?: boolean; tenantId?: string } = {}): AttemptEvent {
  const durationMs = options.durationMs ?? 40;
  const startedAt = (options.at ?? T0) - durationMs;
  const attempt = { number: options.attempt ?? 1, startedAt, durationMs, outcome: { kind: 'timeout', timeoutMs: 1 } as const, error: null };
  const base = { deliveryId: 'dlv_1', epoch: 1, attempt };
  const settlement: Settlement =
    kind === 'delivered' ? { kind, ...base } : kind === 'retry' ? { kind, ...base, nextAttemptAt: T0 } : { kind, ...base, deadLetterId: 'dl_1', reason: 'exhausted' };
  return {
    endpointId,
    tenantId: options.tenantId ?? 'acme',
    eventId: 'evt_1',
    eventCreatedAt: startedAt,
    deliveryId: 'dlv_1',
    attempt: options.attempt ?? 1,
    startedAt,
    durationMs,
    outcome: attempt.outcome,
    summary: kind,
    settlement,
    applied: options.applied ?? true,
  };
}

/** A recorder on a ManualClock whose store write the test scripts: each call recorded, failing while `failing` is set. */
function setup(options: MinuteRecorderOptions = {}) {
  const clock = new ManualClock(T0);
  const events = new EventEmitter<EngineEvents>();
  const writes: DeliveryMinuteIncrement[][] = [];
  const errors: Array<{ error: unknown; dropped: number }> = [];
  const state = { failing: false };
  const waiters: Array<() => void> = [];
  const recorder = new DeliveryMinuteRecorder(
    events,
    {
      clock,
      write: async (increments) => {
        if (state.failing) throw new Error('disk full');
        // A copy: what reached the store, not the recorder's rows.
        writes.push(structuredClone(increments) as DeliveryMinuteIncrement[]);
        for (const wake of waiters.splice(0)) wake();
      },
      onError: (error, dropped) => errors.push({ error, dropped }),
    },
    options,
  );
  const emit = (e: AttemptEvent): void => void events.emit('attempt', e);
  /** Resolves at the next write the recorder makes on its own (its timer). */
  const written = () => new Promise<void>((resolve) => waiters.push(resolve));
  return { clock, events, writes, errors, state, recorder, emit, written };
}

/** Every increment written so far, added up per (endpoint, minute). */
function totals(writes: DeliveryMinuteIncrement[][]): Map<string, DeliveryMinuteIncrement> {
  const out = new Map<string, DeliveryMinuteIncrement>();
  for (const inc of writes.flat()) {
    const key = `${inc.endpointId}@${inc.minute}`;
    const have = out.get(key);
    if (have === undefined) out.set(key, structuredClone(inc));
    else {
      out.set(key, {
        ...have,
        attempts: have.attempts + inc.attempts,
        delivered: have.delivered + inc.delivered,
        retriesScheduled: have.retriesScheduled + inc.retriesScheduled,
        deadLettered: have.deadLettered + inc.deadLettered,
        firstAttempts: have.firstAttempts + inc.firstAttempts,
        firstAttemptSuccesses: have.firstAttemptSuccesses + inc.firstAttemptSuccesses,
        latency: have.latency.map((n, i) => n + (inc.latency[i] ?? 0)),
      });
    }
  }
  return out;
}

describe('DeliveryMinuteRecorder', () => {
  context('when attempts end', () => {
    it('counts them per endpoint and minute: outcome, first attempts and their successes, and the duration bucket', async () => {
      const r = setup();
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 5 * SECOND, durationMs: 40 }));
      r.emit(attemptEvent('ep_a', 'retry', { at: T0 + 6 * SECOND, durationMs: 900 }));
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 7 * SECOND, attempt: 2 }));
      r.emit(attemptEvent('ep_a', 'dead', { at: T0 + 8 * SECOND, attempt: 8 }));
      r.emit(attemptEvent('ep_b', 'delivered', { at: T0 + 9 * SECOND, tenantId: 'globex' }));
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + MINUTE_MS + SECOND }));
      // A fenced settle wrote nothing: not counted.
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 10 * SECOND, applied: false }));
      expect(r.recorder.pendingRows).to.equal(3);
      await r.recorder.flush();

      expect(r.writes).to.have.length(1);
      const [a0, b0, a1] = r.writes[0] ?? [];
      expect(a0).to.include({ endpointId: 'ep_a', tenantId: 'acme', minute: T0, attempts: 4, delivered: 2, retriesScheduled: 1, deadLettered: 1, firstAttempts: 2, firstAttemptSuccesses: 1 });
      expect(a0?.latency).to.have.length(LATENCY_BUCKETS);
      expect(a0?.latency[latencyBucketOf(40)]).to.equal(3);
      expect(a0?.latency[latencyBucketOf(900)]).to.equal(1);
      expect(b0).to.include({ endpointId: 'ep_b', tenantId: 'globex', minute: T0, attempts: 1 });
      expect(a1).to.include({ endpointId: 'ep_a', minute: T0 + MINUTE_MS, attempts: 1 });
      expect(r.recorder.pendingRows).to.equal(0);
    });

    it('never writes per attempt: a thousand attempts in one minute are one row in one write', async () => {
      const r = setup();
      for (let i = 0; i < 1_000; i++) r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 30 * SECOND }));
      expect(r.writes).to.have.length(0);
      const write = r.written();
      r.clock.advance(MINUTE_MS);
      await write;
      expect(r.writes).to.have.length(1);
      expect(r.writes[0]).to.have.length(1);
      expect(r.writes[0]?.[0]?.attempts).to.equal(1_000);
    });
  });

  context('when time passes', () => {
    it('flushes when the minute closes, even before flushIntervalMs', async () => {
      const r = setup({ flushIntervalMs: 30 * SECOND });
      r.clock.advanceTo(T0 + 50 * SECOND);
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 50 * SECOND }));
      expect(r.clock.nextTimerAt(), 'due when the minute closes, not 30 s on').to.equal(T0 + MINUTE_MS);
      const write = r.written();
      r.clock.advanceTo(T0 + MINUTE_MS);
      await write;
      expect(r.writes.map((w) => w.map((inc) => [inc.minute, inc.attempts]))).to.deep.equal([[[T0, 1]]]);
    });

    it('flushes an open minute after flushIntervalMs, and counts what comes later in the next flush only', async () => {
      const r = setup({ flushIntervalMs: 10 * SECOND });
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + SECOND }));
      expect(r.clock.nextTimerAt()).to.equal(T0 + 10 * SECOND);
      let write = r.written();
      r.clock.advance(10 * SECOND);
      await write;
      expect(r.writes.map((w) => w.map((inc) => inc.attempts))).to.deep.equal([[1]]);
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 12 * SECOND }));
      r.emit(attemptEvent('ep_a', 'retry', { at: T0 + 13 * SECOND }));
      write = r.written();
      r.clock.advance(10 * SECOND);
      await write;
      expect(r.writes.map((w) => w.map((inc) => inc.attempts))).to.deep.equal([[1], [2]]);
      expect(totals(r.writes).get(`ep_a@${T0}`)).to.include({ attempts: 3, delivered: 2, retriesScheduled: 1 });
    });

    it('arms no timer while nothing was counted, then one, due 10 s on by default', () => {
      const r = setup();
      expect(r.clock.pendingTimerCount).to.equal(0);
      r.emit(attemptEvent('ep_a', 'delivered'));
      r.emit(attemptEvent('ep_b', 'delivered'));
      expect(r.clock.pendingTimerCount).to.equal(1);
      expect(r.clock.nextTimerAt()).to.equal(T0 + 10 * SECOND);
      expect(MINUTE_RECORDER_DEFAULTS).to.deep.equal({ flushIntervalMs: 10_000, maxPendingRows: 100_000 });
    });
  });

  context('when the store refuses a write', () => {
    it('keeps the increments and adds them to the next flush, counting nothing twice', async () => {
      const r = setup();
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + SECOND }));
      r.emit(attemptEvent('ep_a', 'retry', { at: T0 + 2 * SECOND }));
      r.state.failing = true;
      await r.recorder.flush();
      expect(r.writes).to.have.length(0);
      expect(r.errors).to.have.length(1);
      expect(r.errors[0]?.dropped).to.equal(0);
      expect(r.recorder.pendingRows).to.equal(1);
      // Meanwhile: more for the same row, and a new one.
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 3 * SECOND }));
      r.emit(attemptEvent('ep_b', 'dead', { at: T0 + 3 * SECOND }));
      r.state.failing = false;
      const write = r.written();
      r.clock.advance(MINUTE_MS);
      await write;
      const sum = totals(r.writes);
      expect(sum.get(`ep_a@${T0}`)).to.include({ attempts: 3, delivered: 2, retriesScheduled: 1, firstAttempts: 3 });
      expect(sum.get(`ep_b@${T0}`)).to.include({ attempts: 1, deadLettered: 1 });
      expect(r.writes.flat().filter((inc) => inc.endpointId === 'ep_a'), 'one row per (endpoint, minute) per write').to.have.length(1);
    });

    it('keeps at most maxPendingRows rows, dropping the oldest minutes, and says how many attempts went', async () => {
      const r = setup({ maxPendingRows: 2 });
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 }));
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 1 }));
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + MINUTE_MS }));
      r.emit(attemptEvent('ep_a', 'delivered', { at: T0 + 2 * MINUTE_MS }));
      r.state.failing = true;
      await r.recorder.flush();
      expect(r.errors.map((e) => e.dropped)).to.deep.equal([2]);
      expect(r.recorder.pendingRows).to.equal(2);
      r.state.failing = false;
      await r.recorder.flush();
      expect(r.writes.flat().map((inc) => inc.minute)).to.deep.equal([T0 + MINUTE_MS, T0 + 2 * MINUTE_MS]);
    });
  });

  context('when closed', () => {
    it('writes what is left once, cancels its timer and counts nothing after', async () => {
      const r = setup();
      r.emit(attemptEvent('ep_a', 'delivered'));
      await r.recorder.close();
      expect(r.writes.flat().map((inc) => inc.attempts)).to.deep.equal([1]);
      expect(r.clock.pendingTimerCount).to.equal(0);
      r.emit(attemptEvent('ep_a', 'delivered'));
      await r.recorder.close();
      expect(r.recorder.pendingRows).to.equal(0);
      expect(r.writes).to.have.length(1);
    });
  });

  context('when an option breaks its rule', () => {
    it('throws HERALD_INVALID_CONFIG naming it', () => {
      const events = new EventEmitter<EngineEvents>();
      const deps = { clock: new ManualClock(), write: async () => undefined, onError: () => undefined };
      for (const [option, value] of [['flushIntervalMs', 0], ['maxPendingRows', 1.5]] as const) {
        let error: unknown;
        try {
          new DeliveryMinuteRecorder(events, deps, { [option]: value });
        } catch (caught) {
          error = caught;
        }
        expect(isHeraldError(error) && error.code).to.equal(ErrorCode.INVALID_CONFIG);
        expect((error as Error).message).to.include(option);
      }
    });
  });
});
