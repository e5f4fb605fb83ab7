/**
 * Replaying dead letters a chunk at a time, as every store does it: by ids, a chunk of the ids
 * given per step; by filter, every match, a page per step in keyset order (oldest first).
 * A store gives the step that replays one chunk, in its own terms: SQLite a transaction per
 * chunk so other processes get the write lock in between, PostgreSQL a statement per chunk,
 * MongoDB a transaction per chunk.
 *
 * Keyset pagination, not "the next unreplayed ones": a dead letter a replay skips (its endpoint
 * was deleted) stays unreplayed, and would be read again forever.
 */
import type { FailureGroupKey, FailureGroupReplay } from './failure-groups.ts';
import type { DeadLetterFilter } from './port.ts';

/** What `replayDeadLetters` replays: the dead letters named, or every open one matching a filter. */
export type ReplaySelection = { readonly ids: readonly string[] } | DeadLetterFilter;

/** A page read by a replay by filter, and the ids of those of it that were replayed. */
export interface ReplayedPage<Row> {
  readonly page: readonly Row[];
  readonly replayed: readonly string[];
}

/** One store's steps of a chunked replay; `Key` is its keyset position among the dead letters. */
export interface ReplayChunkSteps<Row, Key> {
  /** Dead letters per step: at most this many ids per `replayIds`, at most this many rows per page. */
  readonly chunkSize: number;
  /** Replays those of `ids` (at most `chunkSize`) not yet replayed; answers the ids replayed, oldest first. */
  replayIds(ids: readonly string[]): Promise<readonly string[]>;
  /**
   * Reads the next `chunkSize` open dead letters matching `filter` after `after`, oldest first,
   * and replays them. Whether the read and the replay share a transaction is the store's choice:
   * the replay checks again that each is still unreplayed and its delivery dead.
   */
  replayPage(filter: DeadLetterFilter, after: Key): Promise<ReplayedPage<Row>>;
  /** The position before the first dead letter. */
  readonly start: Key;
  /** A row's position, where the next page starts. */
  keyOf(row: Row): Key;
}

/**
 * Replays `selection` a chunk per step: the ids in the order given, `chunkSize` at a time; a
 * filter's matches page by page until a page comes back short. Answers the ids replayed, in the
 * order they were. A step that fails fails the replay; the chunks before it stay replayed.
 */
export async function replayInChunks<Row, Key>(selection: ReplaySelection, steps: ReplayChunkSteps<Row, Key>): Promise<string[]> {
  const replayed: string[] = [];
  if ('ids' in selection) {
    for (let i = 0; i < selection.ids.length; i += steps.chunkSize) {
      replayed.push(...(await steps.replayIds(selection.ids.slice(i, i + steps.chunkSize))));
    }
    return replayed;
  }
  const filter = selection;
  await walkPages(steps.start, steps.chunkSize, steps.keyOf, async (after) => {
    const step = await steps.replayPage(filter, after);
    replayed.push(...step.replayed);
    return step.page;
  });
  return replayed;
}

/**
 * Walks a keyset-paginated read: `page(after)` from `start`, each next page after the last row
 * of the one before, until a page has fewer than `chunkSize` rows.
 */
export async function walkPages<Row, Key>(
  start: Key,
  chunkSize: number,
  keyOf: (row: Row) => Key,
  page: (after: Key) => Promise<readonly Row[]>,
): Promise<void> {
  let after = start;
  for (;;) {
    const rows = await page(after);
    const last = rows.at(-1);
    if (rows.length < chunkSize || last === undefined) return;
    after = keyOf(last);
  }
}

/**
 * `replayFailureGroup`: the group's retrying deliveries made due first (`resumeRetrying`, one
 * write), then its open dead letters replayed by filter (`replayDeadLetters`, in chunks).
 */
export async function replayFailureGroupInChunks(
  group: FailureGroupKey,
  resumeRetrying: () => Promise<number>,
  replayDeadLetters: (filter: DeadLetterFilter) => Promise<readonly string[]>,
): Promise<FailureGroupReplay> {
  const retrying = await resumeRetrying();
  const replayed = await replayDeadLetters({ endpointId: group.endpointId, failureKind: group.kind });
  return { deadLetters: replayed.length, retrying };
}
