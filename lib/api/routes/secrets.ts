/**
 * An endpoint's signing secret (`POST /v1/endpoints/:id/rotate-secret`, optional body
 * `{ "signatureScheme": "hmac-sha256" | "ed25519" }`): a new one, in the answer once (an ed25519
 * key's `whpk_` public key instead); the previous one keeps signing for `signing.rotationOverlapMs`.
 */
import type { Herald } from '../../herald.ts';
import type { Router } from '../router.ts';
import { OWN_ENDPOINT } from './tenant-rules.ts';

export function secretRoutes(router: Router, h: Pick<Herald, 'rotateSecret'>): void {
  router.route('POST', '/v1/endpoints/:id/rotate-secret', async ({ params, optionalBody }) => {
    const rotated = await h.rotateSecret(params.id ?? '', await optionalBody());
    return { status: 200, json: { ...rotated.endpoint, secret: rotated.secret } };
  }, OWN_ENDPOINT);
}
