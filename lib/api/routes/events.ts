/**
 * Publishing (`POST /v1/events`): one event or a list of them, the admin's
 * only. Each payload is kept as the text the producer sent, so it is stored,
 * signed and delivered byte for byte.
 */
import type { Herald } from '../../herald.ts';
import { parseEventsBody } from '../../producer/json-text.ts';
import type { Router } from '../router.ts';

export function eventRoutes(router: Router, h: Pick<Herald, 'publish'>): void {
  router.route('POST', '/v1/events', async ({ text }) => {
    const input = parseEventsBody(await text());
    const events = await h.publish(input);
    const view = events.map((e) => ({ ...e, payload: JSON.parse(e.payload) as unknown }));
    return { status: 202, json: Array.isArray(input) ? { data: view } : view[0] };
  });
}
