/**
 * `herald deliveries`: the delivery log, newest first, walking the API's
 * cursor pages until `--limit` deliveries are shown; and `herald deliveries
 * attempts <id>`: every attempt of one delivery.
 */
import { durationText } from '../clock.ts';
import { AdminClient } from './admin-client.ts';
import { connectionOf, parseCommand, parseInteger, parseTime, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { DELIVERIES_USAGE } from './usage.ts';
import { table, time } from './table.ts';

interface Delivery {
  readonly id: string;
  readonly eventId: string;
  readonly endpointId: string;
  readonly eventType: string;
  readonly status: string;
  readonly attempts: number;
  readonly lastError: string | null;
  readonly createdAt: number;
  readonly nextAttemptAt: number;
}

interface Attempt {
  readonly number: number;
  readonly round: number;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly outcome: { kind: string; status?: number };
  readonly error: string | null;
}

const PAGE = 100;

export async function runDeliveries(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {
    endpoint: { type: 'string' },
    tenant: { type: 'string' },
    type: { type: 'string' },
    status: { type: 'string' },
    since: { type: 'string' },
    until: { type: 'string' },
    limit: { type: 'string' },
  });
  if (values.help === true) {
    io.stdout.write(`${DELIVERIES_USAGE}\n`);
    return 0;
  }
  const [action, id, ...extra] = positionals;
  if (action !== undefined && action !== 'attempts') throw new UsageError(`deliveries: unknown action '${action}'`);
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  const limit = values.limit === undefined ? 50 : parseInteger('limit', values.limit, 1, 100_000);
  const query = {
    endpointId: values.endpoint,
    tenantId: values.tenant,
    eventType: values.type,
    status: values.status,
    since: values.since === undefined ? undefined : parseTime('since', values.since),
    until: values.until === undefined ? undefined : parseTime('until', values.until),
  };
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    if (action === 'attempts') {
      if (id === undefined) throw new UsageError('deliveries attempts: the delivery id is required');
      const { data } = await client.get<{ data: Attempt[] }>(`/v1/deliveries/${encodeURIComponent(id)}/attempts`);
      if (values.json === true) writeJson(io, data);
      else {
        // The trace of its event (W3C traceparent 00-<trace id>-…), to look it up in a tracing backend.
        const { traceContext } = await client.get<{ traceContext: { traceparent: string } | null }>(`/v1/deliveries/${encodeURIComponent(id)}`);
        if (traceContext) io.stdout.write(`trace ${traceContext.traceparent.split('-')[1] ?? ''}\n`);
        io.stdout.write(
          table(
            ['ROUND', '#', 'STARTED', 'DURATION', 'RESULT'],
            data.map((a) => [a.round, a.number, time(a.startedAt), durationText(a.durationMs), a.error ?? `HTTP ${a.outcome.status ?? ''}`]),
          ),
        );
      }
      return 0;
    }
    const shown: Delivery[] = [];
    let cursor: string | null = null;
    do {
      const page: { data: Delivery[]; nextCursor: string | null } = await client.get('/v1/deliveries', {
        ...query,
        limit: Math.min(PAGE, limit - shown.length),
        cursor: cursor ?? undefined,
      });
      shown.push(...page.data);
      cursor = page.nextCursor;
    } while (cursor !== null && shown.length < limit);
    if (values.json === true) writeJson(io, { data: shown, nextCursor: cursor });
    else if (shown.length === 0) io.stdout.write('No deliveries match.\n');
    else {
      io.stdout.write(
        table(
          ['CREATED', 'STATUS', 'ATTEMPTS', 'ENDPOINT', 'EVENT TYPE', 'DELIVERY', 'LAST ERROR'],
          shown.map((d) => [time(d.createdAt), d.status, d.attempts, d.endpointId, d.eventType, d.id, d.lastError]),
        ),
      );
      if (cursor !== null) io.stdout.write(`… more; raise --limit to see them.\n`);
    }
    return 0;
  } finally {
    await client.close();
  }
}
