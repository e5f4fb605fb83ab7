/**
 * What happens to a delivery after an attempt: done, retried at a time, or
 * dead-lettered. Pure: the verdict, retry policy and mode in; the step out.
 */
import type { Random } from '../clock.ts';
import { DeliveryMode } from '../model.ts';
import type { Verdict } from './classify.ts';
import { retryWaitMs, type RetryPolicy } from './retry-policy.ts';

export type NextStep =
  | { readonly kind: 'delivered' }
  | {
      readonly kind: 'retry';
      /** When the next attempt is due (epoch ms). */
      readonly at: number;
      /** Set after a 429: the endpoint's mailbox sends nothing before this. */
      readonly pauseUntil: number | undefined;
    }
  | { readonly kind: 'dead'; readonly reason: string };

export interface NextStepInput {
  readonly verdict: Verdict;
  /** The attempt just made, 1-based. */
  readonly attemptNumber: number;
  readonly retry: RetryPolicy;
  /**
   * When the round's first attempt started, for a policy with a window. `undefined` when it is
   * not known (not looked up, or the lookup failed): the window then counts from `now`.
   */
  readonly roundStartedAt: number | undefined;
  readonly mode: DeliveryMode;
  readonly now: number;
  readonly random: Random;
}

/**
 * Decides the next step. A retry waits the policy's jittered wait for this attempt, but never
 * less than the server's `Retry-After`; none is scheduled beyond the policy's window.
 */
export function decideNextStep(input: NextStepInput): NextStep {
  const { verdict, attemptNumber, retry, mode, now, random } = input;
  switch (verdict.kind) {
    case 'delivered':
      return { kind: 'delivered' };
    case 'permanent':
      return { kind: 'dead', reason: `permanent: ${verdict.reason}` };
    case 'retry': {
      if (mode === DeliveryMode.AT_MOST_ONCE) return { kind: 'dead', reason: `at-most-once: ${verdict.reason}` };
      const waitMs = retryWaitMs(retry, attemptNumber, random);
      if (waitMs === undefined) {
        return { kind: 'dead', reason: `exhausted after ${attemptNumber} attempts: ${verdict.reason}` };
      }
      const at = now + Math.max(waitMs, verdict.retryAfterMs ?? 0);
      if (retry.windowMs !== undefined && at - (input.roundStartedAt ?? now) > retry.windowMs) {
        return { kind: 'dead', reason: `exhausted after ${attemptNumber} attempts (the next would fall beyond the retry window): ${verdict.reason}` };
      }
      return { kind: 'retry', at, pauseUntil: verdict.pauseMailbox ? at : undefined };
    }
  }
}
