import { expect } from 'chai';
import { seededRandom, systemRandom } from '../../lib/clock.ts';
import type { Random } from '../../lib/clock.ts';
import { DeliveryMode } from '../../lib/model.ts';
import type { Verdict } from '../../lib/policy/classify.ts';
import { decideNextStep } from '../../lib/policy/next-step.ts';
import { retryPolicyOf } from '../../lib/policy/retry-policy.ts';
import { RETRY_PRESETS } from '../../lib/policy/retry-schedule.ts';

const now = Date.UTC(2026, 0, 1);
const schedule = RETRY_PRESETS.default;
const HOUR = 3_600_000;
const middle: Random = () => 0.5;
const serverError: Verdict = { kind: 'retry', reason: 'HTTP 503', retryAfterMs: undefined, pauseMailbox: false };

function decide(verdict: Verdict, attemptNumber: number, overrides: { mode?: DeliveryMode; random?: Random } = {}) {
  return decideNextStep({
    verdict,
    attemptNumber,
    retry: retryPolicyOf({ preset: 'default' }),
    roundStartedAt: undefined,
    mode: overrides.mode ?? DeliveryMode.AT_LEAST_ONCE,
    now,
    random: overrides.random ?? middle,
  });
}

describe('decideNextStep', () => {
  it('is delivered when the verdict is', () => {
    expect(decide({ kind: 'delivered' }, 3)).to.deep.equal({ kind: 'delivered' });
  });

  it('is dead on a permanent failure, whatever attempts remain', () => {
    expect(decide({ kind: 'permanent', reason: 'HTTP 410' }, 1)).to.deep.equal({ kind: 'dead', reason: 'permanent: HTTP 410' });
  });

  it('is dead on a retryable failure in at-most-once mode', () => {
    expect(decide(serverError, 1, { mode: DeliveryMode.AT_MOST_ONCE })).to.deep.equal({ kind: 'dead', reason: 'at-most-once: HTTP 503' });
  });

  context('when the default schedule runs its course', () => {
    it('retries after attempts 1 to 8 at the scheduled offsets ±20 %, then is dead after attempt 9', () => {
      const random = seededRandom(1);
      for (let attempt = 1; attempt <= 8; attempt++) {
        const step = decide(serverError, attempt, { random });
        const delay = schedule[attempt - 1]!;
        expect(step.kind).to.equal('retry');
        if (step.kind !== 'retry') return;
        expect(step.at - now).to.be.within(delay * 0.8, delay * 1.2);
        expect(step.pauseUntil).to.equal(undefined);
      }
      expect(decide(serverError, 9)).to.deep.equal({ kind: 'dead', reason: 'exhausted after 9 attempts: HTTP 503' });
    });

    it('uses exactly the scheduled delay at the middle of the jitter band', () => {
      const offsets = schedule.map((_, index) => {
        const step = decide(serverError, index + 1);
        return step.kind === 'retry' ? step.at - now : undefined;
      });
      expect(offsets).to.deep.equal([...schedule]);
    });
  });

  context('when the server sent Retry-After', () => {
    it('waits at least that long', () => {
      const verdict: Verdict = { ...serverError, retryAfterMs: 10 * 60_000 };
      expect(decide(verdict, 1, { random: systemRandom })).to.deep.equal({ kind: 'retry', at: now + 10 * 60_000, pauseUntil: undefined });
    });

    it('does not shorten a longer scheduled delay', () => {
      const verdict: Verdict = { ...serverError, retryAfterMs: 1_000 };
      expect(decide(verdict, 8)).to.deep.equal({ kind: 'retry', at: now + 24 * 60 * 60_000, pauseUntil: undefined });
    });
  });

  it('pauses the mailbox until the next attempt after a 429', () => {
    const verdict: Verdict = { kind: 'retry', reason: 'HTTP 429', retryAfterMs: 120_000, pauseMailbox: true };
    expect(decide(verdict, 1)).to.deep.equal({ kind: 'retry', at: now + 120_000, pauseUntil: now + 120_000 });
  });

  it('follows a custom schedule and exhausts after its length + 1 attempts', () => {
    const retry = retryPolicyOf({ schedule: ['PT1S'] });
    const input = { verdict: serverError, retry, roundStartedAt: undefined, mode: DeliveryMode.AT_LEAST_ONCE, now, random: middle } as const;
    expect(decideNextStep({ ...input, attemptNumber: 1 })).to.deep.equal({ kind: 'retry', at: now + 1_000, pauseUntil: undefined });
    expect(decideNextStep({ ...input, attemptNumber: 2 })).to.deep.equal({ kind: 'dead', reason: 'exhausted after 2 attempts: HTTP 503' });
  });

  context('when the policy is a formula bounded by a window', () => {
    // Waits of 1 h, 2 h, 4 h, 8 h … (no jitter at r = 0.5), within 12 h of the first attempt.
    const retry = retryPolicyOf({ initial: 'PT1H', multiplier: 2, max: 'PT6H', window: 'PT12H' });
    const firstAt = now - 5 * HOUR;
    const step = (attemptNumber: number, at: number, verdict: Verdict = serverError) =>
      decideNextStep({ verdict, attemptNumber, retry, roundStartedAt: firstAt, mode: DeliveryMode.AT_LEAST_ONCE, now: at, random: middle });

    it('retries while the next attempt falls within the window since the first attempt', () => {
      // 5 h after the first attempt, a 4 h wait lands at 9 h: within 12 h.
      expect(step(3, now)).to.deep.equal({ kind: 'retry', at: now + 4 * HOUR, pauseUntil: undefined });
      // At 6 h, the 6 h wait (8 h, capped by max) lands exactly at 12 h: still within.
      expect(step(4, firstAt + 6 * HOUR)).to.deep.equal({ kind: 'retry', at: firstAt + 12 * HOUR, pauseUntil: undefined });
    });

    it('dead-letters once the next attempt would fall beyond it', () => {
      expect(step(4, firstAt + 6 * HOUR + 1)).to.deep.equal({
        kind: 'dead',
        reason: 'exhausted after 4 attempts (the next would fall beyond the retry window): HTTP 503',
      });
    });

    it('counts a Retry-After that pushes the next attempt beyond it', () => {
      const verdict: Verdict = { ...serverError, retryAfterMs: 8 * HOUR };
      expect(step(1, now, verdict).kind).to.equal('dead');
    });

    it('counts the window from now when the first attempt is not known', () => {
      const unknownStart = decideNextStep({
        verdict: serverError, attemptNumber: 4, retry, roundStartedAt: undefined, mode: DeliveryMode.AT_LEAST_ONCE, now, random: middle,
      });
      expect(unknownStart).to.deep.equal({ kind: 'retry', at: now + 6 * HOUR, pauseUntil: undefined });
    });

    it('stops at the most attempts a formula allows, whatever the window', () => {
      const long = retryPolicyOf({ initial: 'PT1S', multiplier: 1, max: 'PT1S', window: 'P30D' });
      const last = decideNextStep({
        verdict: serverError, attemptNumber: 50, retry: long, roundStartedAt: now, mode: DeliveryMode.AT_LEAST_ONCE, now, random: middle,
      });
      expect(last).to.deep.equal({ kind: 'dead', reason: 'exhausted after 50 attempts: HTTP 503' });
    });
  });
});
