/**
 * The triage of dead letters: which states a listing, a replay and an
 * operator's decision apply to. Pure rules, shared by every store.
 *
 *   new ──acknowledge──► acknowledged ──acknowledge──► acknowledged (the note replaced)
 *    │                        │
 *    ├──discard───────────────┴──discard──► discarded ──replay by id──► replayed
 *    └──replay (by id or filter)──────────────────────────────────────► replayed
 *   acknowledged ──replay (by id or filter)──► replayed
 *
 * `replayed` is final: the delivery is live again, and a round that dies
 * again gets a new dead letter (`new`). `discarded` is closed: no replay by
 * filter takes it, and it cannot be acknowledged or discarded again; only a
 * replay naming it by id (an explicit decision) brings it back.
 */
import { TriageState } from '../model.ts';

/** Still in the queue: what acknowledging, discarding and a replay by filter apply to. */
export const OPEN_TRIAGE_STATES: readonly TriageState[] = Object.freeze([TriageState.NEW, TriageState.ACKNOWLEDGED]);

export const TRIAGE_STATES: readonly TriageState[] = Object.freeze(Object.values(TriageState));

/** What an operator can set by hand. */
export type OperatorTriageState = typeof TriageState.ACKNOWLEDGED | typeof TriageState.DISCARDED;

export function isTriageState(value: unknown): value is TriageState {
  return typeof value === 'string' && (TRIAGE_STATES as readonly string[]).includes(value);
}

/** True when a dead letter in state `from` may be acknowledged or discarded. */
export function canTriage(from: TriageState): boolean {
  return OPEN_TRIAGE_STATES.includes(from);
}

/**
 * The states a listing covers: the one asked for; else every state with
 * `includeReplayed`; else the open ones (the queue).
 */
export function listedStates(filter: { readonly state?: TriageState; readonly includeReplayed?: boolean }): readonly TriageState[] {
  if (filter.state !== undefined) return [filter.state];
  return filter.includeReplayed === true ? TRIAGE_STATES : OPEN_TRIAGE_STATES;
}

/** The states a replay by filter takes: open ones only (the filter's `state` can narrow them, never widen). */
export function replayableStates(filter: { readonly state?: TriageState }): readonly TriageState[] {
  return filter.state === undefined ? OPEN_TRIAGE_STATES : OPEN_TRIAGE_STATES.filter((state) => state === filter.state);
}

/** Why an id of an operator's decision was not applied: it does not exist, or its state is closed. */
export type TriageSkipReason = 'unknown' | typeof TriageState.REPLAYED | typeof TriageState.DISCARDED;

/** What an operator's decision did, id by id, in the order given (each id once). */
export interface TriageOutcome {
  readonly applied: readonly string[];
  readonly skipped: ReadonlyArray<{ readonly id: string; readonly reason: TriageSkipReason }>;
}

/**
 * The outcome of a decision over `ids`, from the state each one had when the store changed it
 * (`found`, read under the same lock or transaction as the write): open ones were set, the rest skipped.
 */
export function triageOutcome(ids: readonly string[], found: ReadonlyMap<string, TriageState>): TriageOutcome {
  const applied: string[] = [];
  const skipped: Array<{ id: string; reason: TriageSkipReason }> = [];
  for (const id of new Set(ids)) {
    const state = found.get(id);
    if (state !== undefined && canTriage(state)) applied.push(id);
    else skipped.push({ id, reason: state === undefined ? 'unknown' : (state as TriageSkipReason) });
  }
  return { applied, skipped };
}
