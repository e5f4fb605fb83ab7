/**
 * Validation of a failure group's replay (`POST /v1/failures/replay`, `Herald.replayFailureGroup`):
 * `{endpointId, kind}`, nothing else. Every error names the field and the rule it broke. Pure.
 */
import { ValidationError } from '../errors.ts';
import { isFailureKind } from '../policy/failure-kind.ts';
import type { FailureGroupKey } from '../store/failure-groups.ts';

/** The kinds, as an error tells them. */
export const FAILURE_KIND_RULE = 'must be a failure kind: http-<status> (e.g. http-503), timeout, dns, tls, refused, reset, network, blocked, redirect or unknown';

export function validateFailureGroupInput(input: unknown): FailureGroupKey {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) {
    throw new ValidationError('body', `must be a JSON object with endpointId and kind (got ${describe(input)})`);
  }
  const body = input as Record<string, unknown>;
  for (const key of Object.keys(body)) {
    if (key !== 'endpointId' && key !== 'kind') throw new ValidationError(key, 'is not a known field (allowed: endpointId, kind)');
  }
  const { endpointId, kind } = body;
  if (typeof endpointId !== 'string' || endpointId.trim() === '') {
    throw new ValidationError('endpointId', `must be an endpoint id, a non-empty string (got ${describe(endpointId)})`);
  }
  if (!isFailureKind(kind)) throw new ValidationError('kind', `${FAILURE_KIND_RULE} (got ${describe(kind)})`);
  return { endpointId, kind };
}

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return `a list of ${value.length}`;
  return value === null ? 'null' : typeof value === 'object' ? 'an object' : JSON.stringify(value);
}
