/**
 * `herald replays`: paced replay jobs (`/v1/replays`). `start` takes the
 * filter of a bulk replay (`--endpoint`, `--tenant`, `--since`, `--until`,
 * at least one) and `--chunk-size`; `--dry-run` prints the count and starts
 * nothing; `--wait` follows the job with a progress bar until it ends (once a
 * second). `list`, `show <id>` and `cancel <id>` read and stop the jobs of
 * every node (they are kept in the store).
 */
import { holdProcessOpen, systemClock } from '../clock.ts';
import type { ReplayJob } from '../dead-letters/replay-jobs.ts';
import { AdminClient } from './admin-client.ts';
import { connectionOf, parseCommand, parseInteger, parseTime, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { ProgressBar } from './progress-bar.ts';
import { table, time } from './table.ts';
import { REPLAYS_USAGE } from './usage.ts';

const OPTIONS = {
  endpoint: { type: 'string' },
  tenant: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  'chunk-size': { type: 'string' },
  'dry-run': { type: 'boolean' },
  wait: { type: 'boolean' },
} as const;

const WAIT_POLL_MS = 1_000;

export async function runReplays(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, OPTIONS);
  if (values.help === true) {
    io.stdout.write(`${REPLAYS_USAGE}\n`);
    return 0;
  }
  const [action = 'list', id, ...extra] = positionals;
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  const filter = {
    endpointId: values.endpoint,
    tenantId: values.tenant,
    since: values.since === undefined ? undefined : parseTime('since', values.since),
    until: values.until === undefined ? undefined : parseTime('until', values.until),
  };
  const hasFilter = Object.values(filter).some((v) => v !== undefined);
  if (action !== 'start' && (hasFilter || values['chunk-size'] !== undefined || values['dry-run'] === true)) {
    throw new UsageError(`replays ${action}: the filter, --chunk-size and --dry-run belong to replays start`);
  }
  if ((action === 'show' || action === 'cancel') && id === undefined) throw new UsageError(`replays ${action}: a replay job id is required`);
  if ((action === 'list' || action === 'start') && id !== undefined) throw new UsageError(`unexpected argument '${id}'`);
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    switch (action) {
      case 'list': {
        const { data } = await client.get<{ data: ReplayJob[] }>('/v1/replays');
        if (values.json === true) writeJson(io, data);
        else printJobs(io, data);
        return 0;
      }
      case 'show':
      case 'cancel': {
        const path = `/v1/replays/${encodeURIComponent(id ?? '')}`;
        const job = action === 'show' ? await client.get<ReplayJob>(path) : await client.delete<ReplayJob>(path);
        if (values.json === true) writeJson(io, job);
        else printJobs(io, [job]);
        return 0;
      }
      case 'start': {
        if (!hasFilter) throw new UsageError('replays start: give at least one of --endpoint, --tenant, --since, --until');
        const chunkSize = values['chunk-size'] === undefined ? undefined : parseInteger('chunk-size', values['chunk-size'], 1, 1_000);
        if (values['dry-run'] === true) {
          const { wouldReplay } = await client.post<{ wouldReplay: number }>('/v1/replays', { ...filter, dryRun: true });
          if (values.json === true) writeJson(io, { dryRun: true, wouldReplay });
          else io.stdout.write(`Dry run: would replay ${wouldReplay} dead letter(s).\n`);
          return 0;
        }
        let job = await client.post<ReplayJob>('/v1/replays', { ...filter, chunkSize });
        if (values.wait === true) job = await follow(client, io, job);
        if (values.json === true) writeJson(io, job);
        else io.stdout.write(`Replay ${job.id}: ${job.state}, ${job.replayed} of ${job.total} dead letter(s) replayed.\n`);
        return job.state === 'failed' ? 1 : 0;
      }
      default:
        throw new UsageError(`replays: unknown action '${action}' (list, show, cancel, start)`);
    }
  } finally {
    await client.close();
  }
}

/** Polls the job until it is no longer running, drawing its progress on stderr. */
async function follow(client: AdminClient, io: CliIo, started: ReplayJob): Promise<ReplayJob> {
  const bar = new ProgressBar(io.stderr, 'dead letters replayed');
  let job = started;
  bar.update(job.replayed, job.total);
  // The clock's timers are unref()ed: without this the process would end during the wait.
  const release = holdProcessOpen();
  try {
    while (job.state === 'running') {
      await new Promise<void>((resolve) => systemClock.setTimeout(resolve, WAIT_POLL_MS));
      job = await client.get<ReplayJob>(`/v1/replays/${encodeURIComponent(job.id)}`);
      bar.update(job.replayed, job.total, job.state === 'running' ? `${job.waiting} waiting` : job.state);
    }
  } finally {
    release();
    bar.finish();
  }
  return job;
}

function printJobs(io: CliIo, jobs: readonly ReplayJob[]): void {
  if (jobs.length === 0) {
    io.stdout.write('No replay jobs.\n');
    return;
  }
  io.stdout.write(
    table(
      ['ID', 'STATE', 'REPLAYED', 'TOTAL', 'WAITING', 'CHUNK', 'STARTED', 'FINISHED', 'ERROR'],
      jobs.map((j) => [j.id, j.state, j.replayed, j.total, j.waiting, j.chunkSize, time(j.createdAt), j.finishedAt === null ? '' : time(j.finishedAt), j.error ?? '']),
    ),
  );
}
