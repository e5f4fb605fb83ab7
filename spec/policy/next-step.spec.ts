import { expect } from 'chai';
import { seededRandom, systemRandom } from '../../lib/clock.ts';
import type { Random } from '../../lib/clock.ts';
import { DeliveryMode } from '../../lib/model.ts';
import type { Verdict } from '../../lib/policy/classify.ts';
import { decideNextStep } from '../../lib/policy/next-step.ts';
import { RETRY_PRESETS } from '../../lib/policy/retry-schedule.ts';

const now = Date.UTC(2026, 0, 1);
const schedule = RETRY_PRESETS.default;
const middle: Random = () => 0.5;
const serverError: Verdict = { kind: 'retry', reason: 'HTTP 503', retryAfterMs: undefined, pauseMailbox: false };

function decide(verdict: Verdict, attemptNumber: number, overrides: { mode?: DeliveryMode; random?: Random } = {}) {
  return decideNextStep({
    verdict,
    attemptNumber,
    schedule,
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
    const input = { verdict: serverError, schedule: [1_000], mode: DeliveryMode.AT_LEAST_ONCE, now, random: middle } as const;
    expect(decideNextStep({ ...input, attemptNumber: 1 })).to.deep.equal({ kind: 'retry', at: now + 1_000, pauseUntil: undefined });
    expect(decideNextStep({ ...input, attemptNumber: 2 })).to.deep.equal({ kind: 'dead', reason: 'exhausted after 2 attempts: HTTP 503' });
  });
});
