/**
 * Dead letters (`/v1/dead-letters`): a filtered listing, paged by cursor,
 * one dead letter, its replay (one, or in bulk by ids or by filter) and its
 * triage (acknowledge or discard; one, or in bulk). A tenant token may list,
 * read and replay its own tenant's one at a time; the bulk operations and
 * triage are the admin's.
 */
import { ErrorCode, isHeraldError, ValidationError } from '../../errors.ts';
import type { Herald } from '../../herald.ts';
import { TriageState } from '../../model.ts';
import { DEFAULT_PAGE, lookAhead, pageOf } from '../listing-page.ts';
import { deadLetterFilter } from '../query.ts';
import { replayIds, replayRequest } from '../replay-body.ts';
import type { Router } from '../router.ts';
import { OWN_DEAD_LETTER, TENANT_LISTING } from './tenant-rules.ts';

export type DeadLettersHerald = Pick<
  Herald,
  | 'listDeadLetters'
  | 'getDeadLetter'
  | 'countReplayableDeadLetters'
  | 'replayDeadLetters'
  | 'replayDeadLetter'
  | 'triageDeadLetters'
  | 'triageDeadLetter'
>;

export function deadLetterRoutes(router: Router, h: DeadLettersHerald): void {
  // Paged like the delivery log: `cursor` is the previous page's `nextCursor`.
  router.route('GET', '/v1/dead-letters', async ({ query }) => {
    const filter = deadLetterFilter(query);
    const limit = filter.limit ?? DEFAULT_PAGE;
    return { status: 200, json: pageOf(await h.listDeadLetters({ ...filter, limit: lookAhead(limit) }), limit) };
  }, TENANT_LISTING);
  router.route('GET', '/v1/dead-letters/:id', async ({ params }) => ({ status: 200, json: await h.getDeadLetter(params.id ?? '') }), OWN_DEAD_LETTER);

  router.route('POST', '/v1/dead-letters/replay', async ({ body }) => {
    const input = await body();
    const ids = replayIds(input);
    if (ids === undefined) {
      const { dryRun, filter, chunkSize } = replayRequest(input);
      if (chunkSize !== undefined) throw new ValidationError('chunkSize', 'belongs to POST /v1/replays (a paced replay job)');
      if (dryRun) return { status: 200, json: { dryRun: true, wouldReplay: await h.countReplayableDeadLetters(filter) } };
      const replayed = await h.replayDeadLetters(filter);
      return { status: 202, json: { replayed: replayed.length, ids: replayed, skipped: [] } };
    }
    // By id: each one replayed on its own; one already replayed or unknown is skipped, not fatal.
    const replayed: string[] = [];
    const skipped: string[] = [];
    for (const id of ids) {
      try {
        await h.replayDeadLetter(id);
        replayed.push(id);
      } catch (error) {
        if (!isHeraldError(error) || (error.code !== ErrorCode.CONFLICT && error.code !== ErrorCode.NOT_FOUND)) throw error;
        skipped.push(id);
      }
    }
    return { status: 202, json: { replayed: replayed.length, ids: replayed, skipped } };
  });
  router.route('POST', '/v1/dead-letters/:id/replay', async ({ params }) => {
    await h.replayDeadLetter(params.id ?? '');
    return { status: 202, json: { replayed: 1, ids: [params.id] } };
  }, OWN_DEAD_LETTER);

  // Triage: acknowledge (looked at, still open) or discard (closed), with {note, by}; one, or {ids} in bulk.
  for (const [action, state] of [['acknowledge', TriageState.ACKNOWLEDGED], ['discard', TriageState.DISCARDED]] as const) {
    router.route('POST', `/v1/dead-letters/${action}`, async ({ body }) => {
      const outcome = await h.triageDeadLetters(state, await body());
      return { status: 200, json: { state, updated: outcome.applied.length, ids: outcome.applied, skipped: outcome.skipped } };
    });
    router.route('POST', `/v1/dead-letters/:id/${action}`, async ({ params, body }) => ({
      status: 200,
      json: await h.triageDeadLetter(params.id ?? '', state, await body()),
    }));
  }
}
