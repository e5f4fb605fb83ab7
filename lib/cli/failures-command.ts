/**
 * `herald failures` and `herald failures replay`: the failing deliveries grouped by endpoint and
 * failure kind (`GET /v1/failures`), one line a group, and a group's replay
 * (`POST /v1/failures/replay {endpointId, kind}`): its retrying deliveries go out now and its open
 * dead letters are replayed.
 */
import { AdminClient } from './admin-client.ts';
import { connectionOf, parseCommand, parseInteger, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { table, time } from './table.ts';
import { FAILURES_USAGE } from './usage.ts';

interface FailureGroup {
  readonly endpointId: string;
  readonly tenantId: string;
  readonly kind: string;
  readonly count: { readonly retrying: number; readonly dead: number; readonly total: number };
  readonly firstSeen: number;
  readonly lastSeen: number;
  readonly sample: { readonly summary: string; readonly status: number | null; readonly body: string | null } | null;
}

interface ReplayAnswer {
  readonly deadLetters: number;
  readonly retrying: number;
}

const OPTIONS = {
  endpoint: { type: 'string' },
  tenant: { type: 'string' },
  kind: { type: 'string' },
  limit: { type: 'string' },
} as const;

/** How much of a sample body a table cell shows. */
const SAMPLE_BODY_CHARS = 40;

export async function runFailures(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, OPTIONS);
  if (values.help === true) {
    io.stdout.write(`${FAILURES_USAGE}\n`);
    return 0;
  }
  const [action, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  if (action !== undefined && action !== 'replay') throw new UsageError(`failures: unknown action '${action}' (only replay)`);
  if (action === 'replay') {
    if (values.endpoint === undefined || values.kind === undefined) throw new UsageError('failures replay: --endpoint and --kind are required');
    if (values.tenant !== undefined || values.limit !== undefined) throw new UsageError('failures replay: --tenant and --limit belong to the listing');
  } else if (values.kind !== undefined) {
    throw new UsageError('failures: --kind belongs to failures replay');
  }
  const limit = values.limit === undefined ? undefined : parseInteger('limit', values.limit, 1, 1_000);
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    if (action === 'replay') {
      const answer = await client.post<ReplayAnswer>('/v1/failures/replay', { endpointId: values.endpoint, kind: values.kind });
      if (values.json === true) writeJson(io, answer);
      else io.stdout.write(`Replayed ${values.kind} on ${values.endpoint}: ${answer.deadLetters} dead letter(s) replayed, ${answer.retrying} retrying delivery(ies) due now.\n`);
      return 0;
    }
    const { data } = await client.get<{ data: FailureGroup[] }>('/v1/failures', { endpointId: values.endpoint, tenantId: values.tenant, limit });
    if (values.json === true) writeJson(io, data);
    else printGroups(io, data);
    return 0;
  } finally {
    await client.close();
  }
}

function printGroups(io: CliIo, groups: readonly FailureGroup[]): void {
  if (groups.length === 0) {
    io.stdout.write('No failures.\n');
    return;
  }
  io.stdout.write(
    table(
      ['ENDPOINT', 'KIND', 'COUNT', 'RETRYING', 'DEAD', 'SINCE', 'LAST', 'SAMPLE'],
      groups.map((g) => [g.endpointId, g.kind, g.count.total, g.count.retrying, g.count.dead, time(g.firstSeen), time(g.lastSeen), sampleText(g.sample)]),
    ),
  );
}

/** `HTTP 503 "upstream busy…"`, or the error's summary. */
function sampleText(sample: FailureGroup['sample']): string {
  if (sample === null) return '';
  if (sample.body === null || sample.body === '') return sample.summary;
  const body = sample.body.replace(/\s+/g, ' ').trim();
  return `${sample.summary} ${JSON.stringify(body.length > SAMPLE_BODY_CHARS ? `${body.slice(0, SAMPLE_BODY_CHARS)}…` : body)}`;
}
