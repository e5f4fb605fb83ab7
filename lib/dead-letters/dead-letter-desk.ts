/**
 * The dead-letter desk: reading dead letters (with their age), an operator's review of them
 * (acknowledge, discard: lib/store/triage.ts), replays by id or by filter, and the failures
 * grouped by endpoint and kind with their replay. Whatever is replayed is handed back to the
 * engine as pending work (`signal`); paced replay jobs are lib/dead-letters/replay-jobs.ts's.
 */
import type { Clock } from '../clock.ts';
import { ConflictError, NotFoundError } from '../errors.ts';
import type { DeadLetter } from '../model.ts';
import type { FailureGroup, FailureGroupFilter, FailureGroupReplay } from '../store/failure-groups.ts';
import type { DeadLetterFilter, Store } from '../store/port.ts';
import type { OperatorTriageState, TriageOutcome } from '../store/triage.ts';
import { validateFailureGroupInput } from './failure-group-input.ts';
import { validateBulkTriageInput, validateTriageInput } from './triage-input.ts';

/** A dead letter as the API shows it: with its age, by this node's clock. */
export type DeadLetterView = DeadLetter & { readonly ageMs: number };

export class DeadLetterDesk {
  readonly #store: Store;
  readonly #clock: Clock;
  readonly #signal: () => void;

  constructor(deps: {
    readonly store: Store;
    readonly clock: Clock;
    /** Tells this node's engine there is work to claim. */
    readonly signal: () => void;
  }) {
    this.#store = deps.store;
    this.#clock = deps.clock;
    this.#signal = deps.signal;
  }

  async list(filter: DeadLetterFilter): Promise<DeadLetterView[]> {
    const letters = await this.#store.listDeadLetters(filter);
    const now = this.#clock.now();
    return letters.map((letter) => ({ ...letter, ageMs: Math.max(0, now - letter.createdAt) }));
  }

  /** @throws NotFoundError (`deadLetterId`). */
  async get(id: string): Promise<DeadLetterView> {
    const deadLetter = await this.#store.getDeadLetter(id);
    if (deadLetter === undefined) throw new NotFoundError('dead letter', id, 'deadLetterId');
    return { ...deadLetter, ageMs: Math.max(0, this.#clock.now() - deadLetter.createdAt) };
  }

  /**
   * Acknowledges or discards one open dead letter with `{note, by}`.
   * @throws ValidationError naming `note`, `by` or an unknown field; NotFoundError (`deadLetterId`);
   *   ConflictError when it was replayed or discarded already.
   */
  async triage(id: string, state: OperatorTriageState, input: unknown): Promise<DeadLetterView> {
    const { note, by } = validateTriageInput(input);
    const [skipped] = (await this.#store.triageDeadLetters({ ids: [id], state, note, by }, this.#clock.now())).skipped;
    if (skipped?.reason === 'unknown') throw new NotFoundError('dead letter', id, 'deadLetterId');
    if (skipped !== undefined) {
      throw new ConflictError(`deadLetterId: '${id}' was ${skipped.reason} already; only a new or acknowledged dead letter can be acknowledged or discarded`);
    }
    return this.get(id);
  }

  /** The same for `{ids, note, by}`: the open ones are set, the others (unknown, replayed, discarded) skipped with why. */
  async triageMany(state: OperatorTriageState, input: unknown): Promise<TriageOutcome> {
    const { ids, note, by } = validateBulkTriageInput(input);
    return this.#store.triageDeadLetters({ ids, state, note, by }, this.#clock.now());
  }

  /** Replays one dead letter: same event id, a new round of attempts. @throws NotFoundError; ConflictError when replayed already. */
  async replay(id: string): Promise<void> {
    const deadLetter = await this.get(id);
    const replayed = deadLetter.replayedAt === null ? await this.#store.replayDeadLetters({ ids: [id] }, this.#clock.now()) : [];
    // Checked on what the store did, so two replays racing each other cannot both succeed.
    if (replayed.length === 0) throw new ConflictError(`deadLetterId: '${id}' was replayed already`);
    this.#signal();
  }

  /** Replays every dead letter not yet replayed that matches the filter; returns their ids. */
  async replayMany(filter: DeadLetterFilter): Promise<string[]> {
    const ids = await this.#store.replayDeadLetters(filter, this.#clock.now());
    this.#signal();
    return ids;
  }

  /** How many dead letters `replayMany(filter)` would replay now; changes nothing (a dry run). */
  async countReplayable(filter: DeadLetterFilter): Promise<number> {
    return this.#store.countReplayableDeadLetters(filter);
  }

  /** The failing deliveries (retrying, dead) grouped by endpoint and failure kind, the largest first. */
  async failureGroups(filter: FailureGroupFilter = {}): Promise<FailureGroup[]> {
    return this.#store.failureGroups(filter);
  }

  /**
   * Replays a group, `{endpointId, kind}`: its retrying deliveries become due now and its open
   * dead letters are replayed. Returns how many of each.
   * @throws ValidationError naming the field and rule.
   */
  async replayFailureGroup(input: unknown): Promise<FailureGroupReplay> {
    const group = validateFailureGroupInput(input);
    const replayed = await this.#store.replayFailureGroup(group, this.#clock.now());
    this.#signal();
    return replayed;
  }
}
