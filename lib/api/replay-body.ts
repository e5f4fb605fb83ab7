/**
 * The bodies of the bulk replays (`POST /v1/dead-letters/replay`, `POST
 * /v1/replays`): a list of dead-letter ids, or a filter with `dryRun` and
 * (for a paced replay job) `chunkSize`.
 */
import { ValidationError } from '../errors.ts';
import type { DeadLetterFilter } from '../store/port.ts';
import { optionalString, timeRange } from './query.ts';

/** Dead letters replayed by id in one bulk request, at most. */
const MAX_REPLAY_IDS = 1_000;

/** `{ids: [...]}` of a bulk replay by id, or undefined when the body is a filter. */
export function replayIds(body: unknown): string[] | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || !Object.hasOwn(body, 'ids')) return undefined;
  const { ids, ...rest } = body as { ids: unknown };
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) throw new ValidationError(extra, 'cannot be combined with ids');
  if (!Array.isArray(ids) || ids.length < 1 || ids.length > MAX_REPLAY_IDS || !ids.every((id) => typeof id === 'string' && id !== '')) {
    throw new ValidationError('ids', `must be a list of 1 to ${MAX_REPLAY_IDS} dead-letter ids`);
  }
  return ids as string[];
}

/**
 * A bulk replay's body: the filter `{endpointId?, tenantId?, since?, until?}` (at least one of
 * them), `dryRun: true` to count the matches instead of replaying them, and (for a replay job)
 * `chunkSize`, checked by the job.
 */
export function replayRequest(body: unknown): { dryRun: boolean; filter: DeadLetterFilter; chunkSize?: number } {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return { dryRun: false, filter: replayFilter(body) };
  const { dryRun = false, chunkSize, ...filter } = body as { dryRun?: unknown; chunkSize?: unknown };
  if (typeof dryRun !== 'boolean') throw new ValidationError('dryRun', `must be true or false (got ${JSON.stringify(dryRun)})`);
  if (chunkSize !== undefined && typeof chunkSize !== 'number') throw new ValidationError('chunkSize', `must be a number (got ${JSON.stringify(chunkSize)})`);
  return { dryRun, filter: replayFilter(filter), ...(chunkSize === undefined ? {} : { chunkSize }) };
}

function replayFilter(body: unknown): DeadLetterFilter {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new ValidationError('body', 'must be a JSON object');
  const allowed = ['endpointId', 'tenantId', 'since', 'until'];
  const record = body as Record<string, unknown>;
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(record)) {
    if (!allowed.includes(key)) throw new ValidationError(key, `is not a known filter (allowed: ${allowed.join(', ')})`);
    if (typeof value !== 'string' && typeof value !== 'number') throw new ValidationError(key, 'must be a string');
    params.set(key, String(value));
  }
  if ([...params.keys()].length === 0) {
    throw new ValidationError('body', 'must name at least one of endpointId, tenantId, since, until (use since=1970-01-01T00:00:00Z to replay everything)');
  }
  return { ...optionalString(params, 'endpointId'), ...optionalString(params, 'tenantId'), ...timeRange(params) };
}
