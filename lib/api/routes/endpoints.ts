/**
 * Endpoints (`/v1/endpoints`): create, list, read, update, delete, enable and
 * disable, the deliveries numbered after a sequence (gap detection), a
 * payload filter tried on an event, and a test event. A tenant token may use them on its own endpoints.
 */
import { sequencePageRequest } from '../../endpoints/sequence-page.ts';
import type { Herald } from '../../herald.ts';
import { newEndpointBody } from '../../tenants/caller-scope.ts';
import type { Router } from '../router.ts';
import { OWN_ENDPOINT, TENANT_LISTING } from './tenant-rules.ts';

export type EndpointsHerald = Pick<
  Herald,
  | 'createEndpoint'
  | 'listEndpoints'
  | 'getEndpoint'
  | 'updateEndpoint'
  | 'deleteEndpoint'
  | 'enableEndpoint'
  | 'disableEndpoint'
  | 'listEndpointEvents'
  | 'sendTestEvent'
  | 'testEndpointFilter'
>;

export function endpointRoutes(router: Router, h: EndpointsHerald): void {
  router.route('POST', '/v1/endpoints', async ({ caller, body }) => {
    const created = await h.createEndpoint(newEndpointBody(caller, await body()));
    return { status: 201, json: { ...created.endpoint, secret: created.secret } };
  }, { tenant: {} });
  router.route('GET', '/v1/endpoints', async ({ query }) => {
    const tenantId = query.get('tenantId') ?? undefined;
    return { status: 200, json: { data: await h.listEndpoints(tenantId === undefined ? {} : { tenantId }) } };
  }, TENANT_LISTING);
  router.route('GET', '/v1/endpoints/:id', async ({ params }) => ({ status: 200, json: await h.getEndpoint(params.id ?? '') }), OWN_ENDPOINT);
  router.route('PATCH', '/v1/endpoints/:id', async ({ params, body }) => ({
    status: 200,
    json: await h.updateEndpoint(params.id ?? '', await body()),
  }), OWN_ENDPOINT);
  router.route('DELETE', '/v1/endpoints/:id', async ({ params }) => {
    await h.deleteEndpoint(params.id ?? '');
    return { status: 204 };
  }, OWN_ENDPOINT);
  router.route('POST', '/v1/endpoints/:id/enable', async ({ params }) => ({ status: 200, json: await h.enableEndpoint(params.id ?? '') }), OWN_ENDPOINT);
  router.route('POST', '/v1/endpoints/:id/disable', async ({ params }) => ({ status: 200, json: await h.disableEndpoint(params.id ?? '') }), OWN_ENDPOINT);
  // Gap detection: the endpoint's deliveries numbered after `after` (webhook-sequence), in order.
  router.route('GET', '/v1/endpoints/:id/events', async ({ params, query }) => ({
    status: 200,
    json: await h.listEndpointEvents(params.id ?? '', sequencePageRequest(query.get('after'), query.get('limit'))),
  }), OWN_ENDPOINT);
  // Would this event reach the endpoint? Its event types and payload filter (or a `filter` to try), publishing nothing.
  router.route('POST', '/v1/endpoints/:id/filter-test', async ({ params, body }) => ({
    status: 200,
    json: await h.testEndpointFilter(params.id ?? '', await body()),
  }), OWN_ENDPOINT);
  router.route('POST', '/v1/endpoints/:id/test', async ({ params }) => {
    const sent = await h.sendTestEvent(params.id ?? '');
    return { status: 202, json: { ...sent.event, payload: JSON.parse(sent.event.payload) as unknown, deliveryId: sent.deliveryId } };
  }, OWN_ENDPOINT);
}
