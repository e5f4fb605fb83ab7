/**
 * An endpoint's signing secret (`POST /v1/endpoints/:id/rotate-secret`): a
 * new one, in the answer once; the previous one keeps signing for
 * `signing.rotationOverlapMs`.
 */
import type { Herald } from '../../herald.ts';
import type { Router } from '../router.ts';
import { OWN_ENDPOINT } from './tenant-rules.ts';

export function secretRoutes(router: Router, h: Pick<Herald, 'rotateSecret'>): void {
  router.route('POST', '/v1/endpoints/:id/rotate-secret', async ({ params }) => {
    const rotated = await h.rotateSecret(params.id ?? '');
    return { status: 200, json: { ...rotated.endpoint, secret: rotated.secret } };
  }, OWN_ENDPOINT);
}
