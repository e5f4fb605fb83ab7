/**
 * An endpoint with a patch applied, as the SQL stores write it back: the
 * fields the patch gives replace the current ones (undefined ones are left
 * alone), the id and tenant never change, a `rateLimit` of `null` lifts
 * the limit (the endpoint then has none, as one created without), and an
 * `adaptiveConcurrency` of `null` makes the concurrency fixed.
 */
import type { Endpoint } from '../model.ts';
import type { EndpointPatch } from './port.ts';

export function patchedEndpoint(current: Endpoint, patch: EndpointPatch, now: number): Endpoint {
  const changes = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== undefined));
  const {
    rateLimit,
    adaptiveConcurrency,
    ...next
  }: Endpoint & { rateLimit?: Endpoint['rateLimit'] | null; adaptiveConcurrency?: Endpoint['adaptiveConcurrency'] | null } = {
    ...current,
    ...changes,
    id: current.id,
    tenantId: current.tenantId,
    updatedAt: now,
  };
  return {
    ...next,
    ...(rateLimit == null ? {} : { rateLimit }),
    ...(adaptiveConcurrency == null ? {} : { adaptiveConcurrency }),
  };
}
