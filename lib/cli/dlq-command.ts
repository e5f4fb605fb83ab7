/**
 * `herald dlq list`, `herald dlq ack`, `herald dlq discard` and `herald dlq
 * replay`: the dead-letter queue, and its triage. `ack` and `discard` take
 * dead-letter ids and `--note` and `--by`, sent in one request
 * (`POST /v1/dead-letters/acknowledge|discard {ids, note, by}`); an id the API
 * skips (unknown, replayed or discarded already) is named on stderr and the
 * exit code is 1.
 *
 * A bulk replay runs in pages from this client, so it can show progress and
 * be interrupted between pages: list up to 100 matching dead letters not yet
 * replayed, replay them by id in one request (`POST /v1/dead-letters/replay
 * {ids}`), and again until none is left. Without `--until`, the replay stops
 * at the dead letters that existed when the command started, so letters that
 * die again during the replay are not chased forever. A letter the API skips
 * (its endpoint was deleted) is left out of the next pages.
 */
import { AdminClient } from './admin-client.ts';
import { connectionOf, parseCommand, parseInteger, parseTime, UsageError, writeJson, type CliIo } from './cli-io.ts';
import { DLQ_USAGE } from './usage.ts';
import { ProgressBar } from './progress-bar.ts';
import { table, time } from './table.ts';
import { durationText, systemClock } from '../clock.ts';

interface DeadLetter {
  readonly id: string;
  readonly endpointId: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly reason: string;
  readonly createdAt: number;
  readonly replayedAt: number | null;
  readonly attempts: readonly unknown[];
  readonly ageMs: number;
  readonly triage: { readonly state: string; readonly note: string | null; readonly by: string | null; readonly at: number };
}

interface TriageAnswer {
  readonly state: string;
  readonly updated: number;
  readonly ids: string[];
  readonly skipped: Array<{ readonly id: string; readonly reason: string }>;
}

/** What `dlq ack|discard` takes besides the dead-letter ids. */
const TRIAGE_FLAGS: ReadonlySet<string> = new Set(['note', 'by', 'json', 'url', 'token', 'help']);

/** The states `--state` takes, as the API names them. */
const STATES = ['new', 'acknowledged', 'replayed', 'discarded'];
/** `herald dlq <action>` → the API's word for it. */
const TRIAGE_ACTIONS: Readonly<Record<string, { readonly path: string; readonly done: string }>> = {
  ack: { path: 'acknowledge', done: 'Acknowledged' },
  discard: { path: 'discard', done: 'Discarded' },
};

interface ReplayAnswer {
  readonly replayed: number;
  readonly ids: string[];
  readonly skipped: string[];
}

const PAGE = 100;
const MAX_LIST = 1_000;

const OPTIONS = {
  id: { type: 'string' },
  endpoint: { type: 'string' },
  tenant: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  limit: { type: 'string' },
  'include-replayed': { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  'page-size': { type: 'string' },
  state: { type: 'string' },
  note: { type: 'string' },
  by: { type: 'string' },
} as const;

type DlqValues = ReturnType<typeof parseCommand<typeof OPTIONS>>['values'];

export async function runDlq(args: readonly string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseCommand(args, OPTIONS);
  if (values.help === true) {
    io.stdout.write(`${DLQ_USAGE}\n`);
    return 0;
  }
  const [action, ...extra] = positionals;
  const triage = action === undefined ? undefined : TRIAGE_ACTIONS[action];
  if (action !== undefined && triage !== undefined) return triageLetters(action, triage, extra, values, io);
  if (values.note !== undefined || values.by !== undefined) throw new UsageError(`dlq ${action ?? ''}: --note and --by belong to dlq ack and dlq discard`);
  if (extra.length > 0) throw new UsageError(`unexpected argument '${extra[0]}'`);
  const filter = {
    endpointId: values.endpoint,
    tenantId: values.tenant,
    since: values.since === undefined ? undefined : parseTime('since', values.since),
    until: values.until === undefined ? undefined : parseTime('until', values.until),
  };
  if (action !== 'list' && action !== 'replay') {
    throw new UsageError(action === undefined ? 'dlq: an action is required (list, ack, discard, replay)' : `dlq: unknown action '${action}'`);
  }
  if (action === 'list' && (values.id !== undefined || values['dry-run'] === true)) throw new UsageError('dlq list: --id and --dry-run belong to dlq replay');
  if (action === 'replay' && values.state !== undefined) throw new UsageError('dlq replay: --state belongs to dlq list (a replay by filter takes new and acknowledged ones)');
  if (values.state !== undefined && !STATES.includes(values.state)) {
    throw new UsageError(`--state: must be one of ${STATES.join(', ')} (got ${JSON.stringify(values.state)})`);
  }
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    if (action === 'list') {
      const limit = values.limit === undefined ? 100 : parseInteger('limit', values.limit, 1, MAX_LIST);
      const { data } = await client.get<{ data: DeadLetter[] }>('/v1/dead-letters', {
        ...filter,
        limit,
        state: values.state,
        includeReplayed: values['include-replayed'] === true ? true : undefined,
      });
      if (values.json === true) writeJson(io, data);
      else printLetters(io, data);
      return 0;
    }
    if (values.id !== undefined) {
      if (Object.values(filter).some((v) => v !== undefined)) throw new UsageError('dlq replay: --id cannot be combined with a filter');
      return await replayOne(client, io, values.id, values['dry-run'] === true, values.json === true);
    }
    if (Object.values(filter).every((v) => v === undefined)) {
      throw new UsageError('dlq replay: give --id, or at least one of --endpoint, --tenant, --since, --until');
    }
    const bounded = { ...filter, until: filter.until ?? systemClock.now() };
    if (values['dry-run'] === true) {
      // The count is the server's (every match); the listing shows the first ones.
      const [{ wouldReplay }, { data }] = await Promise.all([
        client.post<{ wouldReplay: number }>('/v1/dead-letters/replay', { ...bounded, dryRun: true }),
        client.get<{ data: DeadLetter[] }>('/v1/dead-letters', { ...bounded, limit: MAX_LIST }),
      ]);
      if (values.json === true) writeJson(io, { dryRun: true, matching: wouldReplay, more: wouldReplay > data.length, ids: data.map((d) => d.id) });
      else {
        printLetters(io, data);
        io.stdout.write(`Dry run: would replay ${wouldReplay} dead letter(s)${wouldReplay > data.length ? ` (the first ${data.length} listed)` : ''}.\n`);
      }
      return 0;
    }
    const pageSize = values['page-size'] === undefined ? PAGE : parseInteger('page-size', values['page-size'], 1, PAGE * 5);
    const result = await replayInPages(client, io, bounded, pageSize);
    if (values.json === true) writeJson(io, result);
    else io.stdout.write(`Replayed ${result.replayed} dead letter(s)${result.skipped.length > 0 ? `; skipped ${result.skipped.length} (endpoint deleted or replayed meanwhile)` : ''}.\n`);
    return 0;
  } finally {
    await client.close();
  }
}

/** `dlq ack|discard <id…> --note … --by …`: exit 0 when every id was set, 1 when one was skipped (named on stderr). */
async function triageLetters(
  action: string,
  triage: { readonly path: string; readonly done: string },
  ids: readonly string[],
  values: DlqValues,
  io: CliIo,
): Promise<number> {
  if (ids.length === 0) throw new UsageError(`dlq ${action}: name at least one dead-letter id`);
  if (values.note === undefined || values.by === undefined) {
    throw new UsageError(`dlq ${action}: --note (why) and --by (who) are required`);
  }
  const others = (Object.keys(values) as Array<keyof DlqValues>).filter((key) => values[key] !== undefined && !TRIAGE_FLAGS.has(key));
  if (others.length > 0) throw new UsageError(`dlq ${action}: --${others[0]} does not apply; name the dead letters by id`);
  const client = new AdminClient(connectionOf(values, io.env));
  try {
    const answer = await client.post<TriageAnswer>(`/v1/dead-letters/${triage.path}`, { ids, note: values.note, by: values.by });
    if (values.json === true) writeJson(io, answer);
    else if (answer.ids.length > 0) io.stdout.write(`${triage.done} ${answer.ids.join(', ')}.\n`);
    for (const { id, reason } of answer.skipped) {
      io.stderr.write(`herald: skipped ${id}: ${reason === 'unknown' ? 'no such dead letter' : `${reason} already`}\n`);
    }
    return answer.skipped.length === 0 ? 0 : 1;
  } finally {
    await client.close();
  }
}

async function replayOne(client: AdminClient, io: CliIo, id: string, dryRun: boolean, json: boolean): Promise<number> {
  const path = `/v1/dead-letters/${encodeURIComponent(id)}`;
  if (dryRun) {
    const letter = await client.get<DeadLetter>(path);
    const would = letter.replayedAt === null;
    if (json) writeJson(io, { dryRun: true, matching: would ? 1 : 0, ids: would ? [id] : [] });
    else io.stdout.write(would ? `Dry run: would replay ${id} (${letter.eventType} to ${letter.endpointId}).\n` : `Dry run: ${id} was replayed already.\n`);
    return 0;
  }
  const answer = await client.post<ReplayAnswer>(`${path}/replay`);
  if (json) writeJson(io, { replayed: answer.replayed, ids: answer.ids, skipped: [] });
  else io.stdout.write(`Replayed ${id}.\n`);
  return 0;
}

async function replayInPages(
  client: AdminClient,
  io: CliIo,
  filter: Readonly<Record<string, string | number | undefined>>,
  pageSize: number,
): Promise<{ replayed: number; ids: string[]; skipped: string[] }> {
  const bar = new ProgressBar(io.stderr, 'dead letters replayed');
  const skipped = new Set<string>();
  const ids: string[] = [];
  let total: number | null = null;
  let first = true;
  try {
    for (;;) {
      const limit = Math.min(MAX_LIST, pageSize + skipped.size);
      const { data } = await client.get<{ data: DeadLetter[] }>('/v1/dead-letters', { ...filter, limit });
      // The total is known when everything fits in the first page; otherwise it shows as it grows.
      if (first && data.length < limit) total = data.length;
      first = false;
      const fresh = data.filter((d) => !skipped.has(d.id)).map((d) => d.id);
      if (fresh.length === 0) break;
      const answer = await client.post<ReplayAnswer>('/v1/dead-letters/replay', { ids: fresh });
      ids.push(...answer.ids);
      for (const id of answer.skipped) skipped.add(id);
      bar.update(ids.length, total, skipped.size > 0 ? `${skipped.size} skipped` : '');
      if (data.length < limit) break;
      if (skipped.size >= MAX_LIST - pageSize) {
        io.stderr.write(`herald: stopping: ${skipped.size} dead letters cannot be replayed (their endpoints were deleted)\n`);
        break;
      }
    }
  } finally {
    bar.finish();
  }
  return { replayed: ids.length, ids, skipped: [...skipped] };
}

function printLetters(io: CliIo, data: readonly DeadLetter[]): void {
  if (data.length === 0) {
    io.stdout.write('No dead letters match.\n');
    return;
  }
  io.stdout.write(
    table(
      ['DIED', 'AGE', 'ID', 'STATE', 'BY', 'ENDPOINT', 'EVENT TYPE', 'ATTEMPTS', 'REASON', 'NOTE'],
      data.map((d) => [
        time(d.createdAt),
        durationText(d.ageMs),
        d.id,
        d.triage.state,
        d.triage.by,
        d.endpointId,
        d.eventType,
        d.attempts.length,
        d.reason,
        d.triage.note,
      ]),
    ),
  );
}
