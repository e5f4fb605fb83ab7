/**
 * An endpoint with a patch applied, as the SQL stores write it back: the
 * fields the patch gives replace the current ones (undefined ones are left
 * alone), the id and tenant never change, a `rateLimit` of `null` lifts
 * the limit (the endpoint then has none, as one created without), and an
 * `adaptiveConcurrency` of `null` makes the concurrency fixed. A patch
 * with `expectedSecrets` applies only while the stored secrets are those,
 * and one with `expectedClientTlsKey` only while the stored client key is
 * that (`null`: none); a `clientTls` of `null` removes the certificate.
 */
import { ConflictError } from '../errors.ts';
import type { Endpoint } from '../model.ts';
import type { EndpointPatch } from './port.ts';

/** @throws ConflictError when `patch.expectedSecrets` no longer match the stored secrets (nothing is to be written). */
export function patchedEndpoint(current: Endpoint, patch: EndpointPatch, now: number): Endpoint {
  const { expectedSecrets, expectedClientTlsKey, ...fields } = patch;
  if (expectedSecrets !== undefined && !sameSecrets(current, expectedSecrets)) throw secretsChanged(current.id);
  if (expectedClientTlsKey !== undefined && (current.clientTls?.key ?? null) !== expectedClientTlsKey) throw secretsChanged(current.id);
  const changes = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
  const {
    rateLimit,
    adaptiveConcurrency,
    clientTls,
    ...next
  }: Endpoint & {
    rateLimit?: Endpoint['rateLimit'] | null;
    adaptiveConcurrency?: Endpoint['adaptiveConcurrency'] | null;
    clientTls?: Endpoint['clientTls'] | null;
  } = {
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
    ...(clientTls == null ? {} : { clientTls }),
  };
}

export function sameSecrets(endpoint: Endpoint, expected: readonly string[]): boolean {
  return endpoint.secrets.length === expected.length && endpoint.secrets.every((s, i) => s.secret === expected[i]);
}

export function secretsChanged(endpointId: string): ConflictError {
  return new ConflictError(`endpointId: the secrets of '${endpointId}' changed meanwhile (another rotation or re-encryption); read it again and retry`);
}
