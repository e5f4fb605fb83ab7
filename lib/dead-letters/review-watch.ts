/**
 * The review watch: no dead letter should wait longer than `reviewWithinMs`
 * for someone to look at it (acknowledge, discard or replay it). Every
 * `checkIntervalMs`, on the injected clock, it reads the oldest unreviewed
 * dead letter (state `new`) and emits `deadletters.unreviewed` once per
 * crossing:
 *
 *   clear ──the oldest unreviewed one is older than reviewWithinMs──► overdue (emits deadletters.unreviewed)
 *   overdue ──none older than reviewWithinMs is left unreviewed──► clear
 *
 * While overdue nothing more is emitted, however long it lasts and however
 * many join the backlog: the gauge `herald_dead_letter_oldest_unreviewed_seconds`
 * keeps telling. Once every overdue one has been reviewed (or replayed,
 * discarded, purged) the watch is clear again, and the next dead letter to age
 * past the limit emits again.
 *
 * In a cluster only the node holding slot 0 checks, so one alert goes out, not
 * one per node. The state lives in memory: after a restart, or when slot 0
 * moves to another node, a backlog still overdue is reported once more.
 *
 *   created ──start()──► checking every checkIntervalMs ──close()──► closed
 */
import { durationText, type Clock, type TimerHandle } from '../clock.ts';
import { OperationalEventType, type UnreviewedDeadLettersEvent } from '../engine/engine-events.ts';
import type { UnreviewedDeadLetters } from '../store/port.ts';

/** Unreviewed dead letters are counted up to this many (a count walks an index entry each). */
export const UNREVIEWED_COUNT_CAP = 100_000;

export interface ReviewWatchOptions {
  /** A dead letter left in state `new` for longer is overdue. @default 86400000 (24 h) */
  readonly reviewWithinMs: number;
  /** How often to look. @default 60000 */
  readonly checkIntervalMs: number;
}

export interface ReviewWatchDeps {
  readonly clock: Clock;
  /** The store's `unreviewedDeadLetters(UNREVIEWED_COUNT_CAP)`. */
  readonly unreviewed: () => Promise<UnreviewedDeadLetters>;
  /** False on a node that should not check (it does not hold slot 0). */
  readonly isChecker: () => boolean;
  readonly emit: (event: UnreviewedDeadLettersEvent) => void;
  readonly onError: (error: unknown) => void;
}

/** The decision of one check: whether the queue is overdue now, and whether that is news. */
export interface ReviewStep {
  readonly overdue: boolean;
  readonly alert: boolean;
}

/** Pure: the next state from the last one and what the store says at `now`. */
export function reviewStep(wasOverdue: boolean, seen: UnreviewedDeadLetters, now: number, reviewWithinMs: number): ReviewStep {
  const overdue = seen.oldestAt !== null && now - seen.oldestAt > reviewWithinMs;
  return { overdue, alert: overdue && !wasOverdue };
}

export class ReviewWatch {
  readonly #options: ReviewWatchOptions;
  readonly #deps: ReviewWatchDeps;
  #overdue = false;
  #timer: TimerHandle | undefined;
  #checking: Promise<void> | undefined;
  #closed = false;

  constructor(options: ReviewWatchOptions, deps: ReviewWatchDeps) {
    this.#options = options;
    this.#deps = deps;
  }

  start(): void {
    if (this.#closed || this.#timer !== undefined) return;
    this.#timer = this.#deps.clock.setInterval(() => void this.check(), this.#options.checkIntervalMs);
  }

  /** True between the alert and the review of every overdue dead letter. */
  get overdue(): boolean {
    return this.#overdue;
  }

  /** One check now (the timer calls it; tests may too). A check still running is not doubled. */
  check(): Promise<void> {
    this.#checking ??= this.#check().finally(() => {
      this.#checking = undefined;
    });
    return this.#checking;
  }

  /** Stops the timer; a check running finishes, but emits nothing. */
  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  async #check(): Promise<void> {
    if (this.#closed || !this.#deps.isChecker()) return;
    let seen: UnreviewedDeadLetters;
    try {
      seen = await this.#deps.unreviewed();
    } catch (error) {
      // Judged again at the next check: a store that failed says nothing about the queue.
      this.#deps.onError(error);
      return;
    }
    if (this.#closed) return;
    const now = this.#deps.clock.now();
    const { reviewWithinMs } = this.#options;
    const step = reviewStep(this.#overdue, seen, now, reviewWithinMs);
    this.#overdue = step.overdue;
    if (!step.alert || seen.oldestAt === null) return;
    const oldestAgeMs = now - seen.oldestAt;
    const count = `${seen.count}${seen.count >= UNREVIEWED_COUNT_CAP ? '+' : ''}`;
    this.#deps.emit({
      type: OperationalEventType.DEAD_LETTERS_UNREVIEWED,
      at: now,
      detail: `${count} dead letter(s) wait for review; the oldest has waited ${durationText(oldestAgeMs)} (review within ${durationText(reviewWithinMs)})`,
      count: seen.count,
      oldestAgeMs,
      oldestCreatedAt: seen.oldestAt,
      reviewWithinMs,
    });
  }
}
