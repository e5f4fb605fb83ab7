/**
 * What happens to a delivery after an attempt: done, retried at a time, or
 * dead-lettered. Pure: the verdict, schedule and mode in; the step out.
 */
import type { Random } from '../clock.ts';
import { DeliveryMode } from '../model.ts';
import type { Verdict } from './classify.ts';
import { jitter } from './jitter.ts';

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
  /** Delays in ms between attempts: entry `i` follows attempt `i + 1`. */
  readonly schedule: readonly number[];
  readonly mode: DeliveryMode;
  readonly now: number;
  readonly random: Random;
}

/**
 * Decides the next step. A retry waits the schedule's delay for this attempt
 * with jitter, but never less than the server's `Retry-After`.
 */
export function decideNextStep(input: NextStepInput): NextStep {
  const { verdict, attemptNumber, schedule, mode, now, random } = input;
  switch (verdict.kind) {
    case 'delivered':
      return { kind: 'delivered' };
    case 'permanent':
      return { kind: 'dead', reason: `permanent: ${verdict.reason}` };
    case 'retry': {
      if (mode === DeliveryMode.AT_MOST_ONCE) return { kind: 'dead', reason: `at-most-once: ${verdict.reason}` };
      const delayMs = schedule[attemptNumber - 1];
      if (delayMs === undefined) {
        return { kind: 'dead', reason: `exhausted after ${attemptNumber} attempts: ${verdict.reason}` };
      }
      const at = now + Math.max(jitter(delayMs, random), verdict.retryAfterMs ?? 0);
      return { kind: 'retry', at, pauseUntil: verdict.pauseMailbox ? at : undefined };
    }
  }
}
