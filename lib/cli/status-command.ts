/**
 * `herald status`: this node as `GET /v1/status` describes it: slots, requests
 * in flight, the store, deliveries by status, and each live endpoint actor
 * with its breaker, queue, last error and recent failure rate.
 */
import { durationText } from '../clock.ts';
import { AdminClient } from './admin-client.ts';
import { connectionOf, parseCommand, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { STATUS_USAGE } from './usage.ts';
import { keyValues, table, time } from './table.ts';

interface Status {
  readonly node: string;
  readonly startedAt: number;
  readonly slotsOwned: number;
  readonly slotCount: number;
  readonly inFlight: number;
  readonly fencedWrites: number;
  readonly deliveries: Record<string, number>;
  readonly unfannedEvents: number;
  readonly store: { reachable: boolean; available: boolean; latencyMs: number; error: string | null };
  readonly actors: ReadonlyArray<{ endpointId: string; breaker: string; queued: number; running: number; pausedUntil: number | null; lastError: string | null }>;
  readonly recent: { windowMs: number; endpoints: ReadonlyArray<{ endpointId: string; attempts: number; failures: number; failureRate: number }> };
}

export async function runStatus(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {}, false);
  if (values.help === true) {
    io.stdout.write(`${STATUS_USAGE}\n`);
    return 0;
  }
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    const status = await client.get<Status>('/v1/status');
    if (values.json === true) {
      writeJson(io, status);
      return 0;
    }
    const store = !status.store.reachable
      ? `UNREACHABLE: ${status.store.error ?? ''}`
      : status.store.available
        ? `reachable (${durationText(status.store.latencyMs)})`
        : `UNAVAILABLE: ${status.store.error ?? ''}`;
    io.stdout.write(
      keyValues([
        ['node', status.node],
        ['started', `${time(status.startedAt)} UTC`],
        ['slots', `${status.slotsOwned} of ${status.slotCount}`],
        ['in flight', status.inFlight],
        ['fenced writes', status.fencedWrites],
        ['store', store],
        ['deliveries', Object.entries(status.deliveries).map(([k, v]) => `${k}=${v}`).join(' ')],
        ['outbox', `${status.unfannedEvents} events not fanned out yet`],
      ]),
    );
    const recent = new Map(status.recent.endpoints.map((e) => [e.endpointId, e]));
    const ids = [...new Set([...status.actors.map((a) => a.endpointId), ...recent.keys()])].sort();
    if (ids.length > 0) {
      const actors = new Map(status.actors.map((a) => [a.endpointId, a]));
      io.stdout.write(`\nEndpoints active on this node (failures over the last ${durationText(status.recent.windowMs)}):\n`);
      io.stdout.write(
        table(
          ['ENDPOINT', 'BREAKER', 'QUEUED', 'RUNNING', 'PAUSED UNTIL', 'FAILURES', 'LAST ERROR'],
          ids.map((id) => {
            const a = actors.get(id);
            const r = recent.get(id);
            return [
              id,
              a?.breaker ?? '-',
              a?.queued ?? 0,
              a?.running ?? 0,
              time(a?.pausedUntil ?? null),
              r === undefined ? '-' : `${r.failures}/${r.attempts} (${Math.round(r.failureRate * 100)} %)`,
              a?.lastError,
            ];
          }),
        ),
      );
    }
    return 0;
  } finally {
    await client.close();
  }
}
