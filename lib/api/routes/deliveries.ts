/**
 * The delivery log (`/v1/deliveries`): a filtered listing, paged by cursor,
 * one delivery with its payload, and its attempts. A tenant token may read
 * its own tenant's.
 */
import type { Herald } from '../../herald.ts';
import { DEFAULT_PAGE, lookAhead, pageOf } from '../listing-page.ts';
import { deliveryFilter } from '../query.ts';
import type { Router } from '../router.ts';
import { OWN_DELIVERY, TENANT_LISTING } from './tenant-rules.ts';

export function deliveryRoutes(router: Router, h: Pick<Herald, 'listDeliveries' | 'getDeliveryWithPayload' | 'listAttempts'>): void {
  router.route('GET', '/v1/deliveries', async ({ query }) => {
    const filter = deliveryFilter(query);
    const limit = filter.limit ?? DEFAULT_PAGE;
    return { status: 200, json: pageOf(await h.listDeliveries({ ...filter, limit: lookAhead(limit) }), limit) };
  }, TENANT_LISTING);
  router.route('GET', '/v1/deliveries/:id', async ({ params }) => {
    const { payload, ...delivery } = await h.getDeliveryWithPayload(params.id ?? '');
    return { status: 200, json: { ...delivery, payload: payload === null ? null : (JSON.parse(payload) as unknown) } };
  }, OWN_DELIVERY);
  router.route('GET', '/v1/deliveries/:id/attempts', async ({ params }) => ({
    status: 200,
    json: { data: await h.listAttempts(params.id ?? '') },
  }), OWN_DELIVERY);
}
