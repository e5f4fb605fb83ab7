/**
 * Purging in chunks, as every store does it: a chunk per step until a step finds fewer rows than
 * a chunk, so a large purge never holds a lock (SQLite's write lock, PostgreSQL's row locks) or a
 * transaction (MongoDB's) for long. A store gives the step that deletes one chunk.
 */
import type { PurgeResult } from './port.ts';

/**
 * What one chunk did: the rows it looked at and those it removed. A number is both, for a chunk
 * that removes every row it finds; a chunk that keeps some (MongoDB's events an unfinished
 * delivery still needs) tells them apart, and the purge goes on while chunks come back full.
 */
export type PurgedChunk = number | { readonly examined: number; readonly removed: number };

/** Runs `chunk` until one examines fewer than `chunkSize` rows; answers how many were removed in all. */
export async function purgeInChunks(chunkSize: number, chunk: () => Promise<PurgedChunk>): Promise<number> {
  let total = 0;
  for (;;) {
    const done = await chunk();
    const { examined, removed } = typeof done === 'number' ? { examined: done, removed: done } : done;
    total += removed;
    if (examined < chunkSize) return total;
  }
}

/** What `purge` deletes; each step deletes all of its kind older than the horizon and answers how many. */
export interface PurgeSteps {
  attempts(): Promise<number>;
  deadLetters(): Promise<number>;
  events(): Promise<number>;
  replayJobs(): Promise<number>;
  endpointChanges(): Promise<number>;
}

/**
 * `purge`: attempts, dead letters, events, replay jobs, then the endpoint change log, each to the
 * end before the next. Dead letters go before events: an event an unreplayed dead letter needs is
 * kept, so the events step frees those whose dead letters are gone.
 */
export async function purgeInOrder(steps: PurgeSteps): Promise<PurgeResult> {
  const attempts = await steps.attempts();
  const deadLetters = await steps.deadLetters();
  const events = await steps.events();
  const replayJobs = await steps.replayJobs();
  await steps.endpointChanges();
  return { attempts, deadLetters, events, replayJobs };
}
