/**
 * An endpoint with a patch applied, as the SQL stores write it back: the
 * fields the patch gives replace the current ones (undefined ones are left
 * alone), the id and tenant never change, a `rateLimit` of `null` lifts
 * the limit (the endpoint then has none, as one created without), and an
 * `adaptiveConcurrency` of `null` makes the concurrency fixed, a `filter` of
 * `null` removes the payload filter, `headers` or `auth` of `null` removes them.
 * A patch with `expectedSecrets` applies only while the stored secrets are those,
 * with `expectedCredentials` only while the stored headers and auth are those.
 * One with `expectedClientTlsKey` applies only while the stored client key is
 * that (`null`: none); a `clientTls` of `null` removes the certificate.
 */
import { isDeepStrictEqual } from 'node:util';
import { ConflictError } from '../errors.ts';
import type { Endpoint } from '../model.ts';
import type { EndpointPatch } from './port.ts';

/** @throws ConflictError when `patch.expectedSecrets` no longer match the stored secrets (nothing is to be written). */
export function patchedEndpoint(current: Endpoint, patch: EndpointPatch, now: number): Endpoint {
  const { expectedSecrets, expectedCredentials, expectedClientTlsKey, ...fields } = patch;
  if (expectedSecrets !== undefined && !sameSecrets(current, expectedSecrets)) throw secretsChanged(current.id);
  if (expectedCredentials !== undefined && !sameCredentials(current, expectedCredentials)) throw secretsChanged(current.id);
  if (expectedClientTlsKey !== undefined && (current.clientTls?.key ?? null) !== expectedClientTlsKey) throw secretsChanged(current.id);
  const changes = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
  const {
    rateLimit,
    adaptiveConcurrency,
    filter,
    headers,
    auth,
    clientTls,
    ...next
  }: Endpoint & {
    rateLimit?: Endpoint['rateLimit'] | null;
    adaptiveConcurrency?: Endpoint['adaptiveConcurrency'] | null;
    filter?: Endpoint['filter'] | null;
    headers?: Endpoint['headers'] | null;
    auth?: Endpoint['auth'] | null;
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
    ...(filter == null ? {} : { filter }),
    ...(headers == null ? {} : { headers }),
    ...(auth == null ? {} : { auth }),
    ...(clientTls == null ? {} : { clientTls }),
  };
}

/** Whether the endpoint's headers and auth are `expected` (`null`: none), whatever the order of their keys. */
export function sameCredentials(endpoint: Endpoint, expected: NonNullable<EndpointPatch['expectedCredentials']>): boolean {
  return isDeepStrictEqual(endpoint.headers ?? null, expected.headers) && isDeepStrictEqual(endpoint.auth ?? null, expected.auth);
}

export function sameSecrets(endpoint: Endpoint, expected: readonly string[]): boolean {
  return endpoint.secrets.length === expected.length && endpoint.secrets.every((s, i) => s.secret === expected[i]);
}

export function secretsChanged(endpointId: string): ConflictError {
  return new ConflictError(`endpointId: the secrets of '${endpointId}' changed meanwhile (another rotation or re-encryption); read it again and retry`);
}
