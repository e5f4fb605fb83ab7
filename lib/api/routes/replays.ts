/**
 * Paced bulk replays of dead letters (`/v1/replays`, run by
 * `dead-letters/replay-jobs.ts`): a dry run counts the matches, otherwise a
 * job starts; list, read, cancel. The admin's only.
 */
import type { Herald } from '../../herald.ts';
import { replayRequest } from '../replay-body.ts';
import type { Router } from '../router.ts';

export function replayRoutes(router: Router, h: Pick<Herald, 'countReplayableDeadLetters' | 'startReplay' | 'listReplays' | 'getReplay' | 'cancelReplay'>): void {
  router.route('POST', '/v1/replays', async ({ body }) => {
    const { dryRun, filter, chunkSize } = replayRequest(await body());
    if (dryRun) return { status: 200, json: { dryRun: true, wouldReplay: await h.countReplayableDeadLetters(filter) } };
    return { status: 202, json: await h.startReplay(filter, chunkSize === undefined ? {} : { chunkSize }) };
  });
  router.route('GET', '/v1/replays', async () => ({ status: 200, json: { data: await h.listReplays() } }));
  router.route('GET', '/v1/replays/:id', async ({ params }) => ({ status: 200, json: await h.getReplay(params.id ?? '') }));
  router.route('DELETE', '/v1/replays/:id', async ({ params }) => ({ status: 200, json: await h.cancelReplay(params.id ?? '') }));
}
