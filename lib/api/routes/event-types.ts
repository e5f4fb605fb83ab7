/**
 * The event-type catalog (`/v1/event-types`): create, list, read, change, delete. The catalog is
 * global to the installation: only the admin writes it; a tenant token may read it (the portal
 * lists the types a tenant can subscribe to).
 */
import type { Herald } from '../../herald.ts';
import type { Router } from '../router.ts';

/** Anyone with a token reads the catalog: nothing in it is a tenant's own. */
const ANY_TENANT = { tenant: {} } as const;

export function eventTypeRoutes(router: Router, h: Pick<Herald, 'eventTypes'>): void {
  router.route('POST', '/v1/event-types', async ({ body }) => ({ status: 201, json: await h.eventTypes.create(await body()) }));
  router.route('GET', '/v1/event-types', async () => ({ status: 200, json: { data: await h.eventTypes.list() } }), ANY_TENANT);
  router.route('GET', '/v1/event-types/:name', async ({ params }) => ({ status: 200, json: await h.eventTypes.get(params.name ?? '') }), ANY_TENANT);
  router.route('PATCH', '/v1/event-types/:name', async ({ params, body }) => ({
    status: 200,
    json: await h.eventTypes.update(params.name ?? '', await body()),
  }));
  router.route('DELETE', '/v1/event-types/:name', async ({ params }) => {
    await h.eventTypes.delete(params.name ?? '');
    return { status: 204 };
  });
}
